"""pandas for Jupyter: `read_pcap()` and the tables of a capture.

Every table is built column-wise: one pass fills plain Python lists per
column, then pandas gets each column once with its real dtype (nullable
integers, UTC datetimes, categoricals for names). Tables are built on first
access and cached.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa

from kdissect.decode.record_nodes import records_unexpanded
from kdissect.decode.rows import Row
from kdissect.decode.schema import configure_definitions
from kdissect.decode.tree import Node, Role
from kdissect.decode.values import cycle_collection_paused
from kdissect.error_codes import error_name
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.files import source_name
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import KeyLogSource, read_messages
from kdissect.present.html import capture_html
from kdissect.present.records import CaptureTime, json_value, message_record
from kdissect.present.tables import TABLES, Columns, TableSpec


def read_pcap(
    path: str | os.PathLike[str] | BinaryIO | Sequence[str | os.PathLike[str]],
    ports: Iterable[int] = DEFAULT_PORTS,
    apis: Iterable[int | str] | None = None,
    detect: bool = True,
    filter: str | None = None,
    tls_keylog: KeyLogSource | None = None,
    show_secrets: bool = False,
    schemas: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
) -> Capture:
    """Read a capture into a `Capture`: messages kept, tables built on demand.

    `path` is one capture file (or an open binary stream), a list of files, or a
    glob pattern (`"broker1-*.pcap.gz"`); several files are read as one capture
    merged by packet time, as a rotated set should be, and every table says which
    file each message came from. `ports` are extra TCP ports to treat as Kafka
    (9092 always is); `apis` keeps only those APIs, by key or name (requests and
    their responses); `filter` keeps the messages a display filter matches, as
    `kdissect -Y` does. A bad API name or filter raises ValueError before the
    capture is read. `tls_keylog` (NSS key log files) decrypts TLS connections;
    SASL secrets are masked unless `show_secrets`. `schemas` (a folder of Kafka's
    message files or a kafka-clients jar) becomes the first source of definitions
    for this process, as `configure_definitions` does.

    `jobs` worker processes share the work (`kdissect.parallel`, and the tables:
    `kdissect.present.parallel_tables`); messages and tables are the same as with
    one. By default every core for capture files of 16 MiB or more, else 1; a stream
    or a TLS key log is read in one process. A script (not a notebook) that reads in
    parallel needs multiprocessing's `if __name__ == "__main__":` guard, so from a
    script the default is 1 and `jobs` is given explicitly.
    """
    from kdissect.present.filter import selector

    if schemas is not None:
        configure_definitions(schemas)

    problems: list[Note] = []
    keep = selector(apis, filter)
    sources = capture_paths(path)
    jobs = _jobs(sources, jobs, tls_keylog)
    found: Iterable[Message]
    with cycle_collection_paused():
        if jobs > 1:
            from kdissect.parallel import read_messages as read_in_parallel

            found = (message for message, _ in read_in_parallel(
                sources, jobs, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                report=problems.append, show_secrets=show_secrets,
                preload=("kdissect.present.parallel_tables",)))
        else:
            found = read_messages(sources, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                                  report=problems.append, tls_keylog=tls_keylog,
                                  show_secrets=show_secrets)
        messages = [message for message in found if keep(message)]
    names = [source_name(s) for s in sources]
    return Capture(messages, source=", ".join(names), problems=problems, files=names, jobs=jobs)


def _jobs(sources: list[Any], jobs: int | None, tls_keylog: Any) -> int:
    """Worker processes for `read_pcap`: 1 for streams and TLS, the default as documented there."""
    from kdissect.parallel import MAX_JOBS, default_jobs, parallel_readable

    if tls_keylog is not None or not parallel_readable(sources):
        return 1
    if jobs is None:
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None) is not None and getattr(main, "__spec__", None) is None
        return 1 if script else default_jobs(sources)
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    return min(jobs, MAX_JOBS)


def capture_paths(path: Any) -> list[Any]:
    """The capture sources `path` names: itself, the items of a list, or a glob's matches."""
    if isinstance(path, list | tuple):
        return [item for entry in path for item in capture_paths(entry)]
    if isinstance(path, str) and not os.path.exists(path) and glob.has_magic(path):
        matches = sorted(glob.glob(path))
        if not matches:
            raise CaptureError(f"{path}: no file matches this pattern")
        return list(matches)
    return [path]


GENERIC_TABLES = ("messages", "exchanges", "fields", "records", "batches")


