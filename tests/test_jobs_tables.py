"""`read_pcap(..., jobs=2)`: the per-API tables made by the workers that read the capture
are the tables one process makes, numbered as the capture is."""

from __future__ import annotations

import _thread
import array
import functools
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.ingest.capture import CaptureError
from kdissect.pair.message import Message
from kdissect.parallel import (
    MessagesToCome,
    WorkerError,
    _kept,
    _Merge,
    _replayed,
    _Worker,
    read_to_come,
    serve_waiting,
)
from kdissect.present import parallel_tables
from kdissect.present.analysis import GENERIC_TABLES, read_pcap
from kdissect.present.tables import TABLES
from kdissect.present.topic_stats import Topics
from tests.conftest import CAPTURES, PUBLIC_CAPTURES
from tests.test_jobs import drop_packets

SHIPPED = sorted(CAPTURES.glob("*.pcap"))
FUZZ_REGRESSIONS = Path(__file__).parent / "fuzz_regressions"


def same_api_tables(one: object, two: object) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)  # type: ignore[attr-defined]


def test_the_reading_workers_make_the_per_api_tables(many: str) -> None:
    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2)
    same_api_tables(one, two)
    assert two._workers.early_parts is not None  # from the reading workers...
    assert two._workers.processes == []  # ...and no table workers were started for them
    streams = set(two.table("produce")["stream"])
    assert len(streams) > 32  # connections of both workers, numbered as the capture numbers them


def test_tables_asked_for_in_any_order_are_those_of_one_process(many: str) -> None:
    """The workers send their tables one by one, in one order; the capture asks for them in
    its own: those that came first wait until asked for."""
    one = read_pcap(many, jobs=1)
    names = list(TABLES)
    for order in (names[::-1], [names[len(names) // 2], *names]):
        parallel_tables.WORKER_CPU.clear()
        two = read_pcap(many, jobs=2)
        for name in order:
            pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)
        assert len(parallel_tables.WORKER_CPU) == 2  # each worker's end came after its last table
        assert not any(two._workers.early_parts.tables)  # every table handed on once


def _gated(gate: str, parent: int, messages: list[Message]) -> object:
    """A `finish` that makes its second part only once the parent has the first (its file);
    in the parent (`parallel.warm` runs it on the capture's start), at once. A worker says
    when it waits (a file `<gate>.waiting.<pid>`): from then on it answers nothing, which
    it does between parts (`serve_waiting`)."""
    yield ("first", len(messages))
    if os.getpid() != parent:
        Path(f"{gate}.waiting.{os.getpid()}").touch()
    waited = time.monotonic() + 20
    while not Path(gate).exists() and time.monotonic() < waited and os.getpid() != parent:
        time.sleep(0.01)
    yield ("second", Path(gate).exists())


def test_each_part_of_a_reading_worker_comes_as_soon_as_it_is_made(many: str, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    to_come, finished = read_to_come([many], 2, finish=functools.partial(_gated, str(gate), os.getpid()))
    try:
        firsts = [finished.part(worker) for worker in (0, 1)]  # while both wait for the gate
        assert [name for name, _count in firsts] == ["first", "first"]
        gate.touch()
        assert [finished.part(worker) for worker in (0, 1)] == [("second", True), ("second", True)]
        assert [finished.part(worker) for worker in (0, 1)] == [None, None]
        assert len(finished.cpu()) == 2
        assert sum(count for _name, count in firsts) == len(to_come.get()) > 100
    finally:
        finished.stop()


def test_messages_left_out_by_a_filter_are_left_out_of_the_tables(many: str) -> None:
    # DescribeProducers alone: the errors of the other APIs are left out, and with them
    # their names from the categories of `api_name`, as one process never has them
    for options in ({"apis": ["Produce", "Fetch"]}, {"filter": "api_key == 0 or latency_ms > 1"},
                    {"apis": ["DescribeProducers"]}):
        one, two = read_pcap(many, jobs=1, **options), read_pcap(many, jobs=2, **options)
        assert 0 < len(two) == len(one)
        same_api_tables(one, two)


def test_a_tree_built_before_the_first_table_shows_as_in_one_process(many: str) -> None:
    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2)
    for capture in (one, two):
        for message in capture.message_list[::7]:
            message.tree()
    same_api_tables(one, two)
    assert two._workers.early is None  # the reading workers' tables were set aside


def test_generic_tables_first_then_per_api_ones(many: str) -> None:
    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2)
    for name in ("messages", "exchanges"):
        pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)
    same_api_tables(one, two)


