"""pandas for Jupyter: `read_pcap()` and the tables of a capture.

Every table is built column-wise: one pass fills plain Python lists per
column, then pandas gets each column once with its real dtype (nullable
integers, UTC datetimes, categoricals for names). Tables are built on first
access and cached.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pandas as pd

from kdissect.decode.tree import Node
from kdissect.dissectors import Columns
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.records import CaptureTime, json_value, message_record

if TYPE_CHECKING:
    from kdissect.dissectors import TableSpec


def read_pcap(
    path: str | os.PathLike[str] | BinaryIO,
    ports: Iterable[int] = DEFAULT_PORTS,
    apis: Iterable[int] | None = None,
    detect: bool = True,
) -> Capture:
    """Read a capture into a `Capture`: messages kept, tables built on demand.

    `ports` are extra TCP ports to treat as Kafka (9092 always is); `apis`
    keeps only those API keys (requests and their responses).
    """
    problems: list[Note] = []
    keep = None if apis is None else frozenset(apis)
    messages = [
        message
        for message in read_messages(path, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                                     report=problems.append)
        if keep is None or message.api_key in keep
    ]
    source = getattr(path, "name", "") if hasattr(path, "read") else os.fspath(path)
    return Capture(messages, source=str(source), problems=problems)


class Capture:
    """The Kafka messages of one capture and the DataFrames made from them."""

    def __init__(self, messages: list[Message], source: str = "", problems: list[Note] | None = None):
        self.message_list = messages
        self.source = source
        self.problems = problems or []
        self._by_number = {message.number: message for message in messages}
        self._api_tables: dict[str, pd.DataFrame] = {}

    def message(self, number: int) -> Message:
        """A message by its number (the `number` column), with its tree via `.tree()`."""
        return self._by_number[number]

    def tree(self, number: int) -> Node:
        return self._by_number[number].tree()

    @cached_property
    def messages(self) -> pd.DataFrame:
        return _messages_frame(self.message_list)

    @cached_property
    def exchanges(self) -> pd.DataFrame:
        return _exchanges_frame(self.message_list)

    @cached_property
    def fields(self) -> pd.DataFrame:
        return _fields_frame(self.message_list)

    def table(self, name: str) -> pd.DataFrame:
        """One of the per-API tables by name (see `kdissect.dissectors.TABLES`)."""
        from kdissect.decode.dissect import TABLES

        return self._api_table(TABLES[name])

    def _api_table(self, spec: TableSpec) -> pd.DataFrame:
        cache = self._api_tables
        if spec.name not in cache:
            cache[spec.name] = _api_frame(self.message_list, spec)
        frame: pd.DataFrame = cache[spec.name]
        return frame

    @property
    def topic_partitions(self) -> pd.DataFrame:
        return self.table("topic_partitions")

    @property
    def producers(self) -> pd.DataFrame:
        return self.table("producers")

    @property
    def quorum(self) -> pd.DataFrame:
        return self.table("quorum")

    @property
    def quorum_replicas(self) -> pd.DataFrame:
        return self.table("quorum_replicas")

    @property
    def quorum_nodes(self) -> pd.DataFrame:
        return self.table("quorum_nodes")

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by name, generic ones first."""
        from kdissect.decode.dissect import TABLES

        found = {"messages": self.messages, "exchanges": self.exchanges, "fields": self.fields}
        found.update((name, self.table(name)) for name in TABLES)
        return found

    def export(self, directory: str | os.PathLike[str], format: str = "parquet") -> list[Path]:
        """Write every table to `directory` as Parquet or CSV; returns the files written."""
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for name, frame in self.tables().items():
            path = target / f"{name}.{format}"
            if format == "parquet":
                frame.to_parquet(path, index=False)
            elif format == "csv":
                frame.to_csv(path, index=False)
            else:
                raise ValueError(f"unknown export format {format!r} (parquet or csv)")
            written.append(path)
        return written

    def __len__(self) -> int:
        return len(self.message_list)

    def __repr__(self) -> str:
        return "\n".join(self._summary_lines())

    def _summary_lines(self) -> list[str]:
        requests = sum(1 for m in self.message_list if m.is_request)
        answered = sum(1 for m in self.message_list if m.is_request and m.pair is not None)
        streams = len({m.frame.connection.index for m in self.message_list})
        apis: dict[str, int] = {}
        for m in self.message_list:
            apis[m.api_name or "(request missing)"] = apis.get(m.api_name or "(request missing)", 0) + 1
        lines = [
            f"Capture {os.path.basename(self.source) or '(stream)'}: {_count(len(self.message_list), 'Kafka message')} "
            f"on {_count(streams, 'connection')}, {_count(requests, 'request')} ({answered} answered)",
        ]
        lines += [f"  {name}: {count}" for name, count in sorted(apis.items(), key=lambda i: -i[1])]
        if self.problems:
            lines.append(f"  {len(self.problems)} capture problems, first: {self.problems[0]}")
        return lines

    def _repr_html_(self) -> str:
        from kdissect.present.html import capture_html

        return capture_html(self)


