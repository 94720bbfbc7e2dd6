"""pandas for Jupyter: `read_pcap()` and the tables of a capture.

Every table is built column-wise: one pass fills plain Python lists per
column, then pandas gets each column once with its real dtype (nullable
integers, UTC datetimes, categoricals for names). Tables are built on first
access and cached.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, ParamSpec

import numpy as np
import pandas as pd
import pyarrow as pa

from kdissect.apis import api_name, response_header_version
from kdissect.decode.record_nodes import records_unexpanded
from kdissect.decode.rows import Row
from kdissect.decode.schema import configure_definitions
from kdissect.decode.schema.plan import Kind, message_plan
from kdissect.decode.tree import Node, Role
from kdissect.decode.values import cycle_collection_paused
from kdissect.error_codes import error_name
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.files import named, source_name
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.notes import Note, listed
from kdissect.pair.message import Message
from kdissect.parallel import MessagesToCome
from kdissect.pipeline import CaptureClock, KeyLogSource, read_messages
from kdissect.present.columns import column as typed_column
from kdissect.present.columns import typed
from kdissect.present.html import capture_html
from kdissect.present.parquet import parquet_types, write_parquet
from kdissect.present.records import json_value
from kdissect.present.summary import REQUEST_MISSING, plural
from kdissect.present.table_spec import CONTEXT_DTYPES, context_values
from kdissect.present.table_spec import Row as TableRow
from kdissect.present.tables import TABLES, Columns, TableSpec

P = ParamSpec("P")


def _naming_its_file(read: Callable[P, Capture]) -> Callable[P, Capture]:
    """`read_pcap`, whose error about a single capture file (or an open file) names it, as
    one about a file of a set does ("x.pcap: empty file", not "empty file")."""

    @functools.wraps(read)
    def reading(*args: P.args, **kwargs: P.kwargs) -> Capture:
        try:
            return read(*args, **kwargs)
        except CaptureError as problem:
            path = args[0] if args else kwargs.get("path")
            if not isinstance(path, str | os.PathLike):
                name = getattr(path, "name", None)  # an open file names its own
                if isinstance(name, str) and name:
                    raise CaptureError(named(name, problem)) from None
                raise  # a stream of no name, or a set: said of its file where read
            if isinstance(path, str) and not os.path.exists(path) and glob.has_magic(path):
                raise  # a glob: what it found, or did not, is said with it
            raise CaptureError(named(os.fspath(path), problem)) from None

    return reading


@_naming_its_file
def read_pcap(
    path: str | os.PathLike[str] | BinaryIO | Sequence[str | os.PathLike[str]],
    ports: Iterable[int] = (),
    apis: Iterable[int | str] | int | str | None = None,
    detect: bool = True,
    filter: str | None = None,
    tls_keylog: KeyLogSource | None = None,
    show_secrets: bool = False,
    schemas: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    lazy: bool = True,
    findings: bool = False,
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
    script the default is 1 and `jobs` is given explicitly. With several jobs and every
    message kept, the messages themselves are made when first asked for (a notebook that
    only looks at tables never pays for them); `lazy=False` makes them while the workers
    read, which is sooner for a caller that walks every message at once. `findings=True`
    has the workers also read every body for what `kdissect.present.findings.find`
    needs of it, each its share, as `--findings` does.
    """
    from kdissect.present.filter import selector

    if schemas is not None:
        configure_definitions(schemas)
    if filter is not None and not filter.strip():
        filter = None  # a blank filter is no filter, as for `kdissect -Y ""`

    problems: list[Note] = []
    clock = CaptureClock()  # the capture's first packet: what relative times count from
    keep = selector(apis, filter, start=lambda: clock.start)
    sources = capture_paths(path)
    jobs = _jobs(sources, jobs, tls_keylog)
    found: Iterable[Message]
    early: list[Any] = []  # the per-API tables the reading workers make (parallel_tables)
    names = [source_name(s) for s in sources]
    facts = findings and apis is None and filter is None  # the workers find what findings read of bodies
    if jobs > 1 and apis is None and filter is None and lazy:  # every message kept: made when first needed
        from kdissect.parallel import read_to_come
        from kdissect.present.parallel_tables import (
            TableJobs,
            api_facts_and_tables,
            api_tables,
            share_answer,
        )

        # the workers make the per-API tables, then keep their shares for the other tables
        to_come, finished = read_to_come(sources, jobs, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                                         report=problems.append, show_secrets=show_secrets,
                                         preload=("kdissect.present.parallel_tables",),
                                         finish=functools.partial(api_facts_and_tables if facts else api_tables,
                                                                  api_frames_made),
                                         answer=functools.partial(share_answer, table_of), clock=clock)
        capture = Capture(to_come, source=", ".join(names), problems=problems, files=names, jobs=jobs,
                          start=clock.start)
        capture._workers = TableJobs(jobs, early=finished, facts=facts)
        return capture
    with cycle_collection_paused():
        if jobs > 1:
            from kdissect.parallel import read_messages as read_in_parallel
            from kdissect.present.filter import BodyTests
            from kdissect.present.parallel_tables import api_facts_and_tables, api_tables

            # the filter's tests on body fields run on the workers, as with `kdissect -Y`
            tests = None if filter is None else BodyTests.of(filter)
            messages = [message for message, known in read_in_parallel(
                sources, jobs, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                report=problems.append, show_secrets=show_secrets, clock=clock, prepare=tests,
                preload=("kdissect.present.parallel_tables", *getattr(tests, "preload", ())),
                finish=functools.partial(api_facts_and_tables if facts else api_tables, api_frames_made),
                finished=early.append)
                if keep(message, known)]
        else:
            found = read_messages(sources, ports=[*DEFAULT_PORTS, *ports], detect=detect,
                                  report=problems.append, tls_keylog=tls_keylog,
                                  show_secrets=show_secrets, clock=clock)
            messages = [message for message in found if keep(message)]
    capture = Capture(messages, source=", ".join(names), problems=problems, files=names, jobs=jobs,
                      start=clock.start)
    if early:
        from kdissect.present.parallel_tables import TableJobs

        capture._workers = TableJobs(jobs, early=early[0], facts=facts)
    return capture


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

    def __init__(self, messages: list[Message] | MessagesToCome, source: str = "",
                 problems: list[Note] | None = None, files: list[str] | None = None, jobs: int = 1,
                 start: float | None = None):
        self._messages = messages  # or, read on worker processes, what they will be made of
        self._start = start  # epoch seconds of the capture's first packet, when known
        self.jobs = jobs  # worker processes that build the tables
        self._workers: Any = None
        self.source = source
        self.files = files or ([source] if source else [])
        self.problems = problems or []
        self._api_tables: dict[str, pd.DataFrame] = {}
        self._batches_ahead: pd.DataFrame | None = None  # made with the records table, not yet asked for
        self._batches_made = False  # (then the records table is made alone)

    @property
    def start(self) -> float | None:
        """Epoch seconds of the capture's first packet, what the listing's relative times count
        from (that of its first message where the packets are not known); None without any."""
        if self._start is not None:
            return self._start
        return self.message_list[0].time if self.message_list else None

    @property
    def message_list(self) -> list[Message]:
        """Every message, in capture order."""
        if not isinstance(self._messages, list):
            self._messages = self._messages.get()
        return self._messages

    @cached_property
    def _by_number(self) -> dict[int, Message]:
        return {message.number: message for message in self.message_list}

    def message(self, number: int) -> Message:
        """A message by its number (the `number` column), with its tree via `.tree()`."""
        return self._by_number[number]

    def tree(self, number: int) -> Node:
        return self._by_number[number].tree()

    @cached_property
    def messages(self) -> pd.DataFrame:
        """One row per Kafka message: the JSON output's columns without the tree."""
        with cycle_collection_paused():
            return self._built("messages", _MESSAGE_DTYPES, lambda: _messages_frame(self.message_list))

    @cached_property
    def exchanges(self) -> pd.DataFrame:
        """One row per request and its response: both times, the latency, the top-level error."""
        with cycle_collection_paused():
            return self._built("exchanges", _EXCHANGE_DTYPES, lambda: _exchanges_frame(self.message_list))

    @cached_property
    def fields(self) -> pd.DataFrame:
        """One row per node of every message's tree. `offset` and `size` are where the
        node's bytes sit in its Kafka message, as in the JSON tree, not Kafka offsets."""
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
            frame = self._workers.build(name, self._messages, feeds or _every, dict(dtypes), table_of)
            if frame is not None:
                return frame
        return build()

    def workers_find_facts(self) -> bool:
        """Whether the workers that read the capture find the facts of its bodies
        (`read_pcap(..., findings=True)` with several jobs), without waiting for them."""
        return self._workers is not None and self._workers.facts

    def workers_body_facts(self) -> Any | None:
        """The facts of every body the workers that read the capture found (`findings`),
        or None where they found none."""
        found = None if self._workers is None else self._workers.body_facts(self._messages)
        return None if found is None else found[0]

    def held_shares(self) -> Any | None:
        """The shares the workers that read the capture hold, for what they make of them on
        request (`parallel_tables.HeldShares`); None where they hold none (one process, or
        a capture read with a filter or `lazy=False`)."""
        return None if self._workers is None else self._workers.held_shares(self._messages)

    def workers_topics(self) -> Any | None:
        """The topics the workers that read the capture counted from the same bodies
        (`topic_stats.Topics`), or None where they counted none."""
        found = None if self._workers is None else self._workers.body_facts(self._messages)
        return None if found is None else found[1]

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

    def _api_table(self, spec: TableSpec, along: Sequence[TableSpec] | None = None) -> pd.DataFrame:
        """A per-API table. Built in this process, it is made together with every other
        per-API table (or those `along`) not built yet, in one pass that decodes each
        body once."""
        cache = self._api_tables
        if spec.name not in cache:
            with cycle_collection_paused():
                cache[spec.name] = self._built(spec.name, spec.dtypes,
                                               lambda: self._api_frames(spec, along), spec.feeds)
        frame: pd.DataFrame = cache[spec.name]
        return frame

    def _api_frames(self, spec: TableSpec, along: Sequence[TableSpec] | None = None) -> pd.DataFrame:
        """`spec`'s table, and with it (in one process) every per-API table, or those
        `along`, not built yet."""
        if self.jobs > 1:  # the others may be worth building on the workers
            return _api_frame(self.message_list, spec)
        others = TABLES.values() if along is None else along
        pending = [spec, *(other for other in others
                           if other.name not in self._api_tables and other is not spec)]
        frames = _api_frames(self.message_list, pending)
        self._api_tables.update(frames)
        return frames[spec.name]

    @cached_property
    def records(self) -> pd.DataFrame:
        """One row per record of every `records` field (Produce, Fetch, ...).

        Keys and values are bytes (or missing), headers a list of (str, bytes) pairs;
        `export` writes them as Parquet binary and a list of key/value structs, and
        as hex text and JSON text in CSV.
        """
        from kdissect.present import record_tables as rt

        with cycle_collection_paused():  # flat values and decoded records: no cycles
            return self._built("records", rt.RECORD_DTYPES, self._records_and_batches, rt.carries_records)

    @cached_property
    def batches(self) -> pd.DataFrame:
        """One row per record batch (or legacy message) of every `records` field."""
        from kdissect.present import record_tables as rt

        made, self._batches_ahead, self._batches_made = self._batches_ahead, None, True
        if made is not None:
            return made
        with cycle_collection_paused():
            return self._built("batches", rt.BATCH_DTYPES, lambda: typed(
                rt.batch_columns(rt.records_fields(self.message_list)), rt.BATCH_DTYPES), rt.carries_records)

    def _records_and_batches(self) -> pd.DataFrame:
        """The records table, and (unless it was built already) the batches table made from
        the same pass, which decodes each `records` field once, kept until it is asked for
        (it is the smaller: a row per batch, no keys or values)."""
        from kdissect.present import record_tables as rt

        fields = rt.records_fields(self.message_list)
        if self._batches_made:
            return typed(rt.record_columns(fields), rt.RECORD_DTYPES)
        records, batches = rt.record_and_batch_columns(fields)
        self._batches_ahead = typed(batches, rt.BATCH_DTYPES)
        return typed(records, rt.RECORD_DTYPES)

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

    def tables(self, names: Iterable[str] | str | None = None) -> dict[str, pd.DataFrame]:
        """Every table by name, generic ones first; or the tables `names` (one name or
        several), whose per-API ones are then made together without the others, so that
        bodies no table asked for are not decoded (`table` makes a per-API table with
        every other one, for the next `table` to find)."""
        if names is None:
            return {name: self.table(name) for name in self.table_names()}
        if isinstance(names, str):
            names = [names]
        wanted = list(dict.fromkeys(names))
        along = [TABLES[name] for name in wanted if name in TABLES]
        return {name: self._api_table(TABLES[name], along) if name in TABLES else self.table(name)
                for name in wanted}

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
                write_parquet(exportable(frame, text=False), path, parquet_types(name))
            else:
                exportable(frame, text=True).to_csv(path, index=False)
            written.append(path)
        return written

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return "\n".join(self._summary_lines())

    def _summary_lines(self) -> list[str]:
        requests, answered, streams, apis = self._counts()
        lines = [
            f"Capture {self._name()}: {plural(len(self), 'Kafka message')} "
            f"on {plural(streams, 'connection')}, {plural(requests, 'request')} ({answered} answered)",
        ]
        lines += [f"  {name}: {count}" for name, count in sorted(apis.items(), key=lambda i: -i[1])]
        if self.problems:
            lines.append(f"  {len(self.problems)} capture problems, first: {self.problems[0]}")
        return lines

    def _counts(self) -> tuple[int, int, int, dict[str, int]]:
        """Requests, those answered, connections, and the messages of each API in order of
        first appearance: counted from the messages table where the messages are not made
        yet (the workers that read the capture make that table: `parallel_tables`)."""
        if isinstance(self._messages, list):
            messages = self._messages
            apis: dict[str, int] = {}
            for m in messages:
                name = m.api_name or REQUEST_MISSING
                apis[name] = apis.get(name, 0) + 1
            return (sum(1 for m in messages if m.is_request),
                    sum(1 for m in messages if m.is_request and m.pair is not None),
                    len({m.frame.connection.index for m in messages}), apis)
        table = self.messages
        request = (table["direction"] == "request").to_numpy(dtype=bool)
        names = table["api_name"].astype(object).where(table["api_name"].notna(), REQUEST_MISSING)
        counts = names.value_counts(sort=False)
        return (int(request.sum()), int((request & table["pair"].notna().to_numpy(dtype=bool)).sum()),
                int(table["stream"].nunique()), {name: int(counts[name]) for name in pd.unique(names)})

    def _name(self) -> str:
        if len(self.files) > 1:
            return f"{os.path.basename(self.files[0])} and {plural(len(self.files) - 1, 'more file')}"
        return os.path.basename(self.source) or "(stream)"

    def _repr_html_(self) -> str:
        return capture_html(self)


