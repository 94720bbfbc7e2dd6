"""`kdissect --export DIR`: the analysis tables of each capture as Parquet or CSV.

The messages exported are those the listing would show: `--api`, `-Y` and `-c`
apply (a count over all the files, as for the listing). Each file is read as a
capture of its own.

Parquet is one dataset, partitioned by table and capture file in Hive's layout,
the same as `kdissect.dask.to_parquet` writes (`write_partitions` does both):

    DIR/messages/capture=broker1.pcap/part.0.parquet

which DuckDB reads directly (`read_parquet('DIR/messages/*/*.parquet',
hive_partitioning=true)`), as do Spark and Polars. CSV is one file per table
(`DIR/messages.csv`; `DIR/<file stem>/messages.csv` for several files).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.notes import Note
from kdissect.pair.message import Message

if TYPE_CHECKING:
    import pandas as pd

EXIT_OK, EXIT_USAGE = 0, 2
MAX_CAPTURE_NOTES = 20


def export_files(
    args: argparse.Namespace,
    keep: Callable[[Message], bool],
    open_capture: Callable[[str], BinaryIO | None],
    warn: Callable[[str], None],
) -> int:
    problem = target_problem(Path(args.export))
    if problem:
        warn(f"--export {args.export}: {problem}")
        return EXIT_USAGE
    status = EXIT_OK
    several = len(args.files) > 1
    left = args.count
    for index, path in enumerate(args.files):
        if left is not None and left <= 0:
            break
        target = Path(args.export)
        if several and args.format == "csv":
            target = target / (Path(path).stem if path != "-" else f"stdin{index}")
        written = _export_one(args, path, target, keep, left, open_capture, warn, index)
        if written is None:
            status = EXIT_USAGE
            continue
        if left is not None:
            left -= written
    return status


def target_problem(target: Path) -> str | None:
    """Why tables cannot be written under `target`, checked before any capture is read."""
    for folder in (target, *target.parents):
        if folder.exists():
            return None if folder.is_dir() else (
                "exists and is not a directory" if folder == target
                else f"{folder} exists and is not a directory")
    return None


def _export_one(args: argparse.Namespace, path: str, target: Path, keep: Callable[[Message], bool],
                limit: int | None, open_capture: Callable[[str], BinaryIO | None],
                warn: Callable[[str], None], index: int) -> int | None:
    """Export one capture; the number of messages written, None when it failed."""
    from kdissect.pipeline import read_messages
    from kdissect.present.analysis import Capture

    stream = open_capture(path)
    if stream is None:
        return None
    problems: list[Note] = []
    try:
        found = (m for m in read_messages(stream, ports=[*DEFAULT_PORTS, *args.port],
                                          detect=not args.no_detect,
                                          max_frame_size=args.max_frame_size,
                                          report=problems.append, tls_keylog=args.tls_keylog,
                                          show_secrets=args.show_secrets) if keep(m))
        messages = list(itertools.islice(found, limit))
    except CaptureError as exc:
        warn(f"{path}: {exc}")
        return None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    for note in problems[:MAX_CAPTURE_NOTES]:
        warn(f"{path}: {note}")
    capture = Capture(messages, source=path, problems=problems, jobs=_table_jobs(args, path))
    try:
        if args.format == "parquet":
            name = "standard input" if path == "-" else path
            files = written_dataset(capture, target, name, index)
        else:
            files = capture.export(target, args.format)
        for written in files:
            print(f"{written}")
    except BrokenPipeError:
        raise  # the listing of files written was cut (`| head`): the command's to handle
    except OSError as exc:
        warn(f"--export {target}: {exc.strerror or exc}")
        return None
    return len(messages)


def _table_jobs(args: argparse.Namespace, path: str) -> int:
    """Worker processes that build the tables (`--jobs`, by default as for reading)."""
    from kdissect.parallel import MAX_JOBS, default_jobs, parallel_readable

    if args.jobs:
        return min(args.jobs, MAX_JOBS)
    return default_jobs([path]) if parallel_readable([path]) else 1


def written_dataset(capture: Any, target: Path, file: str, part: int) -> list[Path]:
    """Every table of `capture` into the dataset at `target`, one partition for `file`."""
    written = []
    for name, frame in capture.tables().items():
        written.extend(write_partitions(frame, target / name, part, files=[file]))
    return written


def capture_name(path: str) -> str:
    """A capture file's partition value: its file name (a path's slashes cannot stand in a
    directory name; the `file` column keeps the whole path)."""
    return os.path.basename(path) or path


def write_partitions(frame: pd.DataFrame, directory: Path, part: int,
                     files: Iterable[str] = ()) -> list[Path]:
    """A table's rows into a Hive-partitioned Parquet dataset by capture file:
    `directory/capture=<file name>/part.<part>.parquet`, one per capture file of its rows,
    and an empty one (which keeps the columns) for each of `files` that has none."""
    from kdissect.present.analysis import exportable

    frame = exportable(frame, text=False)
    captures = frame["file"].astype(object).map(lambda f: capture_name(str(f)), na_action="ignore")
    names = dict.fromkeys([*captures.dropna().unique(), *(capture_name(f) for f in files)])
    written = []
    for name in names:
        folder = directory / f"capture={name}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part.{part}.parquet"
        frame[(captures == name).to_numpy(dtype=bool)].to_parquet(path, index=False)
        written.append(path)
    return written