def described(message: Message) -> tuple[object, ...]:
    frame, pair = message.frame, message.pair
    return (message.number, frame.connection.index, frame.connection.client, frame.connection.server,
            frame.direction, frame.stream_offset, frame.data, frame.first_packet, frame.last_ns,
            frame.complete, frame.notes, message.correlation_id, message.api_key, message.api_version,
            message.client_id, message.expects_response, message.file, message.notes,
            None if pair is None else pair.number)


def test_per_api_tables_need_no_messages_made_here_and_messages_are_made_when_asked(many: str) -> None:
    lossy = Path(many).with_name("lossy.pcap")
    lossy.write_bytes(drop_packets(Path(many).read_bytes(), every=29))
    for path in (many, str(lossy)):
        one, two = read_pcap(path, jobs=1), read_pcap(path, jobs=2)
        assert len(two) == len(one) and two.problems == one.problems
        same_api_tables(one, two)
        assert isinstance(two._messages, MessagesToCome)  # the tables needed only numbers
        workers = two._messages.team.processes
        assert all(worker.is_alive() for worker in workers)  # they hold the frames until asked
        assert [described(m) for m in two.message_list] == [described(m) for m in one.message_list]
        assert all(worker.is_alive() for worker in workers)  # they keep their shares for the tables
        if path != many:  # holes, unanswered requests, responses without their request
            assert sum(bool(m.notes) for m in two.message_list) > 10
        assert two.message(len(two)).number == len(two)


def test_messages_made_while_reading_when_not_lazy_and_a_blank_filter_is_none(many: str) -> None:
    """`lazy=False` (the report, `--findings`) has the messages when `read_pcap` returns; the
    tables still come from the reading workers. A blank filter keeps every message, as `-Y ""`."""
    one = read_pcap(many, jobs=1)
    for two, lazy in ((read_pcap(many, jobs=2, lazy=False), False), (read_pcap(many, jobs=2, filter=" "), True)):
        assert isinstance(two._messages, MessagesToCome if lazy else list)  # or made while the workers read
        assert [described(m) for m in two.message_list] == [described(m) for m in one.message_list]
        same_api_tables(one, two)
        assert two._workers.early_parts is not None and two._workers.processes == []