def _every(_message: Message) -> bool:
    return True


def table_of(messages: list[Message], name: str, ahead: dict[str, Any] | None = None) -> pd.DataFrame:
    """Table `name` over `messages` in this process (what a table worker runs). Given
    `ahead` (kept by the caller for these messages), the per-API tables are made as one
    process makes them: together, in one pass that decodes each body once, the first time
    one of them is asked for; `ahead` holds the others until they are (and the batches
    table made with the records table: `_generic_table`)."""
    if name not in TABLES:
        return _generic_table(messages, name, ahead)
    if ahead is None:  # that table alone
        return _api_frame(messages, TABLES[name])
    if name not in ahead:
        ahead.update(_api_frames(messages, list(TABLES.values())))
    return ahead.pop(name)


_BATCHES_GIVEN = "batches given"  # in `ahead`: the records table is then made alone


def _generic_table(messages: list[Message], name: str, ahead: dict[str, Any] | None) -> pd.DataFrame:
    """Table `name`, not per-API, over `messages`; given `ahead`, the batches table made with
    the records table (one decode of each `records` field) is kept there until asked for."""
    capture = Capture(messages)
    if ahead is None:
        return capture.table(name)
    if name == "batches":
        ahead[_BATCHES_GIVEN] = True
        if "batches" in ahead:
            return ahead.pop("batches")
    capture._batches_made = bool(ahead.get(_BATCHES_GIVEN))
    table = capture.table(name)
    if capture._batches_ahead is not None:
        ahead["batches"] = capture._batches_ahead
    return table