class Capture:
    """The Kafka messages of one capture and the DataFrames made from them."""

    def __init__(self, messages: list[Message], source: str = "", problems: list[Note] | None = None,
                 files: list[str] | None = None, jobs: int = 1):
        self.message_list = messages
        self.jobs = jobs  # worker processes that build the tables
        self._workers: Any = None
        self.source = source
        self.files = files or ([source] if source else [])
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
        with cycle_collection_paused():
            return self._built("messages", _MESSAGE_DTYPES, lambda: _messages_frame(self.message_list))

    @cached_property
    def exchanges(self) -> pd.DataFrame:
        with cycle_collection_paused():
            return self._built("exchanges", _EXCHANGE_DTYPES, lambda: _exchanges_frame(self.message_list))

    @cached_property
    def fields(self) -> pd.DataFrame:
        with cycle_collection_paused():
            return self._built("fields", _FIELD_DTYPES, lambda: _fields_frame(self.message_list))

    def _built(self, name: str, dtypes: Mapping[str, str], build: Callable[[], pd.DataFrame],
               feeds: Callable[[Message], bool] | None = None) -> pd.DataFrame:
        """Table `name`: on the capture's worker processes when it has several and enough
        messages feed the table, else here by `build`."""
        if self.jobs > 1:
            from kdissect.present.parallel_tables import TableJobs

            if self._workers is None:
                self._workers = TableJobs(self.jobs)
            frame = self._workers.build(name, self.message_list, feeds or _every, dict(dtypes), table_of)
            if frame is not None:
                return frame
        return build()

    def table(self, name: str) -> pd.DataFrame:
        """Any table by name: `messages`, `exchanges`, `fields`, or a per-API one
        (see `kdissect.present.tables.TABLES`)."""
        if name in GENERIC_TABLES:
            frame: pd.DataFrame = getattr(self, name)
            return frame
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; tables are: {', '.join(self.table_names())}")
        return self._api_table(TABLES[name])

    @staticmethod
    def table_names() -> list[str]:
        """The name of every table, generic ones first."""
        return [*GENERIC_TABLES, *TABLES]

    def _api_table(self, spec: TableSpec) -> pd.DataFrame:
        cache = self._api_tables
        if spec.name not in cache:
            with cycle_collection_paused():
                cache[spec.name] = self._built(spec.name, spec.dtypes,
                                               lambda: _api_frame(self.message_list, spec), spec.feeds)
        frame: pd.DataFrame = cache[spec.name]
        return frame

    @cached_property
    def records(self) -> pd.DataFrame:
        """One row per record of every `records` field (Produce, Fetch, ...).

        Keys and values are bytes (or missing), headers a list of (str, bytes) pairs;
        `export` writes them as Parquet binary and a list of key/value structs, and
        as hex text and JSON text in CSV.
        """
        from kdissect.present import record_tables as rt

        return self._built("records", rt.RECORD_DTYPES, lambda: _typed(
            rt.record_columns(rt.records_fields(self.message_list)), rt.RECORD_DTYPES), rt.carries_records)

    @cached_property
    def batches(self) -> pd.DataFrame:
        """One row per record batch (or legacy message) of every `records` field."""
        from kdissect.present import record_tables as rt

        return self._built("batches", rt.BATCH_DTYPES, lambda: _typed(
            rt.batch_columns(rt.records_fields(self.message_list)), rt.BATCH_DTYPES), rt.carries_records)

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

    @property
    def produce(self) -> pd.DataFrame:
        return self.table("produce")

    @property
    def fetch(self) -> pd.DataFrame:
        return self.table("fetch")

    @property
    def groups(self) -> pd.DataFrame:
        return self.table("groups")

    @property
    def errors(self) -> pd.DataFrame:
        return self.table("errors")

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by name, generic ones first."""
        return {name: self.table(name) for name in self.table_names()}

    def export(self, directory: str | os.PathLike[str], format: str = "parquet") -> list[Path]:
        """Write every table to `directory` as Parquet or CSV; returns the files written."""
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        written = []
        if format not in ("parquet", "csv"):
            raise ValueError(f"unknown export format {format!r} (parquet or csv)")
        for name, frame in self.tables().items():
            path = target / f"{name}.{format}"
            if format == "parquet":
                exportable(frame, text=False).to_parquet(path, index=False)
            else:
                exportable(frame, text=True).to_csv(path, index=False)
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
            f"Capture {self._name()}: {_count(len(self.message_list), 'Kafka message')} "
            f"on {_count(streams, 'connection')}, {_count(requests, 'request')} ({answered} answered)",
        ]
        lines += [f"  {name}: {count}" for name, count in sorted(apis.items(), key=lambda i: -i[1])]
        if self.problems:
            lines.append(f"  {len(self.problems)} capture problems, first: {self.problems[0]}")
        return lines

    def _name(self) -> str:
        if len(self.files) > 1:
            return f"{os.path.basename(self.files[0])} and {_count(len(self.files) - 1, 'more file')}"
        return os.path.basename(self.source) or "(stream)"

    def _repr_html_(self) -> str:
        return capture_html(self)


def _every(_message: Message) -> bool:
    return True


def table_of(messages: list[Message], name: str) -> pd.DataFrame:
    """Table `name` over `messages` in this process (what a table worker runs)."""
    return Capture(messages).table(name)


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
    "pair": "Int64", "latency_ms": "Float64", "tls": "bool", "notes": "string",
    "file": "category",
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
        "request_time": None if request is None else request.time_ns,
        "response_time": None if response is None else response.time_ns,
        "latency_ms": None if response is None or response.latency is None
        else round(response.latency * 1e3, 6),  # as in `messages`
        "request_bytes": None if request is None else len(request.frame.data),
        "response_bytes": None if response is None else len(response.frame.data),
        "error": _top_level_error(response),
        "file": (response or either).file,
    }
    for name, value in row.items():
        columns[name].append(value)


_EXCHANGE_DTYPES = {
    "request": "Int64", "response": "Int64", "stream": "int64", "client": "category",
    "server": "category", "client_id": "category", "api_key": "Int64", "api_name": "category",
    "api_version": "Int64", "correlation_id": "Int64", "request_time": "utc",
    "response_time": "utc", "latency_ms": "Float64", "request_bytes": "Int64",
    "response_bytes": "Int64", "error": "category", "file": "category",
}  # fmt: skip


def _top_level_error(response: Message | None) -> str | None:
    """The name of a decoded response body's top-level ErrorCode, when it has one."""
    body = None if response is None else response.values(keep=False)
    code = None if body is None else body.get("ErrorCode")
    return error_name(code) if type(code) is int else None


