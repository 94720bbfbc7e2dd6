"""`kdissect --export DIR`: the analysis tables of each capture as Parquet or CSV.

The messages exported are those the listing would show: `--api`, `-Y` and `-c`
apply (a count over all the files, as for the listing), and several files are one
capture merged by packet time, as listed (numbering and connections run on across
them; the `file` column says which file each message came from), or with
`--separate` each a capture of its own.

Parquet is one dataset, partitioned by table and capture file in Hive's layout,
the same as `kdissect.dask.to_parquet` writes (`write_partitions` does both):

    DIR/messages/capture=broker1.pcap/part.0.parquet

which DuckDB reads directly (`read_parquet('DIR/messages/*/*.parquet',
hive_partitioning=true)`), as do Spark and Polars. CSV is one file per table
(`DIR/messages.csv`; with `--separate`, `DIR/<file stem>/messages.csv` for each file).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kdissect.pair.message import Message
from kdissect.present.parquet import parquet_types, write_parquet

if TYPE_CHECKING:
    import pandas as pd

EXIT_OK, EXIT_USAGE = 0, 2


def export_files(
    args: argparse.Namespace,
    keep: Callable[[Message], bool],
    read: Callable[[list[str], list[str]], Iterable[tuple[Message, Any] | None]],
    warn: Callable[[str], None],
) -> int:
    """Export the captures of `args.files`: one capture merged by packet time, as listed,
    or with `--separate` each file its own. `read(paths, lost)` reads the messages of
    `paths` as one capture (None for each file it could not read, which it names in
    `lost`); the exit status.

    Every message is kept until its tables are written, and neither they nor the tables'
    rows hold cycles: the cycle collector is kept out (`cycle_collection_paused`), which
    would walk them again and again as they pile up (1.5 s of a 100 MB export)."""
    from kdissect.decode.values import cycle_collection_paused

    problem = target_problem(Path(args.export))
    if problem:
        warn(f"--export {args.export}: {problem}")
        return EXIT_USAGE
    with cycle_collection_paused():
        return _export(args, keep, read, warn)


def _export(args: argparse.Namespace, keep: Callable[[Message], bool],
            read: Callable[[list[str], list[str]], Iterable[tuple[Message, Any] | None]],
            warn: Callable[[str], None]) -> int:
    groups = [[path] for path in args.files] if args.separate else [list(args.files)]
    folders: set[str] = set()
    status = EXIT_OK
    left = args.count
    for part, paths in enumerate(groups):
        if left is not None and left <= 0:
            break
        lost: list[str] = []
        messages = _selected(read(paths, lost), keep, left)
        names = [name for name in map(_name, paths) if name not in lost]
        if lost:
            status = EXIT_USAGE
        if not names:
            continue
        target = Path(args.export)
        if len(groups) > 1 and args.format == "csv":
            target = target / _folder(paths[0], folders)
        if not _write(args, messages, names, target, part, warn):
            status = EXIT_USAGE
            continue
        if left is not None:
            left -= len(messages)
    return status


def _selected(found: Iterable[tuple[Message, Any] | None], keep: Callable[[Message], bool],
              limit: int | None) -> list[Message]:
    """The messages `keep` selects, at most `limit` of them (then nothing more is read)."""
    messages: list[Message] = []
    if limit is not None and limit <= 0:
        return messages
    for item in found:
        if item is not None and keep(item[0]):
            messages.append(item[0])
            if limit is not None and len(messages) >= limit:
                break
    return messages


def _name(path: str) -> str:
    """A capture's name in the tables' `file` column and the messages about it."""
    return "standard input" if path == "-" else path


def _folder(path: str, taken: set[str]) -> str:
    """The CSV folder of a capture read with --separate: its file's stem (`stdin` for
    standard input), with -2, -3, ... after a stem already taken (two folders' `cap.pcap`)."""
    stem = "stdin" if path == "-" else Path(path).stem
    folder, suffix = stem, 1
    while folder in taken:
        suffix += 1
        folder = f"{stem}-{suffix}"
    taken.add(folder)
    return folder


def target_problem(target: Path) -> str | None:
    """Why tables cannot be written under `target`, checked before any capture is read."""
    for folder in (target, *target.parents):
        if folder.exists():
            return None if folder.is_dir() else (
                "exists and is not a directory" if folder == target
                else f"{folder} exists and is not a directory")
    return None


def _write(args: argparse.Namespace, messages: list[Message], names: list[str], target: Path,
           part: int, warn: Callable[[str], None]) -> bool:
    """The tables of the capture made of `messages` (read from the files `names`) written
    under `target`, each file written named on stdout; False when they could not be."""
    from kdissect.present.analysis import Capture

    capture = Capture(messages, source=", ".join(names), files=names, jobs=_table_jobs(args, names))
    try:
        if args.format == "parquet":
            files = written_dataset(capture, target, names, part)
        else:
            files = capture.export(target, args.format)
        for written in files:
            print(f"{written}")
    except BrokenPipeError:
        raise  # the listing of files written was cut (`| head`): the command's to handle
    except OSError as exc:
        warn(f"--export {target}: {exc.strerror or exc}")
        return False
    return True


def _table_jobs(args: argparse.Namespace, paths: list[str]) -> int:
    """Worker processes that build the tables (`--jobs`, by default as for reading)."""
    from kdissect.parallel import MAX_JOBS, default_jobs, parallel_readable

    if args.jobs:
        return min(args.jobs, MAX_JOBS)
    return default_jobs(paths) if parallel_readable(paths) else 1


def written_dataset(capture: Any, target: Path, files: list[str], part: int) -> list[Path]:
    """Every table of `capture` into the dataset at `target`, a partition for each of `files`."""
    written = []
    for name, frame in capture.tables().items():
        written.extend(write_partitions(frame, target / name, part, files=files, table=name))
    return written


def capture_name(path: str) -> str:
    """A capture file's partition value: its file name (a path's slashes cannot stand in a
    directory name; the `file` column keeps the whole path)."""
    return os.path.basename(path) or path


def write_partitions(frame: pd.DataFrame, directory: Path, part: int,
                     files: Iterable[str] = (), table: str = "") -> list[Path]:
    """A table's rows into a Hive-partitioned Parquet dataset by capture file:
    `directory/capture=<file name>/part.<part>.parquet`, one per capture file of its rows,
    and an empty one (which keeps the columns) for each of `files` that has none. The
    columns of Python objects of `table` are written as their declared types
    (`parquet_types`), so that every file of a table has one schema."""
    import numpy as np
    import pandas as pd

    from kdissect.present.analysis import exportable

    frame = exportable(frame, text=False)
    column = frame["file"]
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype("category")
    # each file's name made once, then each row's from its code (-1: no file)
    of_code = [capture_name(str(path)) for path in column.cat.categories]
    codes = column.cat.codes.to_numpy()
    present = np.unique(codes[codes >= 0]) if len(codes) else codes
    names = dict.fromkeys([*(of_code[code] for code in present.tolist()), *(capture_name(f) for f in files)])
    written = []
    for name in names:
        folder = directory / f"capture={name}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part.{part}.parquet"
        rows = np.isin(codes, [code for code, found in enumerate(of_code) if found == name])
        write_parquet(frame if rows.all() else frame[rows], path, parquet_types(table))  # one file's rows: no copy
        written.append(path)
    return written