def test_the_reading_workers_find_the_bodies_facts_as_one_pass_does(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`findings=True` (`--findings`): each reading worker finds the facts of its share's
    bodies; renumbered and merged, they are one pass's over the whole capture, in its order,
    and so are the findings: on many connections, on fuzz-found captures with malformed
    bodies, and on the third-party captures where they are."""
    from kdissect.present import findings

    paths = [many, *(str(p) for p in sorted((CAPTURES.parent / "tests" / "fuzz_regressions").glob("*.pcap")))]
    if PUBLIC_CAPTURES.is_dir():  # group ids among them (JoinGroup, SyncGroup, LeaveGroup)
        paths += [str(p) for p in sorted(PUBLIC_CAPTURES.glob("*.pcap*"))]
    seen = findings.BodyFacts()
    for path in paths:
        one, two = read_pcap(path, jobs=1), read_pcap(path, jobs=2, findings=True)
        expected = findings.body_facts_of(one.message_list)
        monkeypatch.setattr(findings, "body_facts_of", None)  # no pass here: calling it fails
        found = findings.Evidence(two, findings.Thresholds(), None).body_facts
        monkeypatch.undo()
        assert found == expected, path
        for name in ("malformed", "group_ids", "max_wait_ms"):  # in message order, as one pass
            assert list(getattr(found, name)) == list(getattr(expected, name)), (path, name)
            getattr(seen, name).update(getattr(found, name))
        seen.errors.extend(found.errors)
        assert findings.find(two) == findings.find(one), path
        counted = two.workers_topics()  # from the same pass over the bodies, merged
        assert counted is not None and counted.resolved() == Topics().add_messages(one.message_list).resolved()
    assert seen.errors and seen.malformed and seen.max_wait_ms
    same_api_tables(read_pcap(many, jobs=1), read_pcap(many, jobs=2, findings=True))
    assert read_pcap(many, jobs=2).workers_body_facts() is None  # none found without findings=True


def test_the_report_of_two_jobs_is_the_page_of_one(many: str) -> None:
    """The report takes the facts and topics the reading workers found, and makes only
    the page's trees here: the same page as one process's single pass."""
    from kdissect.present.report import build_report

    two = read_pcap(many, jobs=2, findings=True)
    assert two.workers_find_facts()
    assert build_report(two) == build_report(read_pcap(many, jobs=1))


def test_topics_merge_as_one_pass_counts_them(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An id named differently in two shares takes the name of the later message; a share
    that reached the bound on topics kept cannot be merged (None: counted again whole)."""
    from kdissect.present import topic_stats
    from kdissect.present.topic_stats import merged_topics

    def share(name: str, number: int) -> Topics:
        topics = Topics()
        topics.names["id-1"], topics.named["id-1"] = name, number
        topics.topics[(None, "id-1")] = topic_stats.TopicStats(topic_stats.Flow(1, 2, 3, 0), topic_stats.Flow())
        return topics

    numbers = [[5, 9], [7, 8]]  # the capture's number of each share's first and second message
    merged = merged_topics([(share("early", 1), numbers[0]), (share("late", 1), numbers[1])])
    assert merged is not None and merged.names == {"id-1": "late"}  # message 7 after message 5
    [(name, topic_id, stats)] = merged.resolved()
    assert (name, topic_id, stats.produced.records) == ("late", None, 4)
    merged = merged_topics([(share("early", 2), numbers[0]), (share("late", 1), numbers[1])])
    assert merged is not None and merged.names == {"id-1": "early"}  # message 9 after message 7
    monkeypatch.setattr(topic_stats, "_MAX_TOPICS", 1)
    assert merged_topics([(share("early", 1), numbers[0])]) is None


def test_workers_holding_frames_end_with_the_capture(many: str) -> None:
    capture = read_pcap(many, jobs=2)
    workers = capture._messages.team.processes  # type: ignore[union-attr]
    assert all(worker.is_alive() for worker in workers)
    del capture
    gc.collect()
    for worker in workers:
        worker.join(timeout=10)
    assert not any(worker.is_alive() for worker in workers)


def _kept_of(events: list[tuple[Any, str, Any]]) -> Any:
    """What a worker holding its frames sends of `events` once its share is read: each
    frame's key put with the others as it comes (`_Worker._held_key`), then `_kept`."""
    worker = SimpleNamespace(held_keys=array.array("q"))
    others = []
    for key, what, event in events:
        if what == "frame":
            _Worker._held_key(worker, key)  # type: ignore[arg-type]
        else:
            others.append((key, what, event))
    return _kept(worker.held_keys, others)


def test_keys_beyond_64_bits_are_numbered_as_tuples() -> None:
    """A worker's keys travel as one array of 64-bit integers; a key that does not fit (a
    connection closed at a capture time far off) makes them travel as tuples, which number
    the same."""
    far = 1 << 70
    first = [((1, 0, 0, 0, 1), "frame", None), ((3, 1, far, 2, 2), "frame", None)]
    second = [((2, 0, 0, 0, 1), "open", (0, "client", "server", False)), ((2, 0, 0, 0, 2), "frame", None),
              ((4, 0, 0, 0, 3), "frame", None)]
    kept = [_kept_of(first), _kept_of(second)]
    assert kept[0][0] == [(1, 0, 0, 0, 1), (3, 1, far, 2, 2)]  # (the first key's values: not one more)
    assert kept[1][0].tolist() == [[2, 0, 0, 0, 2], [4, 0, 0, 0, 3]]
    assert _kept_of([*first, ((5, 0, 0, 0, 3), "frame", None)])[0][-1] == (5, 0, 0, 0, 3)  # and on as tuples
    near = [first[0], ((3, 1, 5, 2, 2), "frame", None)]
    for both in (kept, [_kept_of(near), kept[1]]):  # as tuples, then as arrays
        merged = _Merge(SimpleNamespace(pipes=[None, None]), None, None, None, {}, keep_numbers=True)  # type: ignore[arg-type]
        merged.number(both)
        assert [list(numbers) for numbers in merged.numbers] == [[1, 3], [2, 4]]
        assert [connection.server for connection in merged.connections.values()] == ["server"]
    assert [(key, what) for key, _worker, what, _event in _replayed(1, kept[1], ["a", "b"])] == [
        ((2, 0, 0, 0, 1), "open"), ((2, 0, 0, 0, 2), "frame"), ((4, 0, 0, 0, 3), "frame")]


def test_the_other_tables_come_from_the_reading_workers_with_no_message_made_here(many: str) -> None:
    """Holding their shares, the reading workers make the tables that are not per-API too:
    numbered as the capture, with the notes only releasing in capture order gives (hold
    limits over every connection: a lossy capture's unanswered requests) and pairing notes
    that name other messages by the capture's numbers."""
    lossy = Path(many).with_name("lossy-other.pcap")
    lossy.write_bytes(drop_packets(Path(many).read_bytes(), every=23))
    for path in (many, str(lossy)):
        one, two = read_pcap(path, jobs=1), read_pcap(path, jobs=2)
        assert repr(two) == repr(one) and two._repr_html_() == one._repr_html_()  # a notebook's view
        for name in reversed(GENERIC_TABLES):
            pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)
        assert isinstance(two._messages, MessagesToCome)  # no message made here...
        assert two._workers.processes == []  # ...nor sent to table workers
        same_api_tables(one, two)
    noted = one.messages["notes"]
    assert noted.str.contains("never answered").any() and noted.str.contains("#").any()


