"""Many captures as lazy Dask DataFrames, one partition per capture, for a cluster.

    import kdissect.dask
    tables = kdissect.dask.read_pcaps("incident/broker-*.pcap.gz")
    tables["exchanges"].groupby("api_name", observed=True).latency_ms.max().compute()
    kdissect.dask.to_parquet(tables, "dataset/")

`read_pcaps` takes a glob, or a list whose items are partitions: a path, a glob,
or a list of paths read together as one capture (a rotated set, merged by packet
time as `read_pcap` does). Each partition is one capture with its own numbering
and connections, as `kdissect --separate` reads files side by side; every row says
which file its message came from (`file`). Nothing is read until a table is
computed, and then each partition reads its capture on the worker that computes
it and makes only the tables computed: a generic table (`messages`, `exchanges`,
`fields`, `records`, `batches`) alone, the per-API tables of `tables` together, in
one pass that decodes each body once. Tables computed together (`dask.compute(a,
b)`, `to_parquet`) read each capture once: the capture stays with the worker that
read it (Dask's memory accounting sees about what it holds) until its tables are
made. Should Dask move it to another worker, or spill it, only its path travels
and it is read again there.

Paths are opened by the workers, not by the caller: on a cluster they must name
files every worker can read (a shared file system, or the same files at the same
path on each machine), and relative paths resolve against each worker's working
directory, so absolute paths are the safe choice. Computing on Dask's local
scheduler is the default; with a `distributed.Client` created in the process,
`.compute()` runs on its cluster.

Needs the `dask` extra: `pip install 'kdissect[dask]'`.
"""

from __future__ import annotations

import glob
import operator
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd

from kdissect.present.analysis import Capture, capture_paths, read_pcap
from kdissect.present.export import write_partitions
from kdissect.present.tables import TABLES

Partition = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def read_pcaps(paths: str | os.PathLike[str] | Sequence[Partition], *,
               tables: Iterable[str] | str | None = None, ports: Iterable[int] = (),
               detect: bool = True) -> dict[str, dd.DataFrame]:
    """Lazy Dask DataFrames of every table (or of `tables`, one name or several), one
    partition per capture."""
    partitions = _partitions(paths)
    if not partitions:
        raise FileNotFoundError(f"no capture files in {paths!r}")
    if isinstance(tables, str):
        tables = [tables]
    names = tuple(dict.fromkeys(tables)) if tables is not None else tuple(Capture([]).table_names())
    options = {"ports": tuple(ports), "detect": detect}
    # A task per capture reads it; each generic table's partition is a task of its own
    # over that capture, and every per-API table's comes from one task over it that makes
    # them together (a table not computed is not made).
    captures = [dask.delayed(ReadCapture, pure=True)(group, options) for group in partitions]
    per_api = tuple(name for name in names if name in TABLES)
    made = [dask.delayed(_api_tables, pure=True)(capture, per_api) for capture in captures] if per_api else []
    empty = Capture([]).tables(names)  # the tables' dtypes, made together
    return {name: _table(name, empty[name], [dask.delayed(operator.getitem, pure=True)(tables, name)
                                             for tables in made] if name in TABLES
                         else [dask.delayed(_generic_table, pure=True)(capture, name) for capture in captures])
            for name in names}


def _partitions(paths: str | os.PathLike[str] | Sequence[Partition]) -> list[list[Any]]:
    if isinstance(paths, str | os.PathLike):
        return [[path] for path in capture_paths(os.fspath(paths))]
    return [capture_paths(item) for item in paths]


def _table(name: str, empty: pd.DataFrame, parts: list[Any]) -> dd.DataFrame:
    meta = _meta(empty)
    # The tables' own dtypes (categoricals, nullable integers, pandas strings) are kept as
    # they are: no conversion of text columns to Arrow strings behind the caller's back.
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_delayed(parts, meta=meta, verify_meta=False)


class ReadCapture:
    """A partition's capture (a file, or a set read together), read where the task that
    makes it runs, for the tasks that make its tables. Pickled (Dask moving it to another
    worker, or spilling it to disk), it keeps only what to read: read again when a table
    is asked of it there. Its tables are made one at a time (the capture's own caches are
    not for threads at once)."""

    def __init__(self, group: list[Any], options: dict[str, Any]) -> None:
        self.group, self.options = group, options
        self._lock = threading.Lock()
        self._capture: Capture | None = self._read()

    def _read(self) -> Capture:
        return read_pcap(self.group, jobs=1, **self.options)  # a partition is one worker's: no processes of its own

    def tables(self, names: Sequence[str]) -> dict[str, pd.DataFrame]:
        """The tables `names` of the capture, per-API ones made together (`Capture.tables`)."""
        with self._lock:
            if self._capture is None:
                self._capture = self._read()
            return self._capture.tables(names)

    def __getstate__(self) -> dict[str, Any]:
        return {"group": self.group, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.group, self.options = state["group"], state["options"]
        self._lock, self._capture = threading.Lock(), None

    def __sizeof__(self) -> int:
        """About the memory the capture holds (what Dask weighs before moving it): its
        messages' bytes and, for each, its objects."""
        capture = self._capture
        if capture is None:
            return object.__sizeof__(self)
        return sum(message.size + MESSAGE_OVERHEAD for message in capture.message_list)


MESSAGE_OVERHEAD = 2048  # bytes a kept message costs beyond its own, about (`ReadCapture.__sizeof__`)


def _generic_table(capture: ReadCapture, name: str) -> pd.DataFrame:
    return capture.tables([name])[name]


def _api_tables(capture: ReadCapture, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    return capture.tables(names)


def _meta(empty: pd.DataFrame) -> pd.DataFrame:
    """An empty frame of the table's dtypes, categoricals marked as of unknown categories."""
    from dask.dataframe.utils import clear_known_categories

    return clear_known_categories(empty)


def to_parquet(tables: Mapping[str, dd.DataFrame], directory: str | os.PathLike[str]) -> list[Path]:
    """Write each table as a Parquet dataset `directory/<table>/`, partitioned by capture file.

    The layout is Hive's (`messages/capture=broker1.pcap/part.0.parquet`), which DuckDB
    (`read_parquet('dataset/messages/*/*.parquet', hive_partitioning=true)`), Spark and
    Polars read directly, and the same as `kdissect --export` writes. `capture` is the file
    name of each row's `file` (a path's slashes cannot stand in a directory name); `file`
    keeps the whole path. Each partition is written where it is computed.
    """
    target = Path(directory)
    written, writes = [], []
    for name, frame in tables.items():
        out = target / name
        writes += [dask.delayed(write_partitions, pure=False)(part, out, index, table=name)
                   for index, part in enumerate(frame.to_delayed())]
        written.append(out)
    dask.compute(*writes)
    return written


def files_of(pattern: str) -> list[str]:
    """The files a glob names, sorted (what `read_pcaps(pattern)` makes partitions of)."""
    return sorted(glob.glob(pattern))
