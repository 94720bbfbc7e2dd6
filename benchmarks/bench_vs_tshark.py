"""kdissect against tshark on the same capture, side by side, in one run.

For each capture (built by make_capture.py unless given), these jobs:

  summary  kdissect FILE            vs  tshark -T fields (frame, Kafka api key, version,
                                        correlation id, request frame: headers and pairing)
  info     kdissect -i FILE         vs  tshark -V   (summary lines with what the bodies say)
  tables   read_pcap(FILE): messages, exchanges and every per-API table, vs tshark -V
  full     kdissect -V FILE         vs  tshark -V   (tshark decodes none of the 75/61/55 bodies)
  jsonl    kdissect -T jsonl FILE   vs  tshark -T json
  columns  kdissect -T fields -e ...  vs  tshark -Y kafka -T fields -e ... (the same five
                                        names: three header fields, topic names, error codes)
  filter   kdissect -Y EXPR FILE    vs  tshark -Y EXPR (a filter on body fields)
  records  kdissect -Y EXPR FILE    vs  tshark -Y EXPR (a filter on record keys and values)
  fields   read_pcap(FILE).fields (one row per tree node) vs tshark -V, for its peak memory

and, in one process, the rate of body decoding against kio's native reader on
the same bodies (decode_rate.py).

Each command runs in its own process with stdout to /dev/null, started by GNU
time (Debian package `time`), which reports its peak resident memory: a child
forked straight from this Python process would inherit this process's own
high-water mark in its rusage. Wall time is measured here. With `--repeat N`
each job runs N times, kdissect and tshark in turn, and the fastest run of each
counts (a virtual machine's speed wanders between runs; the minimum is the run
least disturbed); the `fields` table, measured for its memory, runs once.
Reported: seconds, kdissect's time divided by tshark's (below 1 means kdissect
is faster), Kafka messages per second, peak RSS. Also `read_pcap(...).fields` (the long table of
every tree node, built in Python) against tshark -V.

    python benchmarks/bench_vs_tshark.py                      # builds 100 MB mixed + describe
    python benchmarks/bench_vs_tshark.py --size-mb 10 --mixes mixed
    python benchmarks/bench_vs_tshark.py --capture some.pcap --repeat 3
    python benchmarks/bench_vs_tshark.py --capture some.pcap --only verbose --only jsonl
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bytecode import compile_package  # noqa: E402
from make_capture import build  # noqa: E402

GNU_TIME = "/usr/bin/time"
TSHARK_FIELDS = ["-e", "frame.number", "-e", "kafka.api_key", "-e", "kafka.api_version",
                 "-e", "kafka.correlation_id", "-e", "kafka.request_frame"]
COLUMNS = [x for name in ("frame.number", "kafka.api_key", "kafka.correlation_id", "kafka.topic_name", "kafka.error")
           for x in ("-e", name)]
BODY_FILTER = 'kafka.topic_name == "orders"'
RECORD_FILTER = 'kafka.message_value contains "zzz-not-there" || kafka.message_key == "user-42"'
FIELDS_TABLE = "import sys, kdissect; print(len(kdissect.read_pcap(sys.argv[1], jobs=1).fields))"
API_TABLES = ("import sys, kdissect; from kdissect.present.tables import TABLES; "
              "c = kdissect.read_pcap(sys.argv[1], jobs=1); "
              "print(len(c.messages), len(c.exchanges), *(len(c.table(name)) for name in TABLES))")


@dataclass
class Run:
    seconds: float
    peak_mib: float


def run(command: list[str]) -> Run:
    """Run one command, output discarded; its wall time and peak RSS."""
    with open(os.devnull, "wb") as sink:
        started = time.perf_counter()
        result = subprocess.run([GNU_TIME, "-f", "%M", *command], stdout=sink,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr[-2000:]}")
    return Run(elapsed, int(result.stderr.strip().splitlines()[-1]) / 1024)


def count_messages(kdissect: str, capture: Path) -> int:
    with subprocess.Popen([kdissect, "--jobs", "1", str(capture)], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        return sum(1 for _ in process.stdout)


def jobs(kdissect: str, tshark: str, capture: Path) -> list[tuple[str, str, list[str], list[str]]]:
    """(key for --only, name, kdissect's command, tshark's): one process against one
    process, `--jobs 1` (bench_jobs.py measures more jobs)."""
    path = str(capture)
    one = [kdissect, "--jobs", "1"]
    return [
        ("summary", "summary", [*one, path], [tshark, "-r", path, "-T", "fields", *TSHARK_FIELDS]),
        ("info", "`-i` vs `tshark -V`", [*one, "-i", path], [tshark, "-r", path, "-V"]),
        ("tables", "`read_pcap` + every per-API table vs `tshark -V`",
         [sys.executable, "-c", API_TABLES, path], [tshark, "-r", path, "-V"]),
        ("verbose", "`-V` vs `tshark -V`", [*one, "-V", path], [tshark, "-r", path, "-V"]),
        ("jsonl", "`-T jsonl` vs `tshark -T json`", [*one, "-T", "jsonl", path],
         [tshark, "-r", path, "-T", "json"]),
        ("columns", "`-T fields` vs `tshark -T fields`, five columns", [*one, "-T", "fields", *COLUMNS, path],
         [tshark, "-r", path, "-Y", "kafka", "-T", "fields", *COLUMNS]),
        ("filter", "`-Y` on body fields vs `tshark -Y`", [*one, "-Y", BODY_FILTER, path],
         [tshark, "-r", path, "-Y", BODY_FILTER]),
        ("records", "`-Y` on record keys and values vs `tshark -Y`", [*one, "-Y", RECORD_FILTER, path],
         [tshark, "-r", path, "-Y", RECORD_FILTER]),
        ("fields", MEMORY_JOB, [sys.executable, "-c", FIELDS_TABLE, path], [tshark, "-r", path, "-V"]),
    ]


JOB_KEYS = ("rate", "summary", "info", "tables", "verbose", "jsonl", "columns", "filter", "records", "fields")  # "rate": decode_rate.py


MEMORY_JOB = "`fields` table vs `tshark -V`"  # measured for its peak memory: one run is enough


def fastest(command: list[str], runs: list[Run]) -> Run:
    """Run `command` once more, adding to `runs`; the fastest run so far (peak: the largest)."""
    runs.append(run(command))
    return Run(min(r.seconds for r in runs), max(r.peak_mib for r in runs))


def bench(capture: Path, kdissect: str, tshark: str, repeat: int, only: set[str]) -> list[str]:
    messages = count_messages(kdissect, capture)
    size = capture.stat().st_size / 1e6
    best = "" if repeat == 1 else f", fastest of {repeat} runs each, taken in turn"
    lines = [f"### {capture.name}: {size:.0f} MB, {messages:,} Kafka messages{best}", "",
             "| job | kdissect s | tshark s | kdissect/tshark | kdissect msg/s | kdissect peak MiB | tshark peak MiB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    rate = "(not measured)"
    if "rate" in only:
        rate = subprocess.run([sys.executable, str(HERE / "decode_rate.py"), str(capture)],
                              capture_output=True, text=True, check=True).stdout.strip()
        print(f"body decoding: {rate}", flush=True)
    tshark_runs: dict[tuple[str, ...], list[Run]] = {}
    for key, name, ours, theirs in jobs(kdissect, tshark, capture):
        if key not in only:
            continue
        mine: list[Run] = []
        other = tshark_runs.setdefault(tuple(theirs), [])
        for _ in range(1 if name == MEMORY_JOB else repeat):
            ours_best, theirs_best = fastest(ours, mine), fastest(theirs, other)
        lines.append(f"| {name} | {ours_best.seconds:.2f} | {theirs_best.seconds:.2f} | "
                     f"{ours_best.seconds / theirs_best.seconds:.2f}x | {messages / ours_best.seconds:,.0f} | "
                     f"{ours_best.peak_mib:.0f} | {theirs_best.peak_mib:.0f} |")
        print(lines[-1], flush=True)
    return [*lines, "", f"body decoding (bodies/s, kdissect and kio's native reader): {rate}"]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    banner = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    version = re.search(r"\d+\.\d+\.\d+", banner)
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"TShark {version.group(0) if version else '(unknown version)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", type=Path, action="append", help="benchmark this capture")
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--mixes", nargs="+", default=["mixed", "describe"])
    parser.add_argument("--out", type=Path, default=HERE / "out", help="where built captures go")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each job N times, in turn with tshark, and keep the fastest of each")
    parser.add_argument("--only", action="append", choices=JOB_KEYS, metavar="JOB",
                        help=f"run only this job (repeatable; one of {', '.join(JOB_KEYS)}); default all")
    args = parser.parse_args()
    kdissect, tshark = shutil.which("kdissect"), shutil.which("tshark")
    if not kdissect or not tshark or not os.access(GNU_TIME, os.X_OK):
        sys.exit("needs `kdissect` (pip install -e .), `tshark` and GNU time (apt install time)")
    compile_package()  # as an installed package has it: no timed run compiles from source
    captures = args.capture or []
    if not captures:
        args.out.mkdir(parents=True, exist_ok=True)
        for mix in args.mixes:
            path = args.out / f"{mix}-{args.size_mb:g}MB.pcap"
            if not path.exists():
                build(path, args.size_mb, mix)
            captures.append(path)
    report = [f"Machine: {machine()}", ""]
    for capture in captures:
        report += [*bench(capture, kdissect, tshark, max(1, args.repeat), set(args.only or JOB_KEYS)), ""]
    print("\n".join(report))


if __name__ == "__main__":
    main()
