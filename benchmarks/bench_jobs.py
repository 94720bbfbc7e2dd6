"""`--jobs 2` against `--jobs 1`: `-V`, and the tables, on one large capture.

Builds a capture (make_capture.py, real exchanges over 64 connections, `mixed` by
default), then times, each in a fresh process and best of `--repeat`:

  -V         `kdissect -V FILE > /dev/null` with --jobs 1 and --jobs 2
  tables     `read_pcap(FILE, jobs=N)` and every per-API table
  all        `read_pcap(FILE, jobs=N)` and every table (fields, records, ... too)
  tshark     `tshark -V` on the same file, for scale (when tshark is installed)

and prints a Markdown table with the wall-time speed-up, the load average before and
after (the machine's other work counts: report it with the figures), and the CPU
seconds of every process (KDISSECT_JOBS_CPU=1 makes --jobs report its workers'): for
-V one phase (parent, workers), for the tables three, separated by `;`: the start-up
before any worker starts (Python and the imports); reading; building the tables (the
reading workers make the per-API tables once their share is read, and the parent's
seconds are what it takes to renumber and merge their parts; with several jobs,
`read_pcap` makes its messages only when something else needs them: `all` pays for
that). From these comes the speed-up on idle cores, which a loaded machine's wall
times cannot show (`idle_time`: the start-up as it is; reading, the busiest worker or
all the phase's CPU seconds spread over the cores, whichever is longer; building
tables, the parent's seconds plus the busiest worker's), against the CPU seconds of
one job.

The runs with one job and with several take turns (one, several, one, ...), so that a
machine that slows down or speeds up meanwhile weighs on both alike. Last come `--jobs`
copies of the one-job run started together, each doing all the work: what the machine
itself gives N processes that share nothing. On N cores that do not slow each other
down they take as long as one run alone, and N x (one alone) / (N together), the last
column, is N: the speed-up N jobs could reach if splitting the work cost nothing. Below
N, the cores slow each other down (memory, caches, a host shared with others); above N,
the machine was faster during those runs than during the one-job runs, and the figures
of the row move with it.

After the table come every run's wall seconds, and the median of the speed-ups of the
runs taken in turn: on a machine shared with others, whose speed moves by a fifth from
one minute to the next, the fastest of each command may come from different minutes,
and the spread says how far to trust the row.

    python benchmarks/bench_jobs.py --size-mb 100
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from bytecode import compile_package  # noqa: E402
from make_capture import build  # noqa: E402

TABLES_SCRIPT = """
import contextlib, io, re, sys, time
from kdissect import read_pcap
from kdissect.present import parallel_tables
from kdissect.present.tables import TABLES

def main():
    started = time.process_time()  # Python and the imports: before any worker starts
    said = io.StringIO()
    with contextlib.redirect_stderr(said):  # the reading workers' CPU seconds (KDISSECT_JOBS_CPU)
        capture = read_pcap(sys.argv[1], jobs=int(sys.argv[2]))
    read = time.process_time()
    names = capture.table_names() if sys.argv[3] == "all" else list(TABLES)
    rows = sum(len(capture.table(name)) for name in names)
    print(len(capture), rows)
    found = re.search(r"workers ([\\d., ]+)", said.getvalue())
    if found:
        print("CPU seconds: startup %.2f" % started, file=sys.stderr)
        print("CPU seconds: parent %.2f, workers %s" % (read - started, found.group(1)), file=sys.stderr)
    tables = list(parallel_tables.WORKER_CPU.values())
    if tables:
        print("CPU seconds: parent %.2f, workers %s" % (
            time.process_time() - read, ", ".join("%.2f" % w for w in tables)), file=sys.stderr)

if __name__ == "__main__":
    main()
"""


CPU_LINE = re.compile(r"CPU seconds: (?:startup ([\d.]+)|parent ([\d.]+), workers ([\d., ]+))")
Phases = list[list[float]]  # per phase: the parent's CPU seconds, then each worker's


def timed(command: list[str]) -> tuple[float, str, Phases]:
    """Wall seconds, what the command printed, and the CPU seconds of its processes: the
    process itself (and what it waited for), or with --jobs, for each phase of the run
    (reading; building tables), the parent's and each worker's."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run(command, stdout=subprocess.PIPE if "-c" in command[:3] else subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=False, cwd=ROOT,
                         env={**os.environ, "KDISSECT_JOBS_CPU": "1"})
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {run.stderr.strip()}")
    phases = [[float(found.group(1))] if found.group(1) else
              [float(found.group(2)), *(float(w) for w in found.group(3).split(","))]
              for found in CPU_LINE.finditer(run.stderr)]
    if not phases:
        phases = [[after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime]]
    return seconds, (run.stdout or "").strip().splitlines()[0] if run.stdout else "", phases


def best(results: list[tuple[float, str, Phases]]) -> tuple[float, str, Phases]:
    fastest = min(results, key=lambda result: result[0])
    return fastest[0], results[0][1], fastest[2]


def in_turns(one: list[str], many: list[str], repeat: int,
             ) -> tuple[tuple[float, str, Phases], tuple[float, str, Phases], list[list[float]]]:
    """The fastest of `repeat` runs of each command, the two taking turns; and the wall
    seconds of every run of each, in the order they ran."""
    runs: list[list[tuple[float, str, Phases]]] = [[], []]
    for _ in range(repeat):
        for results, command in zip(runs, (one, many), strict=True):
            results.append(timed(command))
    return best(runs[0]), best(runs[1]), [[result[0] for result in results] for results in runs]


