"""Messages and trees as plain JSON-ready records (the CLI's JSON, the DataFrames' rows)."""

from __future__ import annotations

import json
import math
import uuid
from decimal import Decimal
from typing import Any

from kdissect.decode.tree import Node
from kdissect.ingest.net import format_address
from kdissect.notes import Note
from kdissect.pair.message import Message

# The columns of a message record, in order; `tree` is added by JSON output.
MESSAGE_COLUMNS = (
    "number", "frame", "time", "stream", "src", "dst", "direction", "api_key", "api_name",
    "api_version", "correlation_id", "client_id", "length", "pair", "latency_ms", "notes",
)  # fmt: skip


def message_record(message: Message) -> dict[str, Any]:
    frame = message.frame
    connection = frame.connection
    client, server = format_address(connection.client), format_address(connection.server)
    src, dst = (client, server) if message.is_request else (server, client)
    latency = message.latency
    return {
        "number": message.number,
        "frame": frame.last_packet,
        "time": CaptureTime(frame.last_ns),
        "stream": connection.index,
        "src": src,
        "dst": dst,
        "direction": str(frame.direction),
        "api_key": message.api_key,
        "api_name": message.api_name,
        "api_version": message.api_version,
        "correlation_id": message.correlation_id,
        "client_id": message.client_id,
        "length": message.length,
        "pair": None if message.pair is None else message.pair.number,
        "latency_ms": None if latency is None else round(latency * 1000.0, 6),
        "notes": [note_record(n) for n in message.all_notes()],
    }


class CaptureTime(float):
    """Capture time in seconds since the epoch (a float, for filters and plain JSON) that
    keeps the exact integer nanoseconds it came from."""

    __slots__ = ("ns",)
    ns: int

    def __new__(cls, nanoseconds: int) -> CaptureTime:
        value = super().__new__(cls, nanoseconds / 1e9)
        value.ns = nanoseconds
        return value

    def exact(self) -> str:
        """The exact decimal: 1795952649.778123456."""
        return f"{Decimal(self.ns).scaleb(-9):f}"


def message_json(record: dict[str, Any]) -> str:
    """A message record as one line of JSON, its `time` the exact decimal of the capture's
    nanoseconds (a JSON number; the float would round it)."""
    time = record.get("time")
    if not isinstance(time, CaptureTime):
        return json.dumps(record, ensure_ascii=True, allow_nan=False)
    text = json.dumps({**record, "time": 0}, ensure_ascii=True, allow_nan=False)
    # `number` and `frame` (integers) come first: the first "time" key is this record's own.
    return text.replace('"time": 0', f'"time": {time.exact()}', 1)


def note_record(note: Note) -> dict[str, Any]:
    return {"severity": str(note.severity), "message": note.message, "offset": note.offset}


def tree_record(node: Node) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": node.name,
        "type": node.type,
        "value": json_value(node.value),
        "display": node.display,
        "offset": node.offset,
        "size": node.size,
        "about": node.about,
        "children": [tree_record(child) for child in node.children],
    }
    if node.generated:
        record["generated"] = True
    if node.notes:
        record["notes"] = [note_record(n) for n in node.notes]
    return record


def json_value(value: Any) -> Any:
    """A decoded value as JSON: UUIDs canonical, bytes as hex, non-finite floats as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)
