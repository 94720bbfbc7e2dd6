"""kdissect.dask over many captures: one worker against two, on a distributed LocalCluster.

Builds N captures (make_capture.py, real exchanges, `mixed` by default), then
computes the same tables with `kdissect.dask.read_pcaps` on a LocalCluster of one
worker process and of two, one thread each, and reports wall times, the speed-up,
per-worker throughput (MB of capture per second) and the cost of merging the
partitions back into one pandas frame, which is what a scaling model needs:

    time(N machines) ~ partitions / (N * per-worker throughput) + merge

    python benchmarks/bench_dask.py --files 8 --size-mb 12.5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from make_capture import build  # noqa: E402

TABLES = ("messages", "exchanges", "topic_partitions", "producers", "quorum", "quorum_replicas",
          "quorum_nodes")


def compute_on(workers: int, paths: list[str]) -> tuple[float, float, int]:
    """(wall seconds for the whole job, seconds of the final merge, rows) on `workers`."""
    import dask
    from distributed import Client, LocalCluster

    import kdissect.dask

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        tables = kdissect.dask.read_pcaps(paths, tables=TABLES)
        started = time.perf_counter()
        persisted = dask.persist(*tables.values())  # every partition computed on the workers
        dask.compute(*(frame.map_partitions(len) for frame in persisted))
        computed = time.perf_counter()
        frames = dask.compute(*persisted)  # gathered and concatenated here: the merge
        finished = time.perf_counter()
    return finished - started, finished - computed, sum(len(frame) for frame in frames)


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--size-mb", type=float, default=12.5, help="per file (8 x 12.5 MB = 100 MB)")
    parser.add_argument("--mix", default="mixed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index in range(args.files):
            path = Path(folder) / f"capture-{index}.pcap"
            build(path, args.size_mb, args.mix)
            paths.append(str(path))
        total_mb = sum(Path(p).stat().st_size for p in paths) / 1e6
        before = load()
        results = {workers: compute_on(workers, paths) for workers in (1, 2)}
    (one, _, rows), (two, _, rows_two) = results[1], results[2]
    if rows != rows_two:
        raise SystemExit(f"{rows} rows with one worker, {rows_two} with two")
    print(f"{args.files} captures, {total_mb:.1f} MB, {rows} table rows ({', '.join(TABLES)}); "
          f"load average before: {before}, after: {load()}")
    print("| workers | seconds | MB/s per worker | merge s |")
    print("|---:|---:|---:|---:|")
    for workers, (seconds, merge, _) in results.items():
        print(f"| {workers} | {seconds:.2f} | {total_mb / (seconds - merge) / workers:.2f} "
              f"| {merge:.2f} |")
    print(f"speed-up with two workers: {one / two:.2f}x")


if __name__ == "__main__":
    main()
