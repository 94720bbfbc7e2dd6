"""The whole pipeline, capture file to paired messages: the one place the stages are wired.

records (capture, files) -> TCP segments (net) -> byte streams (reassembly) -> [TLS
records decrypted (tls)] -> Kafka connections and frames (connections, framing) ->
SASL secrets masked (sasl) -> messages (pair.message) -> pairs, in capture order
(pair.pairing).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeAlias

from kdissect.ingest.capture import CaptureError, CaptureRecord
from kdissect.ingest.connections import KafkaConnections
from kdissect.ingest.files import CaptureSource, PacketOrigins, merged_records, source_name
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, Frame
from kdissect.ingest.net import decode_tcp
from kdissect.ingest.reassembly import MAX_HELD_BYTES, ConnectionTracker, HoldLimits
from kdissect.ingest.sasl import SecretMasker
from kdissect.notes import Note
from kdissect.pair.message import Message, message_from_frame
from kdissect.pair.pairing import Pairer, Sequencer

if TYPE_CHECKING:
    from kdissect.ingest.tls import KeyLog

KeyLogSource: TypeAlias = "KeyLog | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]"
Report = Callable[[Note], None]


class CaptureClock:
    """Watches a capture's records go by and keeps the time of its first packet."""

    def __init__(self) -> None:
        self.start_ns: int | None = None

    @property
    def start(self) -> float | None:
        """Seconds since the epoch of the first packet (None before it went by)."""
        return None if self.start_ns is None else self.start_ns / 1e9

    def watch(self, records: Iterable[CaptureRecord]) -> Iterator[CaptureRecord]:
        """The records, the first one's time noted as it goes by (lazily, like the records)."""
        records = iter(records)
        first = next(records, None)
        if first is None:
            return
        if self.start_ns is None:
            self.start_ns = first[1]
        yield first
        yield from records  # no work of ours per record


def read_messages(
    source: CaptureSource | Sequence[CaptureSource],
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    max_held: int = MAX_HELD_BYTES,
    report: Report | None = None,
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
    packet (what relative times count from) as it goes by. `max_held` bounds the
    bytes each connection holds beyond holes in its streams.

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
    frames = frames_from_records(records, ports=ports, detect=detect, max_frame_size=max_frame_size,
                                 max_held=max_held, report=report, tls_keys=keys)
    return _paired_messages(frames, origins, show_secrets)


def _paired_messages(frames: Iterator[Frame], origins: PacketOrigins, show_secrets: bool
                     ) -> Iterator[Message]:
    """Frames to messages, SASL secrets masked, paired, in capture order (what
    `mask_secrets`, `message_from_frame` and `pair_messages` do, in one loop)."""
    mask = SecretMasker(show_secrets=show_secrets)
    pairer, sequencer = Pairer(), Sequencer()
    add, push = pairer.add, sequencer.push
    name_of = origins.name_of
    only = origins.names[0] if len(origins.names) == 1 else None  # one file: every message's
    for number, frame in enumerate(frames, 1):
        message = message_from_frame(number, mask(frame))
        message.file = only if only is not None else name_of(frame.last_packet)
        add(message)
        yield from push(message)
    yield from sequencer.finish()


def read_frames(source: CaptureSource | Sequence[CaptureSource], *,
                ports: Iterable[int] = DEFAULT_PORTS, detect: bool = True,
                max_frame_size: int = MAX_FRAME_SIZE, max_held: int = MAX_HELD_BYTES,
                report: Report | None = None, tls_keys: KeyLog | None = None) -> Iterator[Frame]:
    """Every Kafka frame of a capture, in the order frames are completed.

    A frame's first/last packet are the lowest/highest numbered packets that carried
    its bytes. Connections are numbered 0, 1, 2... in the order their first Kafka
    bytes appear. Frames come out later than their last packet when they wait for
    a hole before them to be filled or declared lost (see reassembly), when
    resynchronisation needs the next frame to confirm them, or when a response
    waits for its request (see framing). `max_held` bounds the bytes each
    connection holds beyond holes; `tls_keys` decrypts TLS connections. Raises
    CaptureError, on the first iteration, only when the source is not a readable
    capture at all; other problems become notes on the frames or go to `report`.
    """
    sources: list[CaptureSource] = list(source) if isinstance(source, list | tuple) else [source]  # type: ignore[list-item]
    origins = PacketOrigins([source_name(s) for s in sources])
    records = merged_records(sources, origins, report)
    return frames_from_records(records, ports=ports, detect=detect, max_frame_size=max_frame_size,
                               max_held=max_held, report=report, tls_keys=tls_keys)


def frames_from_records(records: Iterable[CaptureRecord], *, ports: Iterable[int] = DEFAULT_PORTS,
                        detect: bool = True, max_frame_size: int = MAX_FRAME_SIZE,
                        max_held: int = MAX_HELD_BYTES, report: Report | None = None,
                        tls_keys: KeyLog | None = None) -> Iterator[Frame]:
    """read_frames over records already read (number, time in ns, linktype, data, length)."""
    kafka = KafkaConnections(frozenset(ports), detect, max_frame_size, report or _ignore,
                             tls_keys=tls_keys)
    tracker = ConnectionTracker(kafka.open, HoldLimits(max_held=max_held))
    out = kafka.out
    segment = tracker.segment
    for number, timestamp, linktype, data, original_length in records:
        raw = decode_tcp(linktype, data, original_length)
        if raw is None:
            kafka.not_tcp(linktype)
        else:
            segment(number, timestamp, raw)
        if timestamp > tracker.due:  # every packet moves capture time on
            tracker.tick(timestamp)
        if out:
            yield from out
            out.clear()
    tracker.finish()
    kafka.finish()
    yield from out
    out.clear()


def _ignore(_note: Note) -> None:
    pass
