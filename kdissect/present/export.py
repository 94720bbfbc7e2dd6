"""`kdissect --export DIR`: the analysis tables of each capture as Parquet or CSV.

The messages exported are those the listing would show: `--api`, `-Y` and `-c`
apply (a count over all the files, as for the listing).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.notes import Note
from kdissect.pair.message import Message

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
        if several:
            target = target / (Path(path).stem if path != "-" else f"stdin{index}")
        written = _export_one(args, path, target, keep, left, open_capture, warn)
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
                warn: Callable[[str], None]) -> int | None:
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
    capture = Capture(messages, source=path, problems=problems)
    try:
        for written in capture.export(target, args.format):
            print(f"{written}")
    except OSError as exc:
        warn(f"--export {target}: {exc.strerror or exc}")
        return None
    return len(messages)