# -- generic tables -----------------------------------------------------------


def _messages_frame(messages: list[Message]) -> pd.DataFrame:
    """One row per message: what `message_record` (JSON) says of it, filled column by
    column; a connection's addresses are formatted once."""
    frames = [message.frame for message in messages]
    connections = [frame.connection for frame in frames]
    ends = _ends(connections)
    routes = [ends[id(connection)] if message.is_request else ends[id(connection)][::-1]
              for message, connection in zip(messages, connections, strict=True)]
    keys = [message.api_key for message in messages]
    names = {key: None if key is None else api_name(key) for key in set(keys)}
    pairs = [message.pair for message in messages]
    latencies = [message.latency for message in messages]
    notes = [message.all_notes() for message in messages]
    columns: Columns = {
        "number": [message.number for message in messages],
        "frame": [frame.last_packet for frame in frames],
        "time": [frame.last_ns for frame in frames],
        "stream": [connection.index for connection in connections],
        "src": [route[0] for route in routes],
        "dst": [route[1] for route in routes],
        "direction": [str(frame.direction) for frame in frames],
        "api_key": keys,
        "api_name": [names[key] for key in keys],
        "api_version": [message.api_version for message in messages],
        "correlation_id": [message.correlation_id for message in messages],
        "client_id": [message.client_id for message in messages],
        "length": [message.length for message in messages],
        "pair": [None if pair is None else pair.number for pair in pairs],
        "latency_ms": [None if latency is None else round(latency * 1000.0, 6) for latency in latencies],
        "tls": [connection.tls for connection in connections],
        "notes": [listed(found) if found else "" for found in notes],
        "file": [message.file for message in messages],
    }
    return typed(columns, _MESSAGE_DTYPES)