# -- generic tables -----------------------------------------------------------


def _messages_frame(messages: list[Message]) -> pd.DataFrame:
    columns: Columns = {}
    for message in messages:
        record = message_record(message)
        record["notes"] = "; ".join(f"{n['severity']}: {n['message']}" for n in record["notes"])
        for name, value in record.items():
            columns.setdefault(name, []).append(value)
    if not columns:
        columns = {name: [] for name in _MESSAGE_DTYPES}
    return _typed(columns, _MESSAGE_DTYPES)


_MESSAGE_DTYPES = {
    "number": "int64", "frame": "int64", "time": "utc", "stream": "int64", "src": "category",
    "dst": "category", "direction": "category", "api_key": "Int64", "api_name": "category",
    "api_version": "Int64", "correlation_id": "Int64", "client_id": "category", "length": "Int64",
    "pair": "Int64", "latency_ms": "Float64", "notes": "string",
}  # fmt: skip


def _exchanges_frame(messages: list[Message]) -> pd.DataFrame:
    columns: Columns = {name: [] for name in _EXCHANGE_DTYPES}
    for message in messages:
        if message.is_request:
            _add_exchange(columns, message, message.pair)
        elif message.pair is None:  # its request is not in the capture
            _add_exchange(columns, None, message)
    return _typed(columns, _EXCHANGE_DTYPES)


def _add_exchange(columns: Columns, request: Message | None, response: Message | None) -> None:
    either = request or response
    assert either is not None
    connection = either.frame.connection
    row = {
        "request": None if request is None else request.number,
        "response": None if response is None else response.number,
        "stream": connection.index,
        "client": _address(connection.client),
        "server": _address(connection.server),
        "client_id": None if request is None else request.client_id,
        "api_key": either.api_key,
        "api_name": either.api_name,
        "api_version": either.api_version,
        "correlation_id": either.correlation_id,
        "request_time": None if request is None else request.time,
        "response_time": None if response is None else response.time,
        "latency_ms": None if response is None or response.latency is None
        else round(response.latency * 1e3, 6),  # as in `messages`
        "request_bytes": None if request is None else len(request.frame.data),
        "response_bytes": None if response is None else len(response.frame.data),
        "error": _top_level_error(response),
    }
    for name, value in row.items():
        columns[name].append(value)


_EXCHANGE_DTYPES = {
    "request": "Int64", "response": "Int64", "stream": "int64", "client": "category",
    "server": "category", "client_id": "category", "api_key": "Int64", "api_name": "category",
    "api_version": "Int64", "correlation_id": "Int64", "request_time": "utc",
    "response_time": "utc", "latency_ms": "Float64", "request_bytes": "Int64",
    "response_bytes": "Int64", "error": "category",
}  # fmt: skip


def _top_level_error(response: Message | None) -> str | None:
    """The name of a decoded response body's top-level ErrorCode, when it has one."""
    from kdissect.error_codes import error_name
    from kdissect.present.summary import DISSECTED_APIS

    if response is None or response.api_key not in DISSECTED_APIS:
        return None
    from kdissect.decode.dissect import message_body

    body = message_body(response.tree(keep=False))
    code = None if body is None else body.child("ErrorCode")
    if code is None or not isinstance(code.value, int):
        return None
    return error_name(code.value)


FIELDS_CHUNK_ROWS = 200_000  # rows gathered as Python objects before becoming columns


