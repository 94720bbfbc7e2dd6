"""What every table of body values shares: how a table is declared, and its context columns.

A table names the messages that feed it (API keys and direction) and a row
maker that gives a body's rows from its flat values (`Message.values()`), each
row a tuple of the values after the context columns; `kdissect.present.analysis`
gathers the rows of every message, adds the context columns once per message,
and turns each column into a typed pandas column after the table's column
conversions (`TableSpec.converted`: error names, -1 as missing, UUID text), made
once per column rather than once per row. Every such table starts with the same context columns
(`CONTEXT_DTYPES`): the message's number and capture time, its connection
(`stream`), the Kafka server side of that connection (`broker`, "ip:port") and
the capture file.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from kdissect.dissectors import Values
from kdissect.error_codes import error_name
from kdissect.ingest.net import format_address
from kdissect.pair.message import Message

Columns = dict[str, list[Any]]
Row = tuple[Any, ...]
RowMaker = Callable[[Message, Values], list[Row]]
Conversion = Callable[[list[Any]], list[Any]]


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A tidy table: which messages feed it and how rows are made.

    `rows(message, values)` gives the body's rows, each a tuple of the values of the
    columns after `CONTEXT_DTYPES`, in order; `converted` names the columns whose
    values are converted as a whole before typing (`error_names`, `unknown`,
    `uuid_texts`). `dtypes` are pandas dtypes, or "utc" for capture times,
    "utc_ms" for Kafka millisecond timestamps, "object" for lists. `api_keys`
    empty means every API; `request` None means requests and responses (a
    response only with its request).
    """

    name: str
    api_keys: frozenset[int]
    request: bool | None  # rows come from requests (True), paired responses (False), or both
    dtypes: Mapping[str, str]
    rows: RowMaker
    # Whether a message's definition can give rows at all, asked before its body is decoded.
    carries: Callable[[Message], bool] | None = None
    converted: Mapping[str, Conversion] = field(default_factory=dict)

    def feeds(self, message: Message) -> bool:
        """Whether `message` may contribute rows (its body is decoded only if so)."""
        return ((not self.api_keys or message.api_key in self.api_keys)
                and (self.request is None or message.is_request == self.request)
                and (self.carries is None or self.carries(message)))


CONTEXT_DTYPES = {
    "number": "int64", "time": "utc", "stream": "int64", "broker": "category", "file": "category",
}  # fmt: skip


def message_context(message: Message) -> dict[str, Any]:
    """The columns every table of body values starts with (`CONTEXT_DTYPES`): which message,
    when, on which connection, to or from which broker, from which file."""
    return dict(zip(CONTEXT_DTYPES, context_values(message), strict=True))


def context_values(message: Message) -> tuple[Any, ...]:
    """`message_context`'s values in column order, for tables filled column by column."""
    connection = message.frame.connection
    return (message.number, message.time_ns, connection.index, format_address(connection.server),
            message.file)


def add_row(columns: Columns, **row: Any) -> None:
    for name, value in row.items():
        columns[name].append(value)


class Pick:
    """Some fields of flat-value structs, in order, as tuples; a field a struct lacks
    (a truncated body's) is None."""

    def __init__(self, *names: str) -> None:
        assert len(names) > 1
        self.names = names
        self._get = itemgetter(*names)

    def rows(self, structs: Sequence[Values], head: Row = ()) -> list[Row]:
        """`head` followed by the fields, for each of `structs`."""
        get = self._get
        try:
            return [head + get(struct) for struct in structs]
        except KeyError:
            names = self.names
            return [head + tuple([struct.get(name) for name in names]) for struct in structs]

    def one(self, struct: Values) -> Row:
        try:
            return self._get(struct)
        except KeyError:
            return tuple([struct.get(name) for name in self.names])


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()  # in an error column: no ErrorCode because the struct or field is not there


def error(code: Any) -> str:
    """An ErrorCode by its name (`NONE` for 0 or a missing code)."""
    return error_name(code or 0)


def error_names(codes: list[Any]) -> list[Any]:
    """A column of ErrorCodes by name (`error`); `ABSENT` is missing."""
    names = {code: None if code is ABSENT else error(code) for code in set(codes)}
    return [names[code] for code in codes]


def unknown(values: list[Any]) -> list[Any]:
    """A column with Kafka's -1 "unknown / none" sentinel as missing values."""
    return [None if value == -1 else value for value in values]


def uuid_texts(values: list[Any]) -> list[Any]:
    """A column of UUIDs as text (`uuid_text`)."""
    return [uuid_text(value) for value in values]


_UUID_TEXT: dict[int, str | None] = {0: None}  # the text of UUIDs seen, by value
_UUID_TEXT_KEPT = 1 << 16  # the memo starts afresh beyond this many ids


def uuid_text(value: Any) -> str | None:
    """A UUID as text; Kafka's all-zero "no id" is missing."""
    if not isinstance(value, uuid.UUID):
        return None
    number = value.int
    text = _UUID_TEXT.get(number, _UNSEEN)
    if text is _UNSEEN:
        if len(_UUID_TEXT) >= _UUID_TEXT_KEPT:
            _UUID_TEXT.clear()
            _UUID_TEXT[0] = None
        hexadecimal = f"{number:032x}"
        text = _UUID_TEXT[number] = (f"{hexadecimal[:8]}-{hexadecimal[8:12]}-{hexadecimal[12:16]}-"
                                     f"{hexadecimal[16:20]}-{hexadecimal[20:]}")
    return text  # type: ignore[return-value]


_UNSEEN = object()


def direction(message: Message) -> str:
    return "request" if message.is_request else "response"


__all__ = ["ABSENT", "CONTEXT_DTYPES", "Columns", "Pick", "Row", "RowMaker", "TableSpec", "add_row",
           "context_values", "direction", "error", "error_names", "message_context", "unknown", "uuid_text",
           "uuid_texts"]