def _ends(connections: list[Any]) -> dict[int, tuple[str, str]]:
    """Each connection's client and server address as text, by the connection's id."""
    return {id(connection): (_address(connection.client), _address(connection.server))
            for connection in {id(connection): connection for connection in connections}.values()}


_MESSAGE_DTYPES = {
    "number": "int64", "frame": "int64", "time": "utc", "stream": "int64", "src": "category",
    "dst": "category", "direction": "category", "api_key": "Int64", "api_name": "category",
    "api_version": "Int64", "correlation_id": "Int64", "client_id": "category", "length": "Int64",
    "pair": "Int64", "latency_ms": "Float64", "tls": "bool", "notes": "string",
    "file": "category",
}  # fmt: skip


def _exchanges_frame(messages: list[Message]) -> pd.DataFrame:
    """One row per request (with its response, when seen) and per response whose request
    is not in the capture, filled column by column."""
    requests: list[Message | None] = []
    responses: list[Message | None] = []
    for message in messages:
        if message.is_request:
            requests.append(message)
            responses.append(message.pair)
        elif message.pair is None:  # its request is not in the capture
            requests.append(None)
            responses.append(message)
    either = [request or response for request, response in zip(requests, responses, strict=True)]
    connections = [message.frame.connection for message in either if message is not None]
    ends = _ends(connections)
    keys = [message.api_key for message in either if message is not None]
    names = {key: None if key is None else api_name(key) for key in set(keys)}
    latencies = [None if response is None else response.latency for response in responses]
    columns: Columns = {
        "request": [None if request is None else request.number for request in requests],
        "response": [None if response is None else response.number for response in responses],
        "stream": [connection.index for connection in connections],
        "client": [ends[id(connection)][0] for connection in connections],
        "server": [ends[id(connection)][1] for connection in connections],
        "client_id": [None if request is None else request.client_id for request in requests],
        "api_key": keys,
        "api_name": [names[key] for key in keys],
        "api_version": [message.api_version for message in either if message is not None],
        "correlation_id": [message.correlation_id for message in either if message is not None],
        "request_time": [None if request is None else request.time_ns for request in requests],
        "response_time": [None if response is None else response.time_ns for response in responses],
        "latency_ms": [None if latency is None else round(latency * 1e3, 6)  # as in `messages`
                       for latency in latencies],
        "request_bytes": [None if request is None else len(request.frame.data) for request in requests],
        "response_bytes": [None if response is None else len(response.frame.data) for response in responses],
        "error": [_top_level_error(response) for response in responses],
        "file": [(response or request or message).file for message, request, response
                 in zip(either, requests, responses, strict=True) if message is not None],
    }
    return typed(columns, _EXCHANGE_DTYPES)