FIELDS_CHUNK_ROWS = 50_000  # rows gathered as Python objects before becoming Arrow columns


def _fields_frame(messages: list[Message]) -> pd.DataFrame:
    """One row per tree node, built in chunks so peak memory stays near the table's own.

    Text columns are Arrow-backed (one buffer per chunk, not a Python object per
    cell); names, paths, types and files are categoricals whose codes are made
    chunk by chunk. Each column's chunks are let go as soon as it is joined.
    """
    categories = {name: _Categories() for name, dtype in _FIELD_DTYPES.items() if dtype == "category"}
    chunks: list[dict[str, Any]] = []
    columns: Columns = {name: [] for name in _FIELD_DTYPES}
    for message in messages:
        _add_field_rows(columns, message)
        if len(columns["number"]) >= FIELDS_CHUNK_ROWS:
            chunks.append(_fields_chunk(columns, categories))
            columns = {name: [] for name in _FIELD_DTYPES}
    chunks.append(_fields_chunk(columns, categories))
    del columns
    frame: dict[str, Any] = {}
    for name, dtype in _FIELD_DTYPES.items():
        parts = [chunk.pop(name) for chunk in chunks]
        if dtype == "string":
            frame[name] = pd.arrays.ArrowStringArray(pa.chunked_array(parts, pa.string()))
        elif dtype == "category":
            frame[name] = categories[name].column(parts)
        elif dtype == "Int64":
            frame[name] = pd.array(pa.chunked_array(parts, pa.int64()).to_pandas(types_mapper=_INT64.get))
        else:
            frame[name] = np.concatenate(parts)
        del parts
    return pd.DataFrame(frame, copy=False)


_INT64 = {pa.int64(): pd.Int64Dtype()}


class _Categories:
    """One categorical column's categories across chunks, in order of first appearance
    (as `pd.factorize` of the whole column would give them); missing values code -1."""

    def __init__(self) -> None:
        self.codes_of: dict[str, int] = {}

    def codes(self, values: list[Any]) -> np.ndarray:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        if not len(uniques):
            return np.full(len(values), -1, dtype=np.int32)
        known = self.codes_of
        lookup = np.array([known.setdefault(value, len(known)) for value in uniques], dtype=np.int32)
        return np.where(codes >= 0, lookup[codes], -1).astype(np.int32)

    def column(self, parts: list[np.ndarray]) -> pd.Categorical:
        return pd.Categorical.from_codes(np.concatenate(parts), pd.Index(list(self.codes_of), dtype="str"))


