"""The whole pipeline, capture file to paired messages: the one place the stages are wired.

records (capture) -> TCP segments (net) -> byte streams (reassembly) -> Kafka
connections and frames (connections, framing) -> messages (pair.message) ->
pairs, in capture order (pair.pairing).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from kdissect.ingest.capture import Record, read_records
from kdissect.ingest.connections import KafkaConnections
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, Frame
from kdissect.ingest.net import decode_tcp
from kdissect.ingest.reassembly import MAX_HELD_BYTES, ConnectionTracker, HoldLimits
from kdissect.notes import Note
from kdissect.pair.message import Message, parse_message
from kdissect.pair.pairing import pair_messages

Source = str | os.PathLike[str] | BinaryIO
Report = Callable[[Note], None]


def read_messages(
    source: Source,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    max_held: int = MAX_HELD_BYTES,
    report: Report | None = None,
) -> Iterator[Message]:
    """Every Kafka message of a capture, paired, in capture order, streaming.

    Raises `kdissect.ingest.capture.CaptureError` only when the source is not a
    readable capture at all; every other problem is a note, either on the
    message it concerns or passed to `report` (capture-level problems).
    """
    frames = read_frames(source, ports=ports, detect=detect, max_frame_size=max_frame_size,
                         max_held=max_held, report=report)
    messages = (parse_message(number, frame) for number, frame in enumerate(frames, 1))
    return pair_messages(messages)


def read_frames(source: Source, *, ports: Iterable[int] = DEFAULT_PORTS, detect: bool = True,
                max_frame_size: int = MAX_FRAME_SIZE, max_held: int = MAX_HELD_BYTES,
                report: Report | None = None) -> Iterator[Frame]:
    """Every Kafka frame of a capture, in the order frames are completed.

    A frame's first/last packet are the lowest/highest numbered packets that carried
    its bytes. Connections are numbered 0, 1, 2... in the order their first Kafka
    bytes appear. Frames come out later than their last packet when they wait for
    a hole before them to be filled or declared lost (see reassembly), when
    resynchronisation needs the next frame to confirm them, or when a response
    waits for its request (see framing). `max_held` bounds the bytes each
    connection holds beyond holes. Raises CaptureError, on the first iteration,
    only when the source is not a readable capture at all; other problems become
    notes on the frames or go to `report`.
    """
    records = read_records(source, report)
    return frames_from_records(records, ports=ports, detect=detect, max_frame_size=max_frame_size,
                               max_held=max_held, report=report)


def frames_from_records(records: Iterable[Record], *, ports: Iterable[int] = DEFAULT_PORTS,
                        detect: bool = True, max_frame_size: int = MAX_FRAME_SIZE,
                        max_held: int = MAX_HELD_BYTES,
                        report: Report | None = None) -> Iterator[Frame]:
    """read_frames over records already read (number, time in ns, linktype, data, length)."""
    kafka = KafkaConnections(frozenset(ports), detect, max_frame_size, report or _ignore)
    tracker = ConnectionTracker(kafka.open, HoldLimits(max_held=max_held))
    out = kafka.out
    segment = tracker.segment
    for number, timestamp, linktype, data, original_length in records:
        raw = decode_tcp(linktype, data, original_length)
        if raw is None:
            kafka.not_tcp(linktype)
            continue
        segment(number, timestamp, raw)
        if out:
            yield from out
            out.clear()
    tracker.finish()
    kafka.finish()
    yield from out
    out.clear()


def _ignore(_note: Note) -> None:
    pass