def test_a_tree_built_here_sends_the_other_tables_the_long_way(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_tables, "PARALLEL_MESSAGES", 1)  # that way: on table workers
    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2)
    for capture in (one, two):
        for message in capture.message_list[::11]:
            message.tree()  # its notes show in the tables: only this process knows of it
    pd.testing.assert_frame_equal(two.messages, one.messages)
    assert len(two._workers.processes) == 2


def _counted(messages: list[Message], request: str) -> tuple[str, int]:
    if request == "fail":
        raise ValueError("asked to fail")
    if request == "slow":
        time.sleep(2)
    return request, len(messages)


def _interrupted(call: Callable[[], object]) -> None:
    """`call`, interrupted as Ctrl-C interrupts a notebook's cell, while it waits. Python's
    own Ctrl-C handler is put in place for it: a process started with SIGINT ignored (a
    shell's background job) has none, and then `interrupt_main` does nothing."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.join()
        signal.signal(signal.SIGINT, before)


def test_an_interrupted_wait_loses_nothing(many: str, tmp_path: Path) -> None:
    """Ctrl-C while the frames or an answer are waited for: the workers go on, and what is
    asked next is answered as if nothing had happened."""
    gate = tmp_path / "gate"
    to_come, finished = read_to_come([many], 2, finish=functools.partial(_gated, str(gate), os.getpid()),
                                     answer=_counted)
    try:
        shares = [finished.part(worker)[1] for worker in (0, 1)]  # type: ignore[index]
        # Once both wait for the gate, no frames come yet (before, a worker answers the
        # request for them between its parts, however soon the parent asks)
        waited = time.monotonic() + 20
        while len(list(tmp_path.glob("gate.waiting.*"))) < 2 and time.monotonic() < waited:
            time.sleep(0.01)
        _interrupted(to_come.get)
        gate.touch()
        assert [finished.part(worker) for worker in (0, 1)] == [("second", True), ("second", True)]
        assert len(to_come.get()) == sum(shares)
        _interrupted(lambda: finished.answers(["slow", "slow"]))
        assert finished.answers(["a", "b"]) == [("a", shares[0]), ("b", shares[1])]
    finally:
        finished.stop()


def _gated_serving(gate: str, parent: int, messages: list[Message]) -> object:
    """A `finish` that, after its first part, answers what it is asked (`serve_waiting`) while
    it waits for the parent's gate."""
    yield ("first", len(messages))
    waited = time.monotonic() + 20
    while not Path(gate).exists() and time.monotonic() < waited and os.getpid() != parent:
        serve_waiting()
        time.sleep(0.01)
    yield ("second", Path(gate).exists())


