"""The whole pipeline, capture file to paired messages, as one generator."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeAlias

from kdissect.ingest.capture import CaptureError, Record
from kdissect.ingest.files import CaptureSource, PacketOrigins, merged_records, source_name
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, Frame, frames_from_records
from kdissect.ingest.sasl import mask_secrets
from kdissect.notes import Note
from kdissect.pair.message import Message, message_from_frame
from kdissect.pair.pairing import pair_messages

if TYPE_CHECKING:
    from kdissect.ingest.tls import KeyLog

KeyLogSource: TypeAlias = "KeyLog | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]"


class CaptureClock:
    """Watches a capture's records go by and keeps the time of its first packet."""

    def __init__(self) -> None:
        self.start: float | None = None

    def watch(self, records: Iterable[Record]) -> Iterator[Record]:
        for record in records:
            if self.start is None:
                self.start = record[1]
            yield record


def read_messages(
    source: CaptureSource | Sequence[CaptureSource],
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    report: Callable[[Note], None] | None = None,
    unreadable: Callable[[int, CaptureError], None] | None = None,
    names: Sequence[str] | None = None,
    clock: CaptureClock | None = None,
    tls_keylog: KeyLogSource | None = None,
    show_secrets: bool = False,
) -> Iterator[Message]:
    """Every Kafka message of a capture, paired, in capture order, streaming.

    Several sources (a list or tuple) are read as one capture, merged by packet
    time (a rotated set); each message's `file` names the file its last packet
    came from (`names` overrides how sources are named). Raises
    `kdissect.ingest.capture.CaptureError` only when a source is not a readable
    capture at all (with several sources and an `unreadable` handler, that file
    is reported to the handler by its index and left out); every other problem
    is a note, either on the message it concerns or passed to `report`
    (capture-level problems). A `clock` learns the time of the capture's first
    packet (what relative times count from) as it goes by.

    `tls_keylog` (NSS key log files, or a `kdissect.ingest.tls.KeyLog`) decrypts
    TLS connections; a key log file that cannot be read raises `KeyLogError`.
    SASL passwords, proofs and tokens are masked in the frames unless `show_secrets`.
    """
    keys = None
    if tls_keylog is not None:
        from kdissect.ingest.tls import load_keylog  # needs cryptography: only when asked

        keys = load_keylog(tls_keylog)
    sources: list[CaptureSource] = list(source) if isinstance(source, list | tuple) else [source]  # type: ignore[list-item]
    origins = PacketOrigins(names or [source_name(s) for s in sources])
    records = merged_records(sources, origins, report, unreadable)
    if clock is not None:
        records = clock.watch(records)
    frames = frames_from_records(records, ports=ports, detect=detect,
                                 max_frame_size=max_frame_size, report=report, tls_keys=keys)
    frames = mask_secrets(frames, show_secrets=show_secrets)
    return pair_messages(_messages(frames, origins))


def _messages(frames: Iterator[Frame], origins: PacketOrigins) -> Iterator[Message]:
    name_of = origins.name_of
    for number, frame in enumerate(frames, 1):
        message = message_from_frame(number, frame)
        message.file = name_of(frame.last_packet)
        yield message
