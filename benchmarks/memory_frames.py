"""Peak memory of `read_frames` over a 10 MB and a 100 MB capture: it must stay flat.

Each size runs in a fresh child process (so one run's allocations cannot hide the
other's) and reports the peak of Python allocations seen by tracemalloc during the
run, the process's maximum resident set size, and the throughput. The captures are
made by make_capture.py (the mixed traffic mix) in a temporary folder.

    python benchmarks/memory_frames.py [--sizes 10 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_capture import build  # noqa: E402


def measure(path: Path, trace: bool) -> dict[str, float]:
    """Run read_frames over `path` once, in this process."""
    from kdissect.pipeline import read_frames

    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    frames = packets = 0
    for frame in read_frames(path):
        frames += 1
        packets = frame.last_packet
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    return {
        "megabytes": path.stat().st_size / 1e6,
        "frames": frames,
        "packets": packets,
        "seconds": elapsed,
        "traced_peak_mib": peak / 2**20,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(path: Path, trace: bool) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(path)] + (["--trace"] if trace else [])
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100], help="capture sizes in MB")
    parser.add_argument("--keep", type=Path, help="write the captures here and keep them")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.trace)))
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="kdissect-memory-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{'MB':>6} {'packets':>9} {'frames':>9} {'traced peak':>12} {'max RSS':>9} "
          f"{'seconds':>8} {'packets/s':>10} {'MB/s':>6}")
    for size in args.sizes:
        path = folder / f"mixed-{size}MB.pcap"
        if not path.exists():
            build(path, size, "mixed")
        traced = child(path, trace=True)
        plain = child(path, trace=False)  # speed and RSS without tracemalloc's overhead
        print(f"{traced['megabytes']:6.1f} {traced['packets']:9d} {traced['frames']:9d} "
              f"{traced['traced_peak_mib']:9.2f} MiB {plain['max_rss_mib']:5.1f} MiB "
              f"{plain['seconds']:8.2f} {plain['packets'] / plain['seconds']:10,.0f} "
              f"{plain['megabytes'] / plain['seconds']:6.1f}")
        if not args.keep:
            path.unlink()


if __name__ == "__main__":
    main()