def test_the_workers_answer_and_send_their_frames_while_still_making_their_parts(many: str,
                                                                                 tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    to_come, finished = read_to_come([many], 2, finish=functools.partial(_gated_serving, str(gate), os.getpid()),
                                     answer=_counted)
    try:
        firsts = [finished.part(worker) for worker in (0, 1)]
        shares = [count for _name, count in firsts]
        assert finished.answers(["a", "b"]) == [("a", shares[0]), ("b", shares[1])]  # before the gate opens
        assert len(to_come.get()) == sum(shares) > 100  # the frames too
        assert not gate.exists()
        gate.touch()
        assert [finished.part(worker) for worker in (0, 1)] == [("second", True), ("second", True)]
        assert [finished.part(worker) for worker in (0, 1)] == [None, None]
        assert finished.answers(["c", "d"]) == [("c", shares[0]), ("d", shares[1])]  # and after their parts
        assert all(process.is_alive() for process in finished.team.processes)
        with pytest.raises(WorkerError, match="asked to fail"):
            finished.answers(["fail", "e"])
        assert not finished.answering()  # a failure stops them
        assert not any(process.is_alive() for process in finished.team.processes)
    finally:
        finished.stop()


@given(st.lists(st.one_of(st.none(), st.sampled_from(["b", "a", "c", "ä", "10", "9", "", "B", "a\x00", "\x00"])), max_size=30),
       st.lists(st.sampled_from(["z", "y", "a"]), max_size=3), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_categories_made_again_from_codes_are_those_made_from_the_text(
        values: list[str | None], unused: list[str], shuffle: object) -> None:
    """The parts' categorical columns, put together, get their categories again: from their
    codes where the categories are distinct as text, as from the text itself."""
    categories = list(dict.fromkeys([v for v in values if v is not None] + unused))
    shuffle.shuffle(categories)  # type: ignore[attr-defined]
    column = pd.Series(pd.Categorical(values, categories=categories))
    for appearance in (True, False):
        by_codes = parallel_tables._categories_remade(pd.DataFrame({"c": column}), {"c": "category"},
                                                      appearance=appearance)
        by_text = parallel_tables._categories_remade(pd.DataFrame({"c": column.astype(object)}), {"c": "category"},
                                                     appearance=appearance)
        pd.testing.assert_frame_equal(by_codes, by_text)
    assert parallel_tables._recoded(pd.Series(pd.Categorical([1, "1"])), appearance=True) is None  # alike as text


@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from(["b", "a", "c", "ä", "10", "9", "", "a\x00"])),
                         max_size=12), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_parts_joined_are_the_table_one_process_makes(parts: list[list[str | None]]) -> None:
    """Parts of a table whose categoricals have categories of their own (or none: a part
    where the column is all missing) join into what one process makes of all the rows
    (`columns.column`, or `fields`' categories in order of appearance), down to how Arrow
    writes them; other columns joined as they are."""
    import pyarrow as pa

    from kdissect.present.analysis import _Categories
    from kdissect.present.columns import column

    every = [value for values in parts for value in values]
    numbers = pd.Series([n for values in parts for n in range(len(values))], dtype="int64")
    for appearance in (True, False):
        if appearance:  # as `fields` is made: categories in order of appearance
            made = [_Categories() for _ in parts]
            frames = [pd.DataFrame({"c": categories.column([categories.codes(values)]), "n": range(len(values))})
                      for categories, values in zip(made, parts, strict=True)]
            whole = _Categories()
            one = pd.DataFrame({"c": whole.column([whole.codes(every)]), "n": numbers})
        else:  # as a per-API table is made: categories sorted
            frames = [pd.DataFrame({"c": column(values, "category"), "n": range(len(values))}) for values in parts]
            one = pd.DataFrame({"c": column(every, "category"), "n": numbers})
        joined = parallel_tables.concatenated(frames, {"c": "category", "n": "int64"}, appearance=appearance)
        pd.testing.assert_frame_equal(joined, one)
        # and written alike: text even where every value is missing (not a column of nulls)
        assert pa.Table.from_pandas(joined).schema == pa.Table.from_pandas(one).schema