def _fields_frame(messages: list[Message]) -> pd.DataFrame:
    """One row per tree node, built in chunks so peak memory stays near the table's own."""
    chunks = []
    columns: Columns = {name: [] for name in _FIELD_DTYPES}
    for message in messages:
        _add_field_rows(columns, message)
        if len(columns["number"]) >= FIELDS_CHUNK_ROWS:
            chunks.append(_typed(columns, _FIELD_DTYPES))
            columns = {name: [] for name in _FIELD_DTYPES}
    chunks.append(_typed(columns, _FIELD_DTYPES))
    frame = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
    for name in ("name", "type"):  # text categories, as every categorical column has
        frame[name] = pd.Categorical(frame[name].astype("str"))
    return frame


def _add_field_rows(columns: Columns, message: Message) -> None:
    number = message.number
    add = [columns[name].append for name in _FIELD_DTYPES]
    for node, depth, path in field_paths(message.tree(keep=False)):
        value = json_value(node.value)
        for append, item in zip(add, (
            number, path, node.name, node.type, None if value is None else str(value),
            value if type(value) is int else None, node.display, node.offset, node.size,
            depth, node.generated,
        ), strict=True):  # fmt: skip
            append(item)


_FIELD_DTYPES = {
    "number": "int64", "path": "string", "name": "string", "type": "string",
    "value": "string", "value_int": "Int64", "display": "string", "offset": "int64",
    "size": "int64", "depth": "int64", "generated": "bool",
}  # fmt: skip


def field_paths(root: Node) -> list[tuple[Node, int, str]]:
    """(node, depth, path) for every node of a message tree.

    Paths are what an analyst types: header fields under their header
    (`RequestHeader.correlation_id`), body fields from the body down
    (`Topics[0].Partitions[2].LeaderId`); the root and body keep their names.
    """
    found: list[tuple[Node, int, str]] = [(root, 0, root.name)]
    for part in root.children:
        is_body = part.type == "struct"
        for node, depth, path in part.walk(depth=1, path=part.name):
            if is_body and node is not part:
                path = path[len(part.name) + 1 :]
            found.append((node, depth, path))
    return found


def _api_frame(messages: list[Message], spec: TableSpec) -> pd.DataFrame:
    from kdissect.decode.dissect import message_body

    columns: Columns = {name: [] for name in spec.dtypes}
    for message in messages:
        if message.api_key == spec.api_key and message.is_request == spec.request:
            if not message.is_request and message.pair is None:
                continue  # a response is only decodable through its request
            body = message_body(message.tree(keep=False))
            if body is not None:
                spec.rows(message, body, columns)
    return _typed(columns, spec.dtypes)


# -- dtypes -------------------------------------------------------------------


def _typed(columns: Columns, dtypes: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: _column(columns[name], dtype) for name, dtype in dtypes.items()})


def _column(values: list[Any], dtype: str) -> Any:
    if dtype == "utc":  # capture times: integer nanoseconds (or exact decimal seconds)
        return _capture_times(values)
    if dtype == "utc_ms":
        return _datetimes(pd.Series(values, dtype="Int64"), "ms")
    if dtype == "category":  # categories are text even when every value is missing
        return pd.Categorical(pd.array(values, dtype="str"))
    if dtype == "object":
        return pd.Series(values, dtype=object)
    return pd.array(values, dtype=dtype)


_YEARS_1_TO_9999_US = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def _datetimes(counts: pd.Series, unit: str) -> Any:
    """Counts of `unit` since the epoch as UTC datetimes. A time outside the years 1-9999
    (a corrupt capture timestamp, a wild value from the wire) is missing: neither pandas
    nor Python's datetime can hold or show every such value."""
    scale = 1 if unit == "us" else 1000
    low, high = (bound // scale for bound in _YEARS_1_TO_9999_US)
    return pd.to_datetime(counts.where((counts >= low) & (counts <= high)).astype("Int64"),
                          unit=unit, utc=True)


_NANOSECONDS_RANGE = (pd.Timestamp.min.value, pd.Timestamp.max.value)


def _capture_times(values: list[Any]) -> Any:
    """Capture times (integer nanoseconds, or CaptureTime) at full resolution; one pandas
    cannot hold is missing."""
    low, high = _NANOSECONDS_RANGE
    counts = [None if v is None else v.ns if isinstance(v, CaptureTime) else int(v) for v in values]
    counts = [c if c is not None and low <= c <= high else None for c in counts]
    return pd.to_datetime(pd.Series(counts, dtype="Int64"), unit="ns", utc=True)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _address(address: Any) -> str:
    from kdissect.ingest.net import format_address

    return format_address(address)

