"""`--jobs N` and `read_pcap(..., jobs=N)`: worker processes, the same bytes and tables as one.

Every shipped and third-party capture is read with one job and with two: text (summary,
-i, -V, -x), JSON and every table must be equal. A capture of 64 interleaved connections,
and a lossy copy of it (holes, lost SYNs and FINs, so connections linger and close on
capture time), stress what ties connections together.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.make_capture import build
from kdissect import parallel
from kdissect.cli import main
from kdissect.ingest.capture import CaptureError
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present import parallel_tables
from kdissect.present.analysis import read_pcap
from tests.conftest import CAPTURES, PUBLIC_CAPTURES, missing

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(CAPTURES.glob("*.pcap"))
PORTS = ("--port", "36333", "--port", "19092")


@pytest.fixture(scope="module")
def every_capture() -> list[str]:
    if not PUBLIC_CAPTURES.is_dir():
        missing(f"third-party captures not found at {PUBLIC_CAPTURES}")
    public = sorted(p for p in PUBLIC_CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    return [str(p) for p in (*SHIPPED, *public)]


@pytest.fixture(scope="module")
def lossy(many: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """`many` with every 29th packet lost: holes, connections without SYN or FIN."""
    out = tmp_path_factory.mktemp("jobs") / "lossy.pcap"
    out.write_bytes(drop_packets(Path(many).read_bytes(), every=29))
    return str(out)


def drop_packets(data: bytes, every: int) -> bytes:
    """A classic pcap without every `every`-th packet."""
    kept, offset, index = [data[:24]], 24, 0
    while offset + 16 <= len(data):
        length = struct.unpack_from("<I", data, offset + 8)[0]
        index += 1
        if index % every:
            kept.append(data[offset:offset + 16 + length])
        offset += 16 + length
    return b"".join(kept)


def run(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    status = main([*arguments])
    out, err = capsys.readouterr()
    return status, out, err


def same_output(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    one = run(capsys, "--jobs", "1", *arguments)
    two = run(capsys, "--jobs", "2", *arguments)
    assert two == one
    assert one[1]
    return one[1]


@pytest.mark.parametrize("options", [
    ("-V", "-x"),
    ("-T", "json"),
    ("-i", "-t", "d", "--frames", "--show-file"),
    ("-i", "-V", "--frames", "--show-file"),
    ("-T", "fields", "-e", "number", "-e", "stream", "-e", "pair", "-e", "frame.time_relative", "-e", "src",
     "-e", "kafka.topic_name", "-e", "latency_ms", "-E", "header=y"),
], ids=" ".join)
def test_two_jobs_write_the_same_bytes_for_every_capture_read_as_one(
        capsys: pytest.CaptureFixture[str], every_capture: list[str], options: tuple[str, ...]) -> None:
    same_output(capsys, *PORTS, *options, *every_capture)


@pytest.mark.parametrize("options", [("-V",), ("-T", "jsonl", "-t", "a"), ("-i", "--show-file")], ids=" ".join)
def test_two_jobs_write_the_same_bytes_for_each_capture_on_its_own(
        capsys: pytest.CaptureFixture[str], every_capture: list[str], options: tuple[str, ...]) -> None:
    out = same_output(capsys, *PORTS, "--separate", *options, *every_capture)
    if options[0] == "-V":  # numbering restarts with each capture: each was read on its own
        assert sum(line.startswith("     1 ") for line in out.splitlines()) > len(SHIPPED)


@pytest.mark.parametrize("options", [("-V",), ("-T", "json")], ids=" ".join)
def test_many_connections_give_the_same_bytes(capsys: pytest.CaptureFixture[str], many: str,
                                              lossy: str, options: tuple[str, ...]) -> None:
    for capture in (many, lossy):
        same_output(capsys, *options, capture)
    same_output(capsys, "--stats", "-T", "json", lossy)


def test_the_workers_change_marks_name_messages_by_the_captures_numbers(
        capsys: pytest.CaptureFixture[str], many: str, lossy: str) -> None:
    """-i's change marks are made where each connection's messages are, and name the
    previous response by the worker's number: the merge makes it the capture's. The
    fuzz-found captures add bodies whose notes end the summary line."""
    for capture in sorted(str(p) for p in (Path(__file__).parent / "fuzz_regressions").glob("*.pcap")):
        assert run(capsys, "--jobs", "2", "-i", capture) == run(capsys, "--jobs", "1", "-i", capture)
    same_output(capsys, "-i", "-V", lossy)
    out = same_output(capsys, "-i", many)
    marks = [line for line in out.splitlines() if " changed since #" in line]
    assert len(marks) >= 10
    # each names an earlier response of its connection, by the capture's number
    number_of = {int(line.split()[0]): line for line in out.splitlines()}
    for line in marks:
        named = int(line.split(" changed since #")[1].split(":")[0])
        assert named < int(line.split()[0]) and "Response" in number_of[named]
        assert number_of[named].split()[2:5] == line.split()[2:5]  # the same connection


@pytest.mark.parametrize("options", [
    ("--stats",),
    ("--stats", "--interval", "0.5s", "--top", "7", "-T", "json"),
    ("--interval", "100ms", "-c", "500"),
    ("--top", "9"),
    ("--top", "1", "-T", "json"),
], ids=" ".join)
def test_statistics_are_counted_from_what_the_workers_read(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, every_capture: list[str],
        many: str, lossy: str, options: tuple[str, ...]) -> None:
    """--stats and --interval: the workers decode the bodies and send what the statistics
    count of each message; the merge counts light messages, never a whole one. --top alone:
    the workers send only the answers that may be among the slowest, their errors decoded."""
    from kdissect.present.stats import Statistics

    one = [run(capsys, "--jobs", "1", *options, *paths) for paths in (every_capture, [many], [lossy])]

    def whole(_self: Statistics, message: object) -> None:
        raise AssertionError(f"a whole message counted in the merge: {message}")

    monkeypatch.setattr(Statistics, "add", whole)
    two = [run(capsys, "--jobs", "2", *options, *paths) for paths in (every_capture, [many], [lossy])]
    assert two == one
    assert "--stats" not in options or ("Produce" in one[1][1] and "topic" in one[1][1].lower())


def test_fields_rows_are_made_by_the_workers(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           many: str, lossy: str) -> None:
    """-T fields: where every column is one a worker reads as one process does, the workers
    make the rows and the merge only writes them; with the merge's own columns (numbers,
    relative times) beside them, it makes those cells of light messages."""
    from kdissect.present.field_output import FieldColumns

    whole = ["-T", "fields", "-e", "frame.number", "-e", "api_name", "-e", "ErrorCode", "-e", "client_id"]
    mixed = ["-T", "fields", "-e", "number", "-e", "tcp.stream", "-e", "kafka.topic_name", "-e", "time_relative"]
    one = [run(capsys, "--jobs", "1", *options, path) for options in (whole, mixed) for path in (many, lossy)]
    row = FieldColumns.row

    def only_light(columns: FieldColumns, message: object, cells: object = None) -> str:
        assert not isinstance(message, Message) and cells is not None, "a whole message's row made in the merge"
        return row(columns, message, cells)  # type: ignore[arg-type]

    monkeypatch.setattr(FieldColumns, "row", only_light)
    two = [run(capsys, "--jobs", "2", *options, path) for options in (whole, mixed) for path in (many, lossy)]
    assert two == one and all(out for _status, out, _err in one)


def test_notes_of_the_bodies_minus_i_decodes_join_the_merges_in_one_processs_order(
        capsys: pytest.CaptureFixture[str], public_captures: Path) -> None:
    """A body -i decodes may have notes of its own (librdkafka's quirk after an ApiVersions
    v0 request), which its worker writes on the summary line; where the merge adds notes of
    its own (a request shown before any answer), it writes the line's notes again, the
    body's after its own, as one process does."""
    joined = []
    for capture in sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng")):
        out = run(capsys, "--jobs", "2", "-i", str(capture))
        assert out == run(capsys, "--jobs", "1", "-i", str(capture)), capture.name
        joined += [line for line in out[1].splitlines() if "(hold limit); librdkafka's draft" in line]
    assert joined


