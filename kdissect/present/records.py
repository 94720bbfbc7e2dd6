"""Messages and trees as plain JSON-ready records (the CLI's JSON, the DataFrames' rows)."""

from __future__ import annotations

import codecs
import re
from typing import Any

import orjson

from kdissect.decode.rows import Row
from kdissect.decode.tree import Node
from kdissect.ingest.net import format_address
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.present.json_text import (
    QUOTED as _QUOTED,
)
from kdissect.present.json_text import (
    json_value,
    message_tree_json,
    rows_records,
    rows_records_about,
)

# The columns of a message record, in order; `tree` is added by JSON output.
MESSAGE_COLUMNS = (
    "number", "frame", "time", "stream", "src", "dst", "direction", "api_key", "api_name",
    "api_version", "correlation_id", "client_id", "length", "pair", "latency_ms", "tls", "notes",
    "file",
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
        "tls": connection.tls,  # decrypted from TLS records
        "notes": [note_record(n) for n in message.all_notes()],
        "file": message.file,
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
        whole, fraction = divmod(abs(self.ns), 1_000_000_000)
        return f"{'-' if self.ns < 0 else ''}{whole}.{fraction:09d}"


def notes_json(notes: list[Note]) -> str:
    """Notes as a message's JSON has them (ASCII)."""
    return ascii_json(_notes_text(notes))


def _notes_text(notes: list[Note]) -> str:
    """Notes as JSON (wire text not yet ASCII)."""
    return _dumps([note_record(note) for note in notes]).decode() if notes else "[]"


def note_record(note: Note) -> dict[str, Any]:
    return {"severity": str(note.severity), "message": note.message, "offset": note.offset,
            "id": note.id or None}


def tree_record(node: Node, *, about: bool = True) -> dict[str, Any]:
    """A tree node as JSON-ready dicts; the schema's `about` texts only when asked for."""
    record: dict[str, Any] = {
        "name": node.name,
        "type": node.type,
        "value": json_value(node.value),
        "display": node.display,
        "offset": node.offset,
        "size": node.size,
    }
    if about:
        record["about"] = node.about
    record["children"] = [tree_record(child, about=about) for child in node.children]
    if node.generated:
        record["generated"] = True
    if node.notes:
        record["notes"] = [note_record(n) for n in node.notes]
    return record


def rows_record(row: Row, *, about: bool = True) -> dict[str, Any]:
    """The same record as `tree_record`, from a tree laid out as rows (which carry no notes)."""
    return (rows_records_about if about else rows_records)([row])[0]


def message_tree_record(message: Message, *, about: bool = False) -> dict[str, Any]:
    """A message's whole tree as JSON-ready dicts: from rows when its body took the fast path."""
    rows = message.rows(records=True)
    return tree_record(message.tree(), about=about) if rows is None else rows_record(rows, about=about)


def message_json(message: Message, *, about: bool = False) -> str:
    """One message with its whole tree as one line of JSON (ASCII: wire text is escaped)."""
    tree = None if about else message_tree_json(message)  # an ordinary body: written at once
    if tree is not None:
        return ascii_json(f'{message_head_json(message)},"tree":{tree}}}')
    record = message_record(message)
    record["tree"] = message_tree_record(message, about=about)
    time, record["time"] = record["time"], 0
    text: str = orjson.dumps(record).decode()
    # `time` is the exact decimal of the capture's nanoseconds (a JSON number; a float
    # would round it). `number` and `frame` come first, so the first "time" is this one.
    text = text.replace('"time":0', f'"time":{time.exact()}', 1)
    return ascii_json(text)


def message_head_json(message: Message) -> str:
    """`message_record` as `message_json` writes it (wire text not yet ASCII), without its closing brace."""
    frame = message.frame
    connection = frame.connection
    ends = _ENDS.get(id(connection))
    if ends is None or ends[0] is not connection:
        if len(_ENDS) > 4096:
            _ENDS.clear()
        client, server = _dumps(format_address(connection.client)).decode(), _dumps(
            format_address(connection.server)).decode()
        ends = _ENDS[id(connection)] = (connection, f'"src":{client},"dst":{server}', f'"src":{server},"dst":{client}')
    latency = message.latency
    pair = message.pair
    notes = message.all_notes()
    whole, fraction = divmod(frame.last_ns, 1_000_000_000)
    time = f"{whole}.{fraction:09d}" if whole >= 0 else CaptureTime(frame.last_ns).exact()
    return (f'{{"number":{_int(message.number)},"frame":{_int(frame.last_packet)},"time":{time},'
            f'"stream":{_int(connection.index)},{ends[1] if message.is_request else ends[2]},'
            f'"direction":{_QUOTED[str(frame.direction)]},"api_key":{_int(message.api_key)},'
            f'"api_name":{_text(message.api_name)},"api_version":{_int(message.api_version)},'
            f'"correlation_id":{_int(message.correlation_id)},"client_id":{_text(message.client_id)},'
            f'"length":{_int(message.length)},"pair":{"null" if pair is None else _int(pair.number)},'
            f'"latency_ms":{"null" if latency is None else _dumps(round(latency * 1000.0, 6)).decode()},'
            f'"tls":{_dumps(connection.tls).decode()},'
            f'"notes":{_notes_text(notes)},'
            f'"file":{_text(message.file)}')


_ENDS: dict[int, tuple[object, str, str]] = {}  # a connection's src and dst, each way, as JSON
_dumps = orjson.dumps


def _text(value: str | None) -> str:
    """A string (or None) as JSON, as orjson writes it."""
    return _QUOTED[value] if type(value) is str else _dumps(value).decode()


def _int(value: int | None) -> str:
    """An integer (or None) as JSON, as orjson writes it."""
    return str(value) if type(value) is int else _dumps(value).decode()


def ascii_json(text: str) -> str:
    """JSON text with every non-ASCII character written as \\u escapes (UTF-16 pairs beyond the BMP)."""
    return text if text.isascii() else text.encode("ascii", _JSON_ESCAPES).decode("ascii")


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """An ASCII encoder's error handler: a run of non-ASCII characters as JSON \\u escapes.

    The encoder finds the runs far faster than a regular expression scanning the text."""
    assert isinstance(error, UnicodeEncodeError)
    return _NON_ASCII.sub(_escape, error.object[error.start:error.end]), error.end


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


_JSON_ESCAPES = "kdissect-json-escapes"
codecs.register_error(_JSON_ESCAPES, _json_escapes)


__all__ = ["MESSAGE_COLUMNS", "CaptureTime", "ascii_json", "json_value", "message_head_json", "message_json", "message_record",
           "message_tree_record", "note_record", "rows_record", "tree_record"]