def _fields_chunk(columns: Columns, categories: dict[str, _Categories]) -> dict[str, Any]:
    chunk: dict[str, Any] = {}
    for name, dtype in _FIELD_DTYPES.items():
        values = columns[name]
        if dtype == "string":
            chunk[name] = pa.array(values, pa.string())
        elif dtype == "category":
            chunk[name] = categories[name].codes(values)
        elif dtype == "Int64":
            chunk[name] = pa.array(values, pa.int64())
        else:
            chunk[name] = np.array(values, dtype=dtype)
    return chunk


def _add_field_rows(columns: Columns, message: Message) -> None:
    number = message.number
    add = [columns[name].append for name in _FIELD_DTYPES]
    rows = message.rows()
    found = field_paths(message.tree(keep=False)) if rows is None else row_paths(rows)
    for node, depth, path in found:
        if isinstance(node, Node):
            name, kind, raw, display, offset, size, generated = (
                node.name, node.type, node.value, node.display, node.offset, node.size, node.generated)
        else:
            name, kind, raw, display, offset, size, _, _, generated = node
        value = raw if raw is None or type(raw) is int or type(raw) is str else json_value(raw)
        for append, item in zip(add, (
            number, path, name, kind, None if value is None else str(value),
            value if type(value) is int else None, display, offset, size, depth, generated,
            message.file,
        ), strict=True):  # fmt: skip
            append(item)


_FIELD_DTYPES = {
    "number": "int64", "path": "category", "name": "category", "type": "category",
    "value": "string", "value_int": "Int64", "display": "string", "offset": "int64",
    "size": "int64", "depth": "int64", "generated": "bool", "file": "category",
}  # fmt: skip


def row_paths(root: Row) -> list[tuple[Row, int, str]]:
    """`field_paths` for a tree laid out as rows: the same rows, depths and paths, in the same order."""
    found: list[tuple[Row, int, str]] = [(root, 0, root[0])]
    for part in root[7] or []:
        strip = len(part[0]) + 1 if part[1] == "struct" else 0
        stack: list[tuple[Row, int, str]] = [(part, 1, part[0])]
        while stack:
            row, depth, path = stack.pop()
            found.append((row, depth, path[strip:] if strip and row is not part else path))
            children = row[7]
            if children:
                in_array = row[1].startswith("[]")
                for child in reversed(children):
                    name = child[0]
                    bracket = name.find("[")
                    child_path = path + name[bracket:] if bracket > 0 and in_array else f"{path}.{name}"
                    stack.append((child, depth + 1, child_path))
    return found


def field_paths(root: Node) -> list[tuple[Node, int, str]]:
    """(node, depth, path) for every node of a message tree.

    Paths are what an analyst types: header fields under their header
    (`RequestHeader.correlation_id`), body fields from the body down
    (`Topics[0].Partitions[2].LeaderId`); the root and body keep their names.
    """
    found: list[tuple[Node, int, str]] = [(root, 0, root.name)]
    for part in root.children:
        is_body = part.role is Role.BODY
        for node, depth, path in part.walk(depth=1, path=part.name):
            if is_body and node is not part:
                path = path[len(part.name) + 1 :]
            found.append((node, depth, path))
    return found


def _api_frame(messages: list[Message], spec: TableSpec) -> pd.DataFrame:
    """A table's rows from flat values; a body the generated decoders leave to the
    interpreter keeps its `records` as bytes (the rows count them without a tree)."""
    columns: Columns = {name: [] for name in spec.dtypes}
    with records_unexpanded():
        for message in messages:
            if spec.feeds(message):
                body = message.values(keep=False)  # None for a response whose request is missing
                if body is not None:
                    spec.rows(message, body, columns)
    return _typed(columns, spec.dtypes)


# -- export -------------------------------------------------------------------


def exportable(frame: pd.DataFrame, *, text: bool) -> pd.DataFrame:
    """A table whose object columns every writer takes: record headers as key/value
    structs (Parquet) or JSON text (CSV); in CSV also bytes as hex and lists as JSON."""
    converted = {}
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object:
            continue
        converted[name] = column.map(_text_cell if text else _parquet_cell, na_action="ignore")
    return frame.assign(**converted) if converted else frame


def _parquet_cell(value: Any) -> Any:
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # record headers
        return [{"key": key, "value": data} for key, data in value]
    return value


def _text_cell(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return json.dumps(_json_ready(value), ensure_ascii=True)
    return value


def _json_ready(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    return value


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