_EXCHANGE_DTYPES = {
    "request": "Int64", "response": "Int64", "stream": "int64", "client": "category",
    "server": "category", "client_id": "category", "api_key": "Int64", "api_name": "category",
    "api_version": "Int64", "correlation_id": "Int64", "request_time": "utc",
    "response_time": "utc", "latency_ms": "Float64", "request_bytes": "Int64",
    "response_bytes": "Int64", "error": "category", "file": "category",
}  # fmt: skip


def _top_level_error(response: Message | None) -> str | None:
    """The name of a decoded response body's top-level ErrorCode, when it has one."""
    if response is None or response.pair is None or response.api_key is None or response.api_version is None:
        return None  # not decoded
    place = _error_code_place(response.api_key, response.api_version)
    if place is None:
        return None  # the body has no top-level ErrorCode
    code = _fixed_error_code(response.frame.data, *place)
    if code is None:  # not read straight from the frame: decode the body
        body = response.values(keep=False)
        code = None if body is None else body.get("ErrorCode")
    return error_name(code) if type(code) is int else None


def _fixed_error_code(data: bytes, flexible_header: bool, at: int | None) -> int | None:
    """The ErrorCode at body offset `at` of a complete frame whose response header has no
    tagged fields: there the decoders read it whatever follows; None when not so."""
    start = 9 if flexible_header else 8  # size, correlation id, tagged field count
    if at is None or len(data) < start + at + 2 or int.from_bytes(data[:4], "big") != len(data) - 4:
        return None
    if flexible_header and data[8] != 0:
        return None
    return int.from_bytes(data[start + at : start + at + 2], "big", signed=True)


