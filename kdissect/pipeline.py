"""The whole pipeline, capture file to paired messages, as one generator."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, read_frames
from kdissect.notes import Note
from kdissect.pair.message import Message, message_from_frame
from kdissect.pair.pairing import pair_messages

Source = str | os.PathLike[str] | BinaryIO


def read_messages(
    source: Source,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    report: Callable[[Note], None] | None = None,
) -> Iterator[Message]:
    """Every Kafka message of a capture, paired, in capture order, streaming.

    Raises `kdissect.ingest.capture.CaptureError` only when the source is not a
    readable capture at all; every other problem is a note, either on the
    message it concerns or passed to `report` (capture-level problems).
    """
    frames = read_frames(
        source, ports=ports, detect=detect, max_frame_size=max_frame_size, report=report
    )
    messages = (message_from_frame(number, frame) for number, frame in enumerate(frames, 1))
    return pair_messages(messages)