def test_the_fuzzers_captures_give_the_same_tables_with_two_jobs() -> None:
    """The captures the fuzzers found hard (times beyond any calendar, text with NULs and
    bytes beyond ASCII in every column): the reading workers' tables are one process's."""
    read = 0
    for path in sorted(str(p) for p in FUZZ_REGRESSIONS.glob("*.pcap")):
        try:
            one = read_pcap(path, jobs=1)
        except CaptureError:
            continue
        two = read_pcap(path, jobs=2)
        assert repr(two) == repr(one)
        for name in (*GENERIC_TABLES, *TABLES):
            pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=f"{path}: {name}")
        read += 1
    assert read >= 4


@pytest.mark.parametrize(("guarded", "thread"), [(True, False), (False, False), (True, True), (False, True)])
def test_table_workers_after_a_read_that_made_the_messages(tmp_path: Path, guarded: bool, thread: bool) -> None:
    """Messages made while reading (`lazy=False`) go to table workers. The reading workers'
    per-API tables are taken in first, so their reader threads are gone and the table
    workers are forked: a script gets the tables as one process makes them, with or without
    the main guard. A script with a thread of its own has them started by the fork server,
    which imports the script: under the guard the tables come alike; without it, one clear
    error (not a bare 'worker died')."""
    import subprocess
    import sys

    path = str(CAPTURES / "incident.pcap")
    body = ("import threading\n"
            "from kdissect import read_pcap\n"
            "from kdissect.present import parallel_tables\n"
            "def main():\n"
            "    parallel_tables.PARALLEL_MESSAGES = 1\n"
            f"    capture = read_pcap({path!r}, jobs=2, lazy=False)\n"
            + ("    threading.Thread(target=threading.Event().wait, daemon=True).start()\n" if thread else "")
            + "    print(len(capture.table('messages')), len(capture.table('batches')))\n")
    script = tmp_path / "tables.py"
    script.write_text(body + ("if __name__ == '__main__':\n    main()\n" if guarded else "main()\n"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         check=False, cwd=tmp_path)
    if guarded or not thread:
        one = read_pcap(path, jobs=1)
        assert (run.returncode, run.stdout) == (0, f"{len(one.messages)} {len(one.batches)}\n"), run.stderr
    else:
        assert run.returncode == 1
        assert "WorkerError: a script that reads with several jobs must do so under" in run.stderr
