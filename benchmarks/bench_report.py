"""Time `kdissect report` against the summary and the decoding the report needs.

    python benchmarks/bench_report.py capture.pcap

Three jobs, each a fresh process, timed by CPU seconds (user + system, so a busy
shared machine does not distort the comparison) and wall seconds:

  summary   `kdissect F > /dev/null`: headers and pairing only
  decoding  what the report cannot do without: read the capture, build the
            quorum, producers and partitions tables, decode every message's tree once
  report    `kdissect report F -o out.html`

The report's budget is twice the summary plus the decoding.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_package

DECODE = """
import sys, kdissect
capture = kdissect.read_pcap(sys.argv[1])
for name in ("quorum", "quorum_replicas", "producers", "topic_partitions"):
    getattr(capture, name)
for message in capture.message_list:
    message.tree(keep=False)
"""


def timed(command: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("capture", type=Path)
    args = parser.parse_args()
    compile_package()  # as an installed package has it: no timed run compiles from source
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "report.html")
        jobs = {
            "summary": [python, "-m", "kdissect", str(args.capture)],
            "decoding": [python, "-c", DECODE, str(args.capture)],
            "report": [python, "-m", "kdissect", "report", str(args.capture), "-o", out],
        }
        results = {name: timed(command) for name, command in jobs.items()}
        size = os.path.getsize(out)
    for name, (cpu, wall) in results.items():
        print(f"{name:<9} {cpu:8.2f} s CPU {wall:8.2f} s wall")
    budget = 2 * results["summary"][0] + results["decoding"][0]
    print(f"budget    {budget:8.2f} s CPU (2 x summary + decoding); report "
          f"{results['report'][0] / budget:.2f} of it; page {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