@functools.cache
def _error_code_place(api_key: int, version: int) -> tuple[bool, int | None] | None:
    """Where a response body's top-level ErrorCode sits: (flexible header, its offset in
    the body when only fixed-size fields precede it, else None); None without one."""
    plan = message_plan(api_key, version, "response")
    fields = [] if plan is None else list(plan.body.fields)
    names = [field.name for field in fields]
    if "ErrorCode" not in names:
        return None
    at: int | None = 0
    for field in fields[: names.index("ErrorCode") + 1]:
        fixed = field.tag is None and field.kind in (Kind.INTEGER, Kind.FLOAT, Kind.BOOL) and field.codec.size > 0
        at = at + field.codec.size if at is not None and fixed else None
    error_code = fields[names.index("ErrorCode")]
    if at is not None and error_code.codec.size == 2:
        at -= 2
    else:
        at = None
    return response_header_version(api_key, version) == 1, at


FIELDS_CHUNK_ROWS = 50_000  # rows gathered as Python objects before becoming Arrow columns


def _fields_frame(messages: list[Message]) -> pd.DataFrame:
    """One row per tree node, built in chunks so peak memory stays near the table's own.

    Every text column is a categorical whose codes are made chunk by chunk: names,
    paths, types and files, and values and displays too, which repeat across a
    capture (the same counts, ids, names and flags again and again), so each
    distinct text is held once and a row holds a narrow code. Offsets, sizes and
    depths are narrow integers. Numeric columns and codes grow in place
    (`_Growing`), so no column is ever held twice.
    """
    columns = {name: _FieldColumn(dtype) for name, dtype in _FIELD_DTYPES.items()}
    rows: list[tuple[Any, ...]] = []
    for message in messages:
        _add_field_rows(rows, message)
        if len(rows) >= FIELDS_CHUNK_ROWS:
            _add_fields_chunk(columns, rows)
            rows = []
    _add_fields_chunk(columns, rows)
    del rows
    return pd.DataFrame({name: columns.pop(name).done() for name in _FIELD_DTYPES}, copy=False)


def _add_fields_chunk(columns: dict[str, _FieldColumn], rows: list[tuple[Any, ...]]) -> None:
    transposed = zip(*rows, strict=True) if rows else [()] * len(columns)
    for column, values in zip(columns.values(), transposed, strict=True):
        column.extend(values)