def spread(label: str, walls: list[list[float]], jobs: int) -> str:
    """Every run's wall seconds, and the median of the speed-ups of the runs taken in turn
    (run i of one job against run i of several, made one after the other): a machine that
    changes speed between the pairs moves each of them less than it moves the fastest."""
    ones, manys = walls
    ratios = sorted(one / many for one, many in zip(ones, manys, strict=True))
    return (f"{label}: --jobs 1 {' '.join(f'{w:.2f}' for w in ones)} s; --jobs {jobs} "
            f"{' '.join(f'{w:.2f}' for w in manys)} s; run by run {' '.join(f'{r:.2f}x' for r in ratios)}, "
            f"median {statistics.median(ratios):.2f}x")


def together(command: list[str], copies: int, repeat: int) -> float:
    """Wall seconds for `copies` runs of `command` started at once (the fastest of `repeat`)."""
    fastest = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        runs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
                for _ in range(copies)]
        for run in runs:
            _out, problem = run.communicate()
            if run.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed: {problem.decode(errors='replace').strip()}")
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


def idle_time(phases: Phases, cores: int) -> float:
    """The wall time these CPU seconds need on `cores` otherwise idle cores, phase after
    phase. Reading (the first phase of several processes): the parent merges, numbers,
    pairs and writes while the workers read, so the busiest worker, or all the phase's
    CPU seconds spread evenly over the cores, whichever is longer. Building tables (a
    later phase): the parent sends and gathers before and after the workers build, so
    its seconds add to the busiest worker's. A phase of one process (the start-up, before
    any worker: Python and the imports) is its own CPU seconds."""
    total = 0.0
    reading = True
    for parent, *workers in phases:
        if not workers:
            total += parent
        elif reading:
            total += max(max(workers), (parent + sum(workers)) / cores)
            reading = False
        else:
            total += parent + max(workers)
    return total


def kdissect(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "kdissect", *arguments]


def tables(path: Path, jobs: int, which: str) -> list[str]:
    return [sys.executable, "-c", TABLES_SCRIPT, str(path), str(jobs), which]


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--mix", default="mixed")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--skip", action="append", default=[], choices=("-V", "tables", "all", "tshark"),
                        help="leave out a measurement (repeatable)")
    parser.add_argument("--capture", type=Path, help="use this capture instead of building one")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="leave out the --jobs copies of the one-job run started together")
    args = parser.parse_args()
    compile_package()  # as an installed package has it: no timed run compiles from source
    with tempfile.TemporaryDirectory() as folder:
        path = args.capture or Path(folder) / "bench.pcap"
        if args.capture is None:
            build(path, args.size_mb, args.mix)
        megabytes = path.stat().st_size / 1e6
        print(f"capture: {megabytes:.1f} MB ({args.mix}), cores: {os.cpu_count()}, load before: {load()}")
        print(f"| what | --jobs 1 s | --jobs {args.jobs} s | speed-up | CPU s, one job | "
              f"CPU s, {args.jobs} jobs (parent, workers) | speed-up on idle cores | "
              f"{args.jobs} one-job runs at once s | {args.jobs} x one alone / at once |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        cores = os.cpu_count() or 1
        runs = {
            "-V": lambda jobs: kdissect("-V", "--jobs", str(jobs), str(path)),
            "tables": lambda jobs: tables(path, jobs, "per-api"),
            "all": lambda jobs: tables(path, jobs, "all"),
        }
        spreads: list[str] = []
        for name, command in runs.items():
            if name in args.skip:
                continue
            (one, found, cpu_one), (many, again, cpu_many), walls = in_turns(command(1), command(args.jobs),
                                                                              args.repeat)
            if found != again:
                raise SystemExit(f"{name}: {found!r} with one job, {again!r} with {args.jobs}")
            label = {"-V": "kdissect -V", "tables": "read_pcap + per-API tables",
                     "all": "read_pcap + every table"}[name]
            if any(len(phase) > 1 for phase in cpu_many):  # the workers said what they used
                spent = "; ".join(", ".join(f"{c:.2f}" for c in phase) for phase in cpu_many)
                bound = f"{idle_time(cpu_one, cores) / idle_time(cpu_many, cores):.2f}x"
            else:
                spent, bound = "", ""
            if args.no_ceiling:
                at_once, ceiling = "", ""
            else:
                seconds = together(command(1), args.jobs, args.repeat)
                at_once, ceiling = f"{seconds:.2f}", f"{args.jobs * one / seconds:.2f}x"
            print(f"| {label} | {one:.2f} | {many:.2f} | {one / many:.2f}x | {sum(map(sum, cpu_one)):.2f} "
                  f"| {spent} | {bound} | {at_once} | {ceiling} |", flush=True)
            spreads.append(spread(label, walls, args.jobs))
        if "tshark" not in args.skip and shutil.which("tshark"):
            seconds, _, cpu = timed(["tshark", "-r", str(path), "-V", "-d", "tcp.port==9092,kafka"])
            print(f"| tshark -V (one process) | {seconds:.2f} | | | {sum(map(sum, cpu)):.2f} | | | | |")
        print(f"load after: {load()}")
        if spreads:
            print("every run, in the order run (wall seconds):")
            for line in spreads:
                print(f"- {line}")


if __name__ == "__main__":
    main()
