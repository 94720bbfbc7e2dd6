"""`-T fields -e NAME`: chosen fields of each message as columns, as tshark prints them.

Any name a display filter takes may be a column: message columns (`number`, `latency_ms`,
`client_id`), addresses (`ip.src`, `tcp.port`), Wireshark's `kafka.*` names and every body
field by name or path (`ErrorCode`, `Topics[].Partitions[].LeaderId`, `key`). A field with
several values in one message gives them all, joined by the aggregator (`-E occurrence=f`
keeps the first, `l` the last). Values are written as tshark writes them (booleans 1 and
0, bytes in hex, times with nanoseconds) and strings from the wire with every control
character escaped, so a value never breaks its row or its column.

    kdissect -T fields -e frame.number -e api_name -e kafka.topic_name -E header=y capture.pcap
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kdissect.decode.tree import printable
from kdissect.pair.message import Message
from kdissect.present.fields import STRUCT
from kdissect.present.filter import Field, FieldContext, FilterError, body_reading, resolve
from kdissect.present.records import CaptureTime

_ABSOLUTE = frozenset({"time", "frame.time_epoch"})
_TIMES = _ABSOLUTE | {"time_relative", "frame.time_relative"}
_SEPARATORS = {"/t": "\t", "/s": " "}
OPTIONS = "header=y|n, separator=/t|/s|CHAR, occurrence=f|l|a, aggregator=,|/s|CHAR, quote=d|s|n"


@dataclass(frozen=True, slots=True)
class FieldsFormat:
    """How the columns are written (tshark's -E options, with its defaults)."""

    header: bool = False
    separator: str = "\t"
    occurrence: str = "a"  # a: all values, f: the first, l: the last
    aggregator: str = ","
    quote: str = ""  # "", '"' or "'"


def parse_format(options: list[str]) -> FieldsFormat:
    """tshark's `-E name=value` options; FilterError names a bad one."""
    values: dict[str, Any] = {}
    for option in options:
        name, equals, value = option.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not value:
            raise FilterError(f"{option!r} is not name=value ({OPTIONS})")
        if name == "header" and value in ("y", "n"):
            values["header"] = value == "y"
        elif name in ("separator", "aggregator") and (value in _SEPARATORS or len(value) == 1):
            values[name] = _SEPARATORS.get(value, value)
        elif name == "occurrence" and value in ("f", "l", "a"):
            values["occurrence"] = value
        elif name == "quote" and value in ("d", "s", "n"):
            values["quote"] = {"d": '"', "s": "'", "n": ""}[value]
        else:
            raise FilterError(f"{option!r}: not an option kdissect knows ({OPTIONS})")
    return FieldsFormat(**values)


class FieldColumns:
    """Turns each message into one row of the chosen fields. `start_ns` gives the time of
    the capture's first packet (None before it is known), which relative times count from."""

    def __init__(self, names: list[str], form: FieldsFormat, start_ns: Callable[[], int | None]) -> None:
        self.names = names
        self.form = form
        self.fields = [_column_field(name) for name in names]
        self.on_worker = tuple(field.on_worker for field in self.fields)  # which a worker reads exactly
        self._reading = body_reading(self.fields)  # every column from one index of the body
        self._start_ns = start_ns
        self._first_ns: int | None = None

    def header(self) -> str:
        return self.form.separator.join(self._quoted(printable(name)) for name in self.names)

    def row(self, message: Message, body_cells: tuple[str | None, ...] | None = None) -> str:
        """The message's row; `body_cells`, where given, are those `body_cells` made (on a
        worker process), and only the other columns are read here."""
        if self._first_ns is None:
            self._first_ns = message.time_ns
        context = FieldContext(message, self._origin, self._reading)
        if body_cells is None:
            return self.form.separator.join(self._cell(field, context) for field in self.fields)
        return self.form.separator.join(self._cell(field, context) if made is None else made
                                        for field, made in zip(self.fields, body_cells, strict=True))

    def body_cells(self, message: Message) -> tuple[str | None, ...]:
        """The cells of the columns read from the message's body (None for the others): what
        depends only on the message and its request, not on the rest of the capture."""
        context = FieldContext(message, self._origin, self._reading)
        return tuple(self._cell(field, context) if field.paths else None for field in self.fields)

    @property
    def reads_bodies(self) -> bool:
        return any(field.paths for field in self.fields)

    @property
    def light(self) -> bool:
        """Whether a worker process can make every cell but those only the merge knows
        (`worker_cells`), which it makes from light messages (`LightRow`): message, stream
        and pair numbers, relative times."""
        return all(field.on_worker or _from_light(field) for field in self.fields)

    def worker_cells(self, message: Message) -> tuple[str | None, ...]:
        """The cells of the columns a worker process reads as one process does (None for the
        others): the body's, and what depends only on the message, its connection and its
        request."""
        context = FieldContext(message, self._origin, self._reading)
        return tuple(self._cell(field, context) if exact else None
                     for field, exact in zip(self.fields, self.on_worker, strict=True))

    def _origin_ns(self) -> int:
        known = self._start_ns()
        return known if known is not None else self._first_ns or 0

    def _origin(self) -> float:
        return self._origin_ns() / 1e9

    def _cell(self, field: Field, context: FieldContext) -> str:
        if field.name in _TIMES:  # exact to the nanosecond, as tshark writes frame times
            at = context.message.time_ns
            return self._quoted(CaptureTime(at if field.name in _ABSOLUTE else at - self._origin_ns()).exact())
        column = field.column  # (a relative one is a time, above): read straight from the message
        found = column.read(context.message) if column is not None else field.values(context)
        values = [text for text in map(_text, found) if text is not None]
        if not values:
            return ""
        if len(values) > 1:
            occurrence = self.form.occurrence
            text = self.form.aggregator.join(values) if occurrence == "a" else values[0 if occurrence == "f" else -1]
        else:
            text = values[0]
        return self._quoted(text)

    def _quoted(self, text: str) -> str:
        quote = self.form.quote
        if not quote:
            return text
        return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


class BodyCells:
    """`-T fields` with `--jobs`: each worker process makes the cells of the columns read from
    bodies (the decoding, the costly part: `FieldColumns.body_cells`); the parent makes the
    others, which depend on the whole capture (message and stream numbers, relative times,
    the notes pairing in capture order adds). Picklable: the fields are resolved again where
    it runs, from the same definitions."""

    warm_up = True  # the first bodies' decoders made once, before the workers fork
    preload = ("kdissect.decode.values",)

    def __init__(self, names: list[str], form: FieldsFormat) -> None:
        self.names, self.form = names, form
        self._columns: FieldColumns | None = None

    def __getstate__(self) -> tuple[list[str], FieldsFormat]:
        return self.names, self.form

    def __setstate__(self, state: tuple[list[str], FieldsFormat]) -> None:
        self.names, self.form = state
        self._columns = None

    def __call__(self, message: Message) -> tuple[str | None, ...]:
        if self._columns is None:
            self._columns = FieldColumns(self.names, self.form, lambda: None)
        return self._columns.body_cells(message)


class WorkerCells(BodyCells):
    """`-T fields` with `--jobs` where every column but the merge's own is a worker's to make
    (`FieldColumns.light`): the merge reads no more of a message than a `kdissect.light`
    Light holds. Its result: "" (what a light merge counts as a message's text), then the
    cells (`FieldColumns.worker_cells`)."""

    light = True
    _whole = False  # whether the workers make every cell (then the row)

    def __call__(self, message: Message) -> tuple[str, tuple[str | None, ...] | str]:  # type: ignore[override]
        columns = self._columns
        if columns is None:
            columns = self._columns = FieldColumns(self.names, self.form, lambda: None)
            self._whole = all(columns.on_worker)
        cells = columns.worker_cells(message)
        # every cell made here: the row itself, which the merge writes as it is
        return "", columns.form.separator.join(cells) if self._whole else cells  # type: ignore[arg-type]


class LightRow:
    """What the merge's own columns read of a light message (`kdissect.light.Light`): its
    number, connection, time and pair's number (as it was when the message was released)."""

    __slots__ = ("connection", "number", "pair", "time_ns")

    def __init__(self, light: Any) -> None:
        self.number, self.connection, self.time_ns = light.number, light.connection, light.last_ns
        paired = light.pair_number
        self.pair = None if paired is None else _Numbered(paired)

    @property
    def frame(self) -> LightRow:
        return self

    @property
    def time(self) -> float:
        return self.time_ns / 1e9


@dataclass(frozen=True, slots=True)
class _Numbered:
    number: int


def _from_light(field: Field) -> bool:
    """Whether the merge reads the column of a light message (`LightRow`)."""
    column = field.column
    return column is not None and (column.capture_wide or column.relative) and not (column.costly or column.answered)


def _column_field(name: str) -> Field:
    field = resolve(name)
    if field.kinds == {STRUCT}:
        raise FilterError(f"field {name!r} is a struct or an array of structs; name one of its "
                          "fields (kdissect -V shows them)")
    return field


def _text(value: Any) -> str | None:
    """One value as tshark writes it; None for what is not a value (a struct, a null)."""
    if type(value) is int:  # the most common, first
        return str(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6f}"
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (dict, list)):
        return None
    if isinstance(value, uuid.UUID):
        return str(value)
    return printable(str(value))  # addresses, generated values
