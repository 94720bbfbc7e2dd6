"""`kdissect --export DIR`: the analysis tables of each capture as Parquet or CSV."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kdissect.ingest.capture import CaptureError

EXIT_OK, EXIT_USAGE = 0, 2


def export_files(
    args: argparse.Namespace,
    open_capture: Callable[[str], BinaryIO | None],
    warn: Callable[[str], None],
) -> int:
    from kdissect.present.analysis import read_pcap

    status = EXIT_OK
    several = len(args.files) > 1
    for index, path in enumerate(args.files):
        stream = open_capture(path)
        if stream is None:
            status = EXIT_USAGE
            continue
        try:
            capture = read_pcap(stream, ports=args.port, apis=args.api, detect=not args.no_detect,
                                tls_keylog=args.tls_keylog, show_secrets=args.show_secrets)
        except CaptureError as exc:
            warn(f"{path}: {exc}")
            status = EXIT_USAGE
            continue
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        for note in capture.problems[:20]:
            warn(f"{path}: {note}")
        target = Path(args.export)
        if several:
            target = target / (Path(path).stem if path != "-" else f"stdin{index}")
        for written in capture.export(target, args.format):
            print(f"{written}")
    return status
