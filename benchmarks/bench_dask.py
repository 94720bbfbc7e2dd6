"""kdissect.dask over many captures: one worker against two, on a distributed LocalCluster.

Builds N captures (make_capture.py, real exchanges, `mixed` by default), then times
the job: `kdissect.dask.read_pcaps` over them with every table asked for computed
into pandas, `dask.compute(*tables.values())`, on a LocalCluster of one worker
process and of two, one thread each.

Each cluster is started, and each of its workers has imported kdissect and read a
small capture, before the clock starts: a cluster serves more than one job, and a
cold worker would pay its imports inside the first one (paid once in a row with
one worker, side by side with two). The two arms alternate, `--repeats` times
each, and the fastest run of each is compared, so that a burst of other work on a
shared machine does not land on one arm only.

Reported per arm: wall seconds, the merge (from the end of the last task that reads
a capture or makes its tables to the pandas frames in hand: the partitions
concatenated and gathered to the client), per-worker throughput (MB of capture per second of the rest), which is
what a scaling model needs:

    time(N machines) ~ partitions / (N * per-worker throughput) + merge

and the CPU seconds of the busiest worker and of the client process (which runs the
scheduler too), and the cores the job kept busy (all its CPU seconds over its wall
seconds). Two workers that keep fewer than about 1.8 cores busy were short of CPU:
on a machine shared with other work (where the kernel shares CPU between sessions,
sched_autogroup, two workers of one session get no more than one would) the speed-up
measured is the machine's, not kdissect's.

    python benchmarks/bench_dask.py --files 8 --size-mb 12.5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from make_capture import build  # noqa: E402

TABLES = ("messages", "exchanges", "topic_partitions", "producers", "quorum", "quorum_replicas",
          "quorum_nodes")

# what key_split gives of the keys of a capture's read and of the tasks that make its
# tables (kdissect.dask): the merge starts once the last of them is done
READ = "ReadCapture"
MAKE = frozenset({READ, "generic_table", "api_tables"})


class Run(NamedTuple):
    seconds: float  # the whole job, wall
    merge: float  # from the end of the last table made to the frames in the client, wall
    worker_cpu: float  # CPU seconds of the busiest worker process
    workers_cpu: float  # CPU seconds of all worker processes
    client_cpu: float  # CPU seconds of this process (client and scheduler)
    rows: int


def warm(path: str) -> None:
    """On a worker: kdissect imported, kdissect.dask with it (and so dask.dataframe), and
    a small capture read for the benchmark's tables."""
    import kdissect.dask

    capture = kdissect.read_pcap(path, jobs=1)
    for name in TABLES:
        capture.table(name)


def compute_on(workers: int, paths: list[str], small: str) -> Run:
    import dask
    from dask.utils import key_split
    from distributed import Client, LocalCluster

    import kdissect.dask

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(warm, small)
        client.get_task_stream()  # starts the scheduler's record of tasks, read below
        worker_cpu = client.run(time.process_time)
        client_cpu = time.process_time()
        started_at, started = time.time(), time.perf_counter()
        tables = kdissect.dask.read_pcaps(paths, tables=TABLES)
        frames = dask.compute(*tables.values())
        seconds = time.perf_counter() - started
        finished_at = time.time()
        client_cpu = time.process_time() - client_cpu
        spent = [cpu - worker_cpu[worker] for worker, cpu in client.run(time.process_time).items()]
        stream = client.get_task_stream(start=started_at)
        reads = [task for task in stream if key_split(task["key"]) == READ]
        made = [step["stop"] for task in stream if key_split(task["key"]) in MAKE
                for step in task["startstops"] if step["action"] == "compute"]
    if len(reads) != len(paths):
        raise SystemExit(f"{len(reads)} reads recorded for {len(paths)} captures")
    return Run(seconds, finished_at - max(made), max(spent), sum(spent), client_cpu,
               sum(len(frame) for frame in frames))


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--size-mb", type=float, default=12.5, help="per file (8 x 12.5 MB = 100 MB)")
    parser.add_argument("--mix", default="mixed")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each arm, alternating")
    args = parser.parse_args()
    runs: dict[int, list[Run]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index in range(args.files):
            path = Path(folder) / f"capture-{index}.pcap"
            build(path, args.size_mb, args.mix)
            paths.append(str(path))
        small = Path(folder) / "warm.pcap"
        build(small, 0.2, args.mix)
        total_mb = sum(Path(p).stat().st_size for p in paths) / 1e6
        before = load()
        for _ in range(args.repeats):
            for workers in runs:
                runs[workers].append(compute_on(workers, paths, str(small)))
    rows = {run.rows for arm in runs.values() for run in arm}
    if len(rows) != 1:
        raise SystemExit(f"the runs disagree on the rows: {sorted(rows)}")
    print(f"{args.files} captures, {total_mb:.1f} MB, {rows.pop()} table rows ({', '.join(TABLES)}); "
          f"load average before: {before}, after: {load()}")
    print(f"fastest of {args.repeats} runs of each arm, alternating (every run's seconds in brackets):")
    print("| workers | seconds | MB/s per worker | merge s | busiest worker CPU s | client CPU s "
          "| cores busy |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    best = {}
    for workers, arm in runs.items():
        run = best[workers] = min(arm)
        print(f"| {workers} | {run.seconds:.2f} ({', '.join(f'{r.seconds:.2f}' for r in arm)}) "
              f"| {total_mb / (run.seconds - run.merge) / workers:.2f} | {run.merge:.2f} "
              f"| {run.worker_cpu:.2f} | {run.client_cpu:.2f} "
              f"| {(run.workers_cpu + run.client_cpu) / run.seconds:.2f} |")
    print(f"speed-up with two workers: {best[1].seconds / best[2].seconds:.2f}x")


if __name__ == "__main__":
    main()
