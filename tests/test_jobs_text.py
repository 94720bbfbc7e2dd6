"""`--jobs N` text made in the workers: each message's whole text but its number, as bytes.

The merging process only puts the capture's number before each worker's text, unless
pairing in capture order gave the message notes its worker could not know of (a request
held too long, one never answered) or the worker's notes name other messages by its own
numbers (a duplicate correlation id, a response out of FIFO order): then it puts its own
notes in the summary line. Both ways must give the bytes of one process.
"""

from __future__ import annotations

import argparse
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kdissect import parallel
from kdissect.cli import _FieldsSink, _StatsSink, _TextLines, _TextSink, build_parser, main
from kdissect.pipeline import CaptureClock, read_messages
from kdissect.spool import read_all
from tests.conftest import CAPTURES
from tests.craft import (
    Conversation,
    Record,
    ethernet,
    kafka_request,
    kafka_response,
    metadata_request,
    write_pcap,
)

SHIPPED = sorted(str(p) for p in CAPTURES.glob("*.pcap"))


def same_bytes(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    one = (main(["--jobs", "1", *arguments]), *capsys.readouterr())
    two = (main(["--jobs", "2", *arguments]), *capsys.readouterr())
    assert two == one
    assert one[1]
    return str(one[1])


@pytest.fixture(scope="module")
def tangled(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Eight connections, interleaved, whose pairing in capture order adds notes: a
    duplicate correlation id, a response out of FIFO order, a request answered after the
    hold limit of 30 s (the note counts the later messages of every connection), and one
    never answered (from a client whose id is not ASCII); the other connections plain
    exchanges."""
    conversations = [Conversation.between((f"10.0.0.{n + 1}", 40000 + n), ("10.0.1.1", 9092))
                     for n in range(8)]
    steps: list[tuple[float, Conversation, bool, bytes]] = []
    for n, talk in enumerate(conversations):
        at = 1.0 + n * 0.01
        if n == 0:  # a duplicate correlation id in flight
            steps += [(at, talk, True, metadata_request(9)), (at + 0.1, talk, True, metadata_request(9)),
                      (at + 0.2, talk, False, kafka_response(9, bytes(8)))]
        elif n == 1:  # answered out of FIFO order
            steps += [(at, talk, True, metadata_request(1)), (at + 0.1, talk, True, metadata_request(2)),
                      (at + 0.2, talk, False, kafka_response(2, bytes(8)))]
        elif n == 2:  # answered after the hold limit
            steps += [(at, talk, True, metadata_request(5)), (at + 40.0, talk, False, kafka_response(5, bytes(8)))]
        elif n == 3:  # never answered, from a client whose id is not ASCII (the line's notes move in bytes)
            steps.append((at + 41.0, talk, True, kafka_request(18, 3, 77, "café-☕".encode(), body=b"\x00")))
        for k in range(6):  # plain exchanges, later, on every connection
            correlation = 100 + k
            steps += [(at + 35.0 + k, talk, True, metadata_request(correlation)),
                      (at + 35.5 + k, talk, False, kafka_response(correlation, bytes(16)))]
    items: list[Record] = []
    for talk in conversations:
        items += [Record(bytes(ethernet(p)), 0.5) for p in talk.handshake()]
    for at, talk, from_client, data in sorted(steps, key=lambda step: step[0]):
        items += [Record(bytes(ethernet(p)), at) for p in talk.send(from_client, data)]
    path = tmp_path_factory.mktemp("text") / "tangled.pcap"
    write_pcap(path, items)
    return str(path)


def test_the_tangled_capture_has_every_note_that_pairing_in_capture_order_adds(tangled: str) -> None:
    texts = [str(note) for message in read_messages(tangled) for note in message.notes]
    for said in ("duplicate correlation id 9", "out of FIFO order", "no response within", "never answered"):
        assert any(said in text for text in texts), said
    assert any(message.client_id == "café-☕" and message.notes for message in read_messages(tangled))


@pytest.mark.parametrize("options", [(), ("-V",), ("-V", "-x"), ("-x", "-t", "a"),
                                     ("-t", "ad", "--frames", "--show-file"), ("-i", "-V")], ids=" ".join)
def test_notes_only_pairing_in_capture_order_knows_give_one_process_bytes(
        capsys: pytest.CaptureFixture[str], tangled: str, options: tuple[str, ...]) -> None:
    out = same_bytes(capsys, *options, tangled)
    assert "(message #" in out and "no response within" in out


def test_statistics_count_a_request_shown_before_its_answer_as_one_process_does(
        capsys: pytest.CaptureFixture[str], tangled: str) -> None:
    """A request the hold limit releases before its answer is unanswered when it is counted,
    though its answer pairs with it later (in the same round of the merge, or after)."""
    out = same_bytes(capsys, "--stats", "--interval", "10s", "--top", "4", "-T", "json", tangled)
    metadata = next(api for api in json.loads(out)["apis"] if api["api_name"] == "Metadata")
    # two never answered (a duplicate id, FIFO order broken), one answered after it was shown
    assert metadata["unanswered"] == metadata["requests"] - metadata["responses"] + 1


@pytest.mark.parametrize("options", [("-T", "json"), ("-T", "jsonl", "--about")], ids=" ".join)
def test_json_made_in_the_workers_gets_the_capture_numbers_streams_and_pairs(
        capsys: pytest.CaptureFixture[str], tangled: str, options: tuple[str, ...]) -> None:
    out = same_bytes(capsys, *options, tangled)
    assert '"pair":' in out and "(message #" in out and "no response within" in out


@pytest.mark.parametrize("options", [("-t", "a", "--frames", "--show-file"), ("-x",), ("-V", "-t", "ad"),
                                     ("-T", "jsonl")],
                         ids=" ".join)
def test_text_made_in_the_workers_is_one_process_bytes_for_every_shipped_capture(
        capsys: pytest.CaptureFixture[str], options: tuple[str, ...]) -> None:
    same_bytes(capsys, "--port", "36333", "--port", "19092", *options, *SHIPPED)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Each shipped capture damaged three ways at random (5 to 80 bytes past the file's
    header replaced, seeded): times, lengths and Kafka bytes that no recording makes."""
    rng = random.Random(7)
    folder = tmp_path_factory.mktemp("damaged")
    paths = []
    for shipped in SHIPPED:
        data = Path(shipped).read_bytes()
        for variant in range(3):
            copy = bytearray(data)
            for _ in range(rng.choice((5, 20, 80))):
                copy[rng.randrange(24, len(copy))] = rng.randrange(256)
            path = folder / f"{Path(shipped).stem}-{variant}.pcap"
            path.write_bytes(copy)
            paths.append(str(path))
    return paths


@pytest.mark.parametrize("options", [("-T", "jsonl"), ("-V",), ("-i",), ("--stats", "-T", "json"),
                                     ("--interval", "1s", "--top", "3")], ids=" ".join)
def test_damaged_captures_give_one_process_bytes(capsys: pytest.CaptureFixture[str], damaged: list[str],
                                                 options: tuple[str, ...]) -> None:
    """Among them, requests the hold limits release before their answers come (damaged times):
    the JSON of such a request shows no pair, though its response pairs with it later."""
    for path in damaged:
        one = (main(["--jobs", "1", *options, path]), *capsys.readouterr())
        two = (main(["--jobs", "2", *options, path]), *capsys.readouterr())
        assert two == one, path


def lines_of(arguments: list[str]) -> _TextLines:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sink = _TextSink(out, build_parser().parse_args(arguments))
    assert isinstance(sink.prepare, _TextLines)
    return sink.prepare


def test_a_worker_sends_each_message_text_after_its_number_and_its_note_count() -> None:
    path = str(CAPTURES / "incident.pcap")
    clock = CaptureClock()
    one = io.StringIO()
    sink = _TextSink(one, build_parser().parse_args(["-V", path]))
    sink.begin(clock)
    texts = []
    for message in read_messages(path, clock=clock):
        sink.write(message)
        texts.append(one.getvalue())
        one.seek(0)
        one.truncate()
    found = list(parallel.read_messages([path], 2, prepare=lines_of(["-V", path]), clock=CaptureClock()))
    assert len(found) == len(texts) and all(type(prepared) is tuple for _message, prepared in found)
    written = [(b"%6d" % message.number + read_all(tail)).decode() for message, (tail, notes, _cut, _end) in found
               if notes == len(message.notes)]
    assert written == [text for text, (message, (_tail, notes, _cut, _end)) in zip(texts, found, strict=True)
                       if notes == len(message.notes)]
    assert len(written) == len(found) - 1  # the request never answered: its line is the merge's


def test_the_workers_make_the_text_only_when_it_depends_on_nothing_they_cannot_know() -> None:
    parser = build_parser()
    for arguments in (["-t", "d"], ["-i", "-t", "d"], ["-Y", "api_key == 3"], ["--api", "Metadata"]):
        args = parser.parse_args([*arguments, "x.pcap"])
        assert _TextLines.coding(io.TextIOWrapper(io.BytesIO()), args) is None
    # -i's change marks are the workers' too: they name messages the merge numbers again
    args = parser.parse_args(["-i", "x.pcap"])
    assert _TextLines.coding(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), args) == ("utf-8", "strict")
    args = parser.parse_args(["-V", "x.pcap"])
    assert _TextLines.coding(io.StringIO(), args) is None  # no bytes underneath
    assert _TextLines.coding(io.TextIOWrapper(io.BytesIO(), encoding="latin-1"), args) == ("latin-1", "strict")


def test_text_lines_travel_to_a_worker_without_their_sink(tmp_path: Path) -> None:
    import pickle

    prepare = lines_of(["x.pcap"]).started(5)
    prepare(next(iter(read_messages(str(CAPTURES / "incident.pcap")))))
    assert prepare.sink is not None
    copy = pickle.loads(pickle.dumps(prepare))
    assert copy.sink is None and copy.start_ns == 5 and isinstance(copy.args, argparse.Namespace)


@pytest.mark.parametrize(("sink", "options", "paused"), [
    (_TextSink, ["-V"], True), (_TextSink, ["-i"], True),
    (_StatsSink, ["--stats"], True), (_StatsSink, ["--interval", "1s"], True), (_StatsSink, ["--top", "3"], True),
    (_FieldsSink, ["-T", "fields", "-e", "api_name"], True),
    # where the merge decodes bodies itself, the collector stays on: -i's relative times, a filter
    (_TextSink, ["-i", "-t", "d"], False), (_TextSink, ["-V", "-Y", "api_key == 3"], False),
    (_StatsSink, ["--stats", "-Y", "api_key == 3"], False)])
def test_the_merge_runs_without_the_cycle_collector_only_where_it_reads_no_body(
        sink: Any, options: list[str], paused: bool,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the workers make the output, or all the merge reads of a message (`light`:
    --stats, --interval, --top, -T fields), the merge makes no cycles."""
    import gc

    enabled: list[bool] = []
    write = sink.write

    def noting(self: Any, message: Any, prepared: Any = None) -> None:
        enabled.append(gc.isenabled())
        write(self, message, prepared)

    monkeypatch.setattr(sink, "write", noting)
    assert main(["--jobs", "2", *options, str(CAPTURES / "incident.pcap")]) == 0
    capsys.readouterr()
    assert enabled and set(enabled) == {not paused}
    assert gc.isenabled()


@pytest.mark.parametrize("number", [1, 999_999, 1_000_000, 12_345_678])
def test_a_worker_leaves_out_the_number_however_many_places_it_takes(number: int) -> None:
    """A worker's own number starts the line in six places, or more past a million: the
    text it sends starts right after it."""
    path = str(CAPTURES / "incident.pcap")
    clock = CaptureClock()
    message = next(iter(read_messages(path, clock=clock)))
    message.number = number
    one = io.StringIO()
    sink = _TextSink(one, build_parser().parse_args(["-V", path]))
    sink.begin(clock)
    sink.write(message)
    lines = lines_of(["-V", path]).started(clock.start_ns)  # type: ignore[arg-type]
    tail, _notes, _cut, _end = lines(message)
    assert one.getvalue() == f"{number:6d}" + (tail if type(tail) is str else tail.decode())  # (an ASCII str)
    assert one.getvalue().startswith(str(number).rjust(6) + " ")


@pytest.mark.parametrize("encoding", ["utf-16", "cp500", "ascii", "latin-1"])
@pytest.mark.parametrize("options", [["-V"], ["-T", "jsonl"], []])
def test_every_output_encoding_gives_one_process_bytes(encoding: str, options: list[str]) -> None:
    """Where the output's encoding does not write ASCII as ASCII wherever a text starts
    (UTF-16's byte order mark, EBCDIC), the workers do not encode the text themselves; and
    a character the encoding cannot write (é in a record, on an ASCII output) is escaped,
    in both, rather than ending the run."""
    import os
    import subprocess
    import sys

    path = str(CAPTURES / "tansu_records.pcap")  # a record value holds an é
    environment = {**os.environ, "PYTHONIOENCODING": encoding}
    runs = [subprocess.run([sys.executable, "-m", "kdissect", "--jobs", jobs, *options, path], env=environment,
                           capture_output=True, timeout=120, check=False) for jobs in ("1", "2")]
    assert [run.returncode for run in runs] == [0, 0], runs[1].stderr
    assert runs[1].stdout == runs[0].stdout and runs[1].stderr == runs[0].stderr
    text = runs[0].stdout.decode(encoding)
    assert "ApiVersions" in text
    if encoding == "ascii" and options == ["-V"]:
        assert "\\xe9" in text