class _Growing:
    """A NumPy array filled chunk by chunk. It grows by reallocation, which moves no
    data for a large array, so it never exists twice, as concatenating chunks would;
    by an eighth at a time, as the room it adds is zero-filled (memory in use)."""

    def __init__(self, dtype: str) -> None:
        self.array = np.empty(1 << 16, dtype=dtype)
        self.length = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.length + len(values)
        if end > len(self.array):
            self.array.resize(max(end, len(self.array) + len(self.array) // 8), refcheck=False)
        self.array[self.length : end] = values
        self.length = end

    def done(self) -> np.ndarray:
        self.array.resize(self.length, refcheck=False)
        return self.array


class _FieldColumn:
    """One column of the `fields` table as it is built: Arrow chunks for text, growing
    arrays for numbers, codes (with their categories, in chunks as narrow as the
    categories so far allow) for categoricals, and values with a mask for nullable
    integers."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.chunks: list[Any] = []
        self.categories = _Categories() if dtype == "category" else None
        self.data = _Growing(_STORED.get(dtype, dtype))
        self.mask = _Growing("bool") if dtype == "Int64" else None

    def extend(self, values: Sequence[Any]) -> None:
        if self.dtype == "string":
            self.chunks.append(pa.array(values, pa.string()))
        elif self.categories is not None:
            self.chunks.append(self.categories.codes(values))
        elif self.mask is not None:
            found = pa.array(values, pa.int64())
            self.mask.extend(found.is_null().to_numpy(zero_copy_only=False))
            self.data.extend(found.fill_null(0).to_numpy())
        else:
            self.data.extend(np.array(values, dtype=self.dtype))

    def done(self) -> Any:
        if self.dtype == "string":
            return pd.arrays.ArrowStringArray(pa.chunked_array(self.chunks, pa.string()))
        if self.categories is not None:
            chunks, self.chunks = self.chunks, []
            return self.categories.column(chunks)
        if self.mask is not None:
            return pd.arrays.IntegerArray(self.data.done(), self.mask.done())
        return self.data.done()


_STORED = {"category": "int8", "Int64": "int64", "string": "int8"}  # text keeps no numbers here


class _Categories:
    """One categorical column's categories across chunks, in order of first appearance
    (as `pd.factorize` of the whole column would give them); missing values code -1."""

    def __init__(self) -> None:
        self.codes_of: dict[str, int] = {}

    def codes(self, values: Sequence[Any]) -> np.ndarray:
        """The codes of `values`, as narrow an integer as the categories so far allow."""
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        known = self.codes_of
        if not len(uniques):
            return np.full(len(values), -1, dtype=_code_type(len(known)))
        lookup = np.array([known.setdefault(value, len(known)) for value in uniques], dtype=np.int64)
        return np.where(codes >= 0, lookup[codes], -1).astype(_code_type(len(known)))

    def column(self, chunks: list[np.ndarray]) -> pd.Categorical:
        """The categorical of the codes in `chunks`, made one array of the code type
        pandas gives these categories."""
        codes = np.empty(sum(len(chunk) for chunk in chunks), dtype=_code_type(len(self.codes_of)))
        if chunks:
            np.concatenate(chunks, out=codes, casting="same_kind")
        del chunks[:]
        return pd.Categorical.from_codes(codes, pd.Index(list(self.codes_of), dtype="str"))


def _code_type(categories: int) -> type[np.signedinteger[Any]]:
    """The narrowest integer for codes of `categories` categories (and -1), as pandas picks it."""
    for kind in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(kind).max:
            return kind
    return np.int64


def _add_field_rows(rows: list[tuple[Any, ...]], message: Message) -> None:
    """One row (a tuple in `_FIELD_DTYPES` order) per node of the message's tree, depth
    first, each made as its node is reached.

    Paths are what an analyst types: header fields under their header
    (`RequestHeader.correlation_id`), body fields from the body down
    (`Topics[0].Partitions[2].LeaderId`: an array element's `[i]` attaches to the array
    field); the root and body keep their names."""
    layout = message.rows()
    if layout is None:
        _add_node_rows(rows.append, message.tree(keep=False), message.number, message.file)
    else:
        _add_layout_rows(rows.append, layout, message.number, message.file)


def _add_node_rows(add: Callable[[tuple[Any, ...]], None], root: Node, number: int, file: Any) -> None:
    """`_add_field_rows` of a tree of `Node`s."""
    parts = [(root, 0, root.name, 0)] + [(part, 1, part.name, len(part.name) + 1 if part.role is Role.BODY else 0)
                                         for part in root.children]
    array = Role.ARRAY
    for part, depth, path, strip in parts:
        stack = [(part, depth, path)]
        while stack:
            node, depth, path = stack.pop()
            raw = node.value
            value = raw if raw is None or type(raw) is int or type(raw) is str else json_value(raw)
            add((number, path[strip:] if strip and node is not part else path, node.name, node.type,
                 None if value is None else str(value), value if type(value) is int else None, node.display,
                 node.offset, node.size, depth, node.generated, file))
            children = node.children
            if children and depth:  # (the root's parts are walked one by one, above)
                in_array = node.role is array
                for child in reversed(children):
                    name = child.name
                    bracket = name.find("[")
                    stack.append((child, depth + 1, path + name[bracket:] if bracket > 0 and in_array
                                  else f"{path}.{name}"))


def _add_layout_rows(add: Callable[[tuple[Any, ...]], None], root: Row, number: int, file: Any) -> None:
    """`_add_field_rows` of a tree laid out as rows (`kdissect.decode.rows`), alike."""
    parts = [(root, 0, root[0], 0)] + [(part, 1, part[0], len(part[0]) + 1 if part[1] == "struct" else 0)
                                       for part in root[7] or []]
    for part, depth, path, strip in parts:
        stack = [(part, depth, path)]
        while stack:
            row, depth, path = stack.pop()
            name, kind, raw, display, offset, size, _, children, generated = row
            value = raw if raw is None or type(raw) is int or type(raw) is str else json_value(raw)
            add((number, path[strip:] if strip and row is not part else path, name, kind,
                 None if value is None else str(value), value if type(value) is int else None, display,
                 offset, size, depth, generated, file))
            if children and depth:  # (the root's parts are walked one by one, above)
                in_array = kind.startswith("[]")
                for child in reversed(children):
                    name = child[0]
                    bracket = name.find("[")
                    stack.append((child, depth + 1, path + name[bracket:] if bracket > 0 and in_array
                                  else f"{path}.{name}"))


_FIELD_DTYPES = {
    "number": "int64", "path": "category", "name": "category", "type": "category",
    "value": "category", "value_int": "Int64", "display": "category", "offset": "int32",
    "size": "int32", "depth": "int16", "generated": "bool", "file": "category",
}  # fmt: skip


def _api_frame(messages: list[Message], spec: TableSpec) -> pd.DataFrame:
    """One per-API table (see `_api_frames`)."""
    return _api_frames(messages, [spec])[spec.name]


def _api_frames(messages: list[Message], specs: Sequence[TableSpec]) -> dict[str, pd.DataFrame]:
    """Tables' rows from flat values, in one pass that decodes each body once, for every
    table it feeds; a body the generated decoders leave to the interpreter keeps its
    `records` as bytes (the rows count them without a tree)."""
    return dict(api_frames_made(messages, specs))


def api_frames_made(messages: list[Message], specs: Sequence[TableSpec] | None = None,
                    pause: Callable[[], None] | None = None) -> Iterator[tuple[str, pd.DataFrame]]:
    """`_api_frames` (of every per-API table by default), each table yielded with its name
    as soon as it is made, in the order of `specs`: once the pass is over, a reading
    worker sends one table while it makes the next (`parallel_tables.api_tables`).
    `pause`, when given, is called every `parallel.PAUSE_EVERY` messages of the pass (there a
    reading worker answers what it was asked meanwhile: `parallel.serve_waiting`)."""
    from kdissect.parallel import PAUSE_EVERY

    specs = list(TABLES.values()) if specs is None else specs
    gathered = [_Gathered(spec) for spec in specs]
    # Which tables a message feeds depends on its API, version and direction only.
    fed: dict[tuple[int | None, int | None, bool], list[_Gathered]] = {}
    step = PAUSE_EVERY if pause is not None else max(len(messages), 1)
    for start in range(0, len(messages), step):
        with records_unexpanded():
            for position in range(start, min(start + step, len(messages))):
                message = messages[position]
                key = (message.api_key, message.api_version, message.is_request)
                feeding = fed.get(key)
                if feeding is None:
                    feeding = fed[key] = [table for table in gathered if table.spec.feeds(message)]
                if feeding:
                    body = message.values(keep=False)  # None for a response whose request is missing
                    if body is not None:
                        for table in feeding:
                            rows = table.spec.rows(message, body)
                            if rows:
                                table.add(position, rows)
        if pause is not None:
            pause()
    context = _Context(messages, [table.positions for table in gathered])
    for table in gathered:
        yield table.spec.name, table.frame(context)


class _Gathered:
    """One per-API table's rows as they are made: the rows (the columns after the context
    ones) and, once per message that gave rows, its place and how many rows it gave."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.rows: list[TableRow] = []
        self.positions: list[int] = []
        self.counts: list[int] = []

    def add(self, position: int, rows: list[TableRow]) -> None:
        self.rows += rows
        self.positions.append(position)
        self.counts.append(len(rows))

    def frame(self, context: _Context) -> pd.DataFrame:
        """The typed table: context columns repeated for each message's rows, each other
        column converted (`TableSpec.converted`) and typed as a whole."""
        spec, rows = self.spec, self.rows
        names = list(spec.dtypes)[len(CONTEXT_DTYPES):]
        values = list(zip(*rows, strict=True)) if rows else [()] * len(names)
        if len(values) != len(names):
            raise ValueError(f"{spec.name}: rows of {len(values)} values for {len(names)} columns")
        self.rows = []
        body = {name: list(found) for name, found in zip(names, values, strict=True)}
        del values
        for name, convert in spec.converted.items():
            body[name] = convert(body[name])
        columns = context.repeated(self.positions, self.counts)
        for name in names:
            columns[name] = typed_column(body.pop(name), spec.dtypes[name])
        return pd.DataFrame(columns)


class _Context:
    """The context columns (`CONTEXT_DTYPES`) of the messages that gave rows to any table,
    typed once; a table takes each message's values for each of its rows."""

    def __init__(self, messages: list[Message], positions: list[list[int]]) -> None:
        given = np.zeros(len(messages), dtype=bool)
        for found in positions:
            given[found] = True
        self.positions = np.flatnonzero(given)
        self.frame = typed(_contexts([messages[at] for at in self.positions]), CONTEXT_DTYPES)

    def repeated(self, positions: list[int], counts: list[int]) -> dict[str, Any]:
        """The context columns of a table whose rows came `counts` at a time from the
        messages at `positions`; categories only of the values the table holds."""
        rows = np.repeat(np.searchsorted(self.positions, positions), counts)
        columns = {}
        for name, dtype in CONTEXT_DTYPES.items():
            found = self.frame[name].array.take(rows)
            columns[name] = found.remove_unused_categories() if dtype == "category" else found
        return columns


def _contexts(messages: list[Message]) -> Columns:
    """The context columns (`context_values`) of `messages`, a broker's address formatted
    once per connection."""
    brokers: dict[int, str] = {}
    found: Columns = {name: [] for name in CONTEXT_DTYPES}
    numbers, times, streams, servers, files = found.values()
    for message in messages:
        connection = message.frame.connection
        broker = brokers.get(id(connection))
        if broker is None:
            broker = brokers[id(connection)] = context_values(message)[3]
        numbers.append(message.number)
        times.append(message.time_ns)
        streams.append(connection.index)
        servers.append(broker)
        files.append(message.file)
    return found


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


def _address(address: Any) -> str:
    from kdissect.ingest.net import format_address

    return format_address(address)

