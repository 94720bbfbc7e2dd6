"""The whole pipeline, capture file to paired messages, as one generator."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO, TypeAlias

from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, read_frames
from kdissect.ingest.sasl import mask_secrets
from kdissect.notes import Note
from kdissect.pair.message import Message, parse_message
from kdissect.pair.pairing import pair_messages

if TYPE_CHECKING:
    from kdissect.ingest.tls import KeyLog

Source = str | os.PathLike[str] | BinaryIO
KeyLogSource: TypeAlias = "KeyLog | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]"


def read_messages(
    source: Source,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    report: Callable[[Note], None] | None = None,
    tls_keylog: KeyLogSource | None = None,
    show_secrets: bool = False,
) -> Iterator[Message]:
    """Every Kafka message of a capture, paired, in capture order, streaming.

    Raises `kdissect.ingest.capture.CaptureError` only when the source is not a
    readable capture at all; every other problem is a note, either on the
    message it concerns or passed to `report` (capture-level problems).

    `tls_keylog` (NSS key log files, or a `kdissect.ingest.tls.KeyLog`) decrypts
    TLS connections; a key log file that cannot be read raises `KeyLogError`.
    SASL passwords, proofs and tokens are masked in the frames unless `show_secrets`.
    """
    keys = None
    if tls_keylog is not None:
        from kdissect.ingest.tls import load_keylog  # needs cryptography: only when asked

        keys = load_keylog(tls_keylog)
    frames = read_frames(source, ports=ports, detect=detect, max_frame_size=max_frame_size,
                         report=report, tls_keys=keys)
    frames = mask_secrets(frames, show_secrets=show_secrets)
    messages = (parse_message(number, frame) for number, frame in enumerate(frames, 1))
    return pair_messages(messages)