def test_change_marks_compare_within_each_capture_read_on_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    """--separate: each file its own capture, so -i's marks never compare a response with one
    of another file (a file read twice has twice its marks, no more), with one job or two."""
    path = str(CAPTURES / "incident.pcap")
    alone = same_output(capsys, "-i", path).count(" changed since #")
    assert alone and same_output(capsys, "-i", "--separate", path, path).count(" changed since #") == 2 * alone


def test_a_lossy_capture_still_has_what_ties_connections_together(lossy: str) -> None:
    """The lossy capture is worth testing: it has holes and connections closed on time."""
    problems: list[object] = []
    messages = list(parallel.read_messages([lossy], 2, report=problems.append))
    texts = [str(n) for message, _ in messages for n in message.all_notes()]
    assert any("missing" in text for text in texts)
    assert len({m.frame.connection.index for m, _ in messages}) >= 64
    assert not problems


def test_a_count_filter_and_api_choice_stop_the_workers_early(capsys: pytest.CaptureFixture[str],
                                                              many: str) -> None:
    same_output(capsys, "-c", "7", "-Y", "latency_ms > 0", many)
    same_output(capsys, "--api", "Produce,DescribeQuorum", "-c", "30", many)


def test_standard_input_is_read_in_one_process(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output; asked for two jobs, the command says once why one process reads
    (by default, with no --jobs, it says nothing)."""
    capture = SHIPPED[0].read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(capture)))
    status, out, err = run(capsys, "--jobs", "2", "-")
    assert err == "kdissect: --jobs 2: standard input is read in one process (it cannot be read twice)\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(capture)))
    assert (status, out) == run(capsys, SHIPPED[0].as_posix())[:2]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(capture)))
    assert run(capsys, "-")[1:] == (out, "")
    assert parallel.default_jobs([sys.stdin.buffer]) == 1


def test_a_tls_key_log_is_read_in_one_process_and_said_so(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    keys = tmp_path / "keys.log"
    keys.write_text("CLIENT_RANDOM " + "00" * 32 + " " + "00" * 48 + "\n")
    path = SHIPPED[0].as_posix()
    status, out, err = run(capsys, "--jobs", "2", "--tls-keylog", str(keys), path)
    assert err == ("kdissect: --jobs 2: a capture read with a TLS key log is read in one process "
                   "(TLS 1.2 sessions resume across connections)\n")
    assert (status, out, "") == run(capsys, "--tls-keylog", str(keys), path)


def test_tables_are_equal_with_two_jobs(every_capture: list[str], lossy: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_tables, "PARALLEL_MESSAGES", 1)  # even small tables on workers
    for source in (every_capture, lossy):
        one = read_pcap(source, ports=(36333, 19092), jobs=1)
        two = read_pcap(source, ports=(36333, 19092), jobs=2)
        assert two.jobs == 2 and len(two) == len(one)
        for name in one.table_names():
            pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)


def test_a_table_keeps_the_notes_of_trees_built_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_tables, "PARALLEL_MESSAGES", 1)
    path = str(CAPTURES / "incident.pcap")
    one, two = read_pcap(path, jobs=1), read_pcap(path, jobs=2)
    for capture in (one, two):
        for message in capture.message_list[::5]:
            message.tree()
    pd.testing.assert_frame_equal(two.messages, one.messages)


def test_table_workers_keep_their_messages_and_learn_of_trees_built_meanwhile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_tables, "PARALLEL_MESSAGES", 1)
    path = str(CAPTURES / "incident.pcap")
    # messages made while reading: the reading workers end, table workers make the tables
    one, two = read_pcap(path, jobs=1), read_pcap(path, jobs=2, lazy=False)
    pd.testing.assert_frame_equal(two.exchanges, one.exchanges)
    workers = [process.pid for process in two._workers.processes]
    assert len(workers) == 2
    for capture in (one, two):  # after the workers were sent the messages
        for message in capture.message_list[::3]:
            message.tree()
    pd.testing.assert_frame_equal(two.messages, one.messages)
    assert [process.pid for process in two._workers.processes] == workers
    assert two._workers.messages is two.message_list


def test_runs_are_consecutive_and_cover_every_message_once() -> None:
    messages = read_pcap(str(CAPTURES / "incident.pcap"), jobs=1).message_list
    for count in (1, 2, 4, 7, len(messages), len(messages) + 5):
        runs = parallel_tables._runs(messages, count)
        assert [m for run in runs for m in run] == messages
        assert len(runs) <= count and all(runs)


def test_workers_decode_with_the_definitions_the_command_was_given(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kdissect.decode.schema import configure_definitions

    own = Path(parallel.__file__).parent / "decode" / "schema" / "definitions"
    text = (own / "DescribeQuorumRequest.json").read_text(encoding="utf-8")
    (tmp_path / "DescribeQuorumRequest.json").write_text(
        text.replace("The topics to describe.", "Topics, as the operator's files say."), encoding="utf-8")
    try:
        out = same_output(capsys, "--schemas", str(tmp_path), "-V", str(CAPTURES / "quorum_story.pcap"))
    finally:
        configure_definitions()  # this process's definitions as they were
    assert "Topics, as the operator's files say." in out


def explode(message: Message) -> None:
    raise ValueError(f"cannot prepare message {message.number}")


def vanish(message: Message) -> None:
    os._exit(3)


def test_a_failing_worker_is_a_clear_error_not_a_hang() -> None:
    path = str(CAPTURES / "incident.pcap")
    with pytest.raises(parallel.WorkerError, match=r"worker \d failed: ValueError: cannot prepare message 1"):
        list(parallel.read_messages([path], 2, prepare=explode))
    with pytest.raises(parallel.WorkerError, match=r"worker \d ended without finishing its share \(exit code 3\)"):
        list(parallel.read_messages([path], 2, prepare=vanish))
    with pytest.raises(parallel.WorkerError, match=r"worker \d failed: what it sent cannot be read: "
                                                   r"ValueError: cannot be rebuilt here"):
        list(parallel.read_messages([path], 2, prepare=unrebuildable))


class Unrebuildable:
    """Pickled in a worker, but its unpickling fails in the parent."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return fail_to_rebuild, ()


def fail_to_rebuild() -> None:
    raise ValueError("cannot be rebuilt here")


def unrebuildable(message: Message) -> Unrebuildable:
    return Unrebuildable()


def test_a_file_that_is_no_capture_is_the_same_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all" * 10)
    with pytest.raises(CaptureError) as one:
        list(read_messages(str(junk)))
    with pytest.raises(CaptureError) as two:
        list(parallel.read_messages([str(junk)], 2))
    assert str(two.value) == str(one.value)


def test_the_default_is_one_job_below_the_threshold_and_every_core_above(tmp_path: Path) -> None:
    small = CAPTURES / "incident.pcap"
    assert parallel.default_jobs([small]) == 1
    big = tmp_path / "big.pcap"
    with big.open("wb") as out:
        out.truncate(parallel.PARALLEL_BYTES)
    cores = len(os.sched_getaffinity(0))
    assert parallel.default_jobs([big]) == min(cores, parallel.MAX_JOBS)


def test_a_script_without_the_main_guard_gets_one_clear_error(tmp_path: Path) -> None:
    """Workers from the fork server import the script (a thread of the script's own keeps
    them from being forked: forking would copy what that thread holds)."""
    script = tmp_path / "unguarded.py"
    script.write_text("import threading\n"
                      "from kdissect import read_pcap\n"
                      "busy = threading.Event()\n"
                      "threading.Thread(target=busy.wait, daemon=True).start()\n"
                      f"capture = read_pcap({str(CAPTURES / 'incident.pcap')!r}, jobs=2)\n"
                      "print(len(capture))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         check=False, cwd=tmp_path)
    assert run.returncode == 1
    assert "WorkerError: a script that reads with several jobs must do so under" in run.stderr


def test_a_script_of_one_thread_forks_its_workers_guarded_or_not(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text("from kdissect import read_pcap, parallel\n"
                      "assert parallel.worker_context().get_start_method() == 'fork'\n"
                      f"capture = read_pcap({str(CAPTURES / 'incident.pcap')!r}, jobs=2)\n"
                      "print(len(capture), len(capture.table('produce')))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         check=False, cwd=tmp_path)
    one = read_pcap(str(CAPTURES / "incident.pcap"), jobs=1)
    assert (run.returncode, run.stdout) == (0, f"{len(one)} {len(one.table('produce'))}\n"), run.stderr


def test_forked_workers_inherit_the_modules_named_rather_than_import_them(tmp_path: Path) -> None:
    """With `fork`, the modules a reading names (`preload`: for -V, the tree's writers) are
    imported by the parent, once, before the workers are forked."""
    script = tmp_path / "preload.py"
    script.write_text("import sys\n"
                      "from kdissect import parallel\n"
                      "assert 'kdissect.present.text' not in sys.modules\n"
                      "assert parallel.worker_context('kdissect.present.text').get_start_method() == 'fork'\n"
                      "assert 'kdissect.present.text' in sys.modules\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr


def test_verbose_text_names_what_its_workers_import(tmp_path: Path) -> None:
    """-V's workers find the tree's writers imported (by the parent, before the fork)."""
    from kdissect.cli import _TextLines, build_parser

    verbose = _TextLines(build_parser().parse_args(["-V", "x.pcap"]), "utf-8", "strict")
    assert "kdissect.present.text" in verbose.preload
    assert _TextLines(build_parser().parse_args(["x.pcap"]), "utf-8", "strict").preload == ()


WARMED: list[tuple[str, int | None]] = []  # what `_Recording` saw, in this process


class _Recording:
    """A `prepare` that records what it is told (by `parallel.warm`, in this process)."""

    warm_up = True

    def __init__(self, start_ns: int | None = None) -> None:
        self.start_ns = start_ns

    def started(self, start_ns: int) -> _Recording:
        WARMED.append(("started", start_ns))
        return _Recording(start_ns)

    def __call__(self, message: Message) -> None:
        WARMED.append(("message", message.number))


def test_the_parent_makes_the_capture_start_ready_before_forking_and_keeps_nothing(tmp_path: Path) -> None:
    """`warm`: the messages of the first `WARM_BYTES` of the capture go through a copy of
    `prepare`, told the capture's start first, as a worker's is; `prepare` itself is left as
    it was. A start that cannot be read whole (a compressed file cut short, no capture at
    all) only ends the warm-up."""
    capture = CAPTURES / "incident.pcap"
    options = {"ports": frozenset(parallel.DEFAULT_PORTS), "detect": True,
               "max_frame_size": parallel.MAX_FRAME_SIZE, "show_secrets": False}
    first = list(read_messages(str(capture)))
    start = next(iter(read_messages(str(capture)))).frame.first_ns
    recording = _Recording()
    WARMED.clear()
    parallel.warm(str(capture), options, recording)
    assert WARMED[0][0] == "started" and WARMED[0][1] is not None and WARMED[0][1] <= start
    numbers = [number for what, number in WARMED[1:] if what == "message"]
    assert numbers == list(range(1, len(numbers) + 1)) and 0 < len(numbers) <= len(first)
    assert recording.start_ns is None
    whole = capture.read_bytes()
    for name, data in (("cut.pcap.gz", gzip.compress(whole)[:5000]), ("none.pcap", b"not a capture" * 100)):
        (tmp_path / name).write_bytes(data)
        parallel.warm(str(tmp_path / name), options, _Recording())


def _recording_finish(messages: list[Message]) -> Iterator[int]:
    """A `finish` that records the messages it is given (by `parallel.warm`, in this process)."""
    WARMED.append(("finish", len(messages)))
    WARMED.extend(("message", message.number) for message in messages)
    yield len(messages)


def test_the_parent_warms_a_finish_up_on_the_capture_start_before_forking() -> None:
    """`read_to_come`'s `finish` (the per-API tables) goes first over the messages of the
    capture's first `WARM_BYTES`, here, all at once as a worker gives it its share's: the
    workers then inherit what their first messages would have cost each of them."""
    capture = CAPTURES / "incident.pcap"
    options = {"ports": frozenset(parallel.DEFAULT_PORTS), "detect": True,
               "max_frame_size": parallel.MAX_FRAME_SIZE, "show_secrets": False}
    first = list(read_messages(str(capture)))
    WARMED.clear()
    parallel.warm(str(capture), options, finish=_recording_finish)
    assert WARMED[0][0] == "finish" and 0 < WARMED[0][1] <= len(first)
    assert WARMED[1:] == [("message", number) for number in range(1, WARMED[0][1] + 1)]
    WARMED.clear()
    forked = parallel.worker_context().get_start_method() == "fork"  # (else no child makes the plan)
    to_come, finished = parallel.read_to_come([str(capture)], 2, finish=_recording_finish)
    try:
        assert [what for what, _count in WARMED[:1]] == (["finish"] if forked else [])  # here, not in a worker
        assert len(to_come) == len(first)
    finally:
        finished.stop()


def test_a_fifo_is_read_in_one_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A FIFO (or a shell's `<(zcat capture.gz)`) can be read once: with two jobs each reader
    would take some of its bytes from the others. It is read as one process reads it."""
    capture = SHIPPED[0]
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    assert not parallel.parallel_readable([str(fifo)])
    assert parallel.parallel_readable([str(capture)])
    assert parallel.parallel_readable([str(tmp_path / "absent.pcap")])  # left to the reading, which says why
    assert not parallel.parallel_readable(["-"])
    writer = threading.Thread(target=lambda: fifo.write_bytes(capture.read_bytes()))
    writer.start()
    try:
        piped = run(capsys, "--jobs", "2", "-V", str(fifo))
    finally:
        writer.join(timeout=30)
    assert piped[:2] == run(capsys, "--jobs", "1", "-V", str(capture))[:2]
    assert piped[1]
    assert piped[2] == f"kdissect: --jobs 2: {fifo} is read in one process (a pipe or a device cannot be read twice)\n"


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # a zombie has ended (nothing here need reap it)


def _killed_leaves_no_worker(command: list[str], ready: bytes) -> None:
    """`command`, killed outright once it printed `ready` (its workers started): each of its
    worker processes ends within seconds rather than waiting for ever for a parent that is
    gone. (One that does not is killed here, after the failure is seen.)"""
    import signal
    import time

    parent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              cwd=ROOT)
    workers: list[int] = []
    try:
        assert parent.stdout is not None
        assert parent.stdout.read(len(ready)) == ready
        time.sleep(0.5)  # the parent stops on its full output; the workers fill their pipes
        workers = [pid for pid in _children(parent.pid) if not _ended(pid)]
        assert len(workers) >= 2
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while not all(_ended(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in workers if not _ended(pid)] == []
    finally:
        parent.kill()
        parent.wait()
        for pid in workers:
            if not _ended(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def larger(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three megabytes of real exchanges over 64 connections."""
    out = tmp_path_factory.mktemp("jobs") / "larger.pcap"
    build(out, 3, "mixed", sources=SHIPPED)
    return str(out)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers in /proc (Linux)")
def test_workers_end_when_their_parent_is_killed(larger: str, many: str) -> None:
    """`kill -9` of a --jobs run whose output nobody reads: its reading workers end (each
    held the parent's end of its own pipe, and of those before it, so that none saw the
    parent go), and so do the table workers of `read_pcap`, which wait for requests. (The
    -V run sends a message a batch and reads one batch ahead, so that its workers are still
    at work, their pipes full, when it is killed.)"""
    verbose = ("import sys\nfrom kdissect import parallel\n"
               "parallel.LIGHT_BATCH_EVENTS = parallel.LIGHT_AHEAD_BATCHES = 1\n"
               "from kdissect.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    _killed_leaves_no_worker([sys.executable, "-c", verbose, "-V", "--jobs", "2", larger], b" ")
    tables = ("import sys\nfrom kdissect.present import parallel_tables\n"
              "parallel_tables.PARALLEL_MESSAGES = 1  # the table workers start for any capture\n"
              "from kdissect import read_pcap\ncapture = read_pcap(sys.argv[1], jobs=2)\n"
              "capture.table('fields')\nprint('ready', flush=True)\nsys.stdin.read()  # until it is killed\n")
    _killed_leaves_no_worker([sys.executable, "-c", tables, many], b"ready")
