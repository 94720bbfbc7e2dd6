"""The report's trees made by the reading workers (`PacketData.add_share_details`): the page
of one process, whatever the budget, and `remapped` in C the Python it mirrors."""

from __future__ import annotations

import json
import math
import random
from array import array

import pandas as pd
import pytest

from kdissect.present import report
from kdissect.present.analysis import read_pcap
from kdissect.present.report import build_report, share_details


@pytest.fixture(scope="module")
def lines(many: str) -> tuple[list[str], list[str | None]]:
    """Every message's detail line as one worker makes it, and that worker's string table."""
    messages = read_pcap(many, jobs=1).message_list
    entries = share_details(messages, True, 1 << 40)
    assert len(entries) == len(messages)
    made = [entry[1] for entry in entries if entry is not None]
    return made, list(report._share_details[0].strings.index)


def test_two_jobs_make_the_page_of_one_at_any_budget(many: str) -> None:
    """The budget cuts the list of trees at one message in capture order, whichever worker
    holds it; the strings of the message that did not fit are in the table all the same.
    Asked again (a second page), the workers start their shares anew; answers asked ahead
    and never taken do not reach the tables asked for after."""
    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2, findings=True)
    assert two.held_shares() is not None  # the workers make the trees
    whole = report.PacketData(budget=1 << 40)
    shares = two.held_shares()
    with whole.share_stream(shares) as made:
        whole.add_share_details(shares.owners().tolist(), made)
    assert whole.details and not whole.full
    cuts = [0, 1000, whole.detail_bytes // 3, whole.detail_bytes - 1, whole.detail_bytes, 1 << 40]
    for budget in cuts:
        page = build_report(two, detail_budget=budget)
        assert page == build_report(one, detail_budget=budget), budget
    pd.testing.assert_frame_equal(two.table("messages"), one.table("messages"))
    pd.testing.assert_frame_equal(two.table("exchanges"), one.table("exchanges"))


def test_the_shares_made_every_tree_the_page_holds(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No tree is laid out in this process when the workers hold the shares."""
    two = read_pcap(many, jobs=2, findings=True)
    one_page = build_report(read_pcap(many, jobs=1))

    def nowhere(*_arguments: object) -> None:
        raise AssertionError("a tree laid out in the parent")

    monkeypatch.setattr(report, "compact_rows", nowhere)
    monkeypatch.setattr(report, "compact_tree", nowhere)
    assert build_report(two) == one_page


def test_remapped_gives_each_node_the_page_index(lines: tuple[list[str], list[str | None]]) -> None:
    made, strings = lines
    mapping = list(range(len(strings)))
    random.Random(7).shuffle(mapping)
    page = array("q", mapping)

    def refs(node: list, found: list) -> list:
        found += [node[0], node[1], node[5]]
        for child in node[6] if len(node) > 6 else ():
            refs(child, found)
        return found

    for line in made:
        moved = report.remapped(line, page)
        assert moved == report._python_remapped(line, page)
        before, after = json.loads(line), json.loads(moved)
        assert before[0] == after[0]  # the bytes as they were
        assert [mapping[index] for index in refs(before[1], [])] == refs(after[1], [])
        assert report.remapped(line, array("q", range(len(strings)))) == line


def test_remapped_in_c_is_the_python_on_what_is_no_detail_line(lines: tuple[list[str], list[str | None]]) -> None:
    """Damaged lines: both give the same text, or both refuse it."""
    c_remapped = pytest.importorskip("kdissect.present._report_c").remapped
    made, strings = lines
    page = array("q", range(1, len(strings) + 1))
    chance = random.Random(11)
    pieces = ['"', "\\", "[", "]", ",", "0", "9", "-1", "x", "\x00", str(len(strings)), "99999999999999999999"]
    tried = refused = 0
    for line in chance.sample(made, min(60, len(made))):
        for _ in range(25):
            at = chance.randrange(len(line) + 1)
            damaged = chance.choice([line[:at], line[:at] + chance.choice(pieces) + line[at:],
                                     line[:at] + line[at + 1:]])
            try:
                expected: str | type[ValueError] = report._python_remapped(damaged, page)
            except ValueError:
                expected = ValueError
            try:
                found: str | type[ValueError] = c_remapped(damaged, page)
            except ValueError:
                found = ValueError
            assert found == expected, damaged
            tried += 1
            refused += expected is ValueError
    assert tried and 0 < refused < tried
    with pytest.raises(ValueError):
        c_remapped("[\"\u00e9\",[0,0,\"\",0,0,0]]", page)
    with pytest.raises(ValueError):
        report._python_remapped("[\"\u00e9\",[0,0,\"\",0,0,0]]", page)


def test_a_piece_is_bounded_and_goes_on_where_the_last_ended(many: str) -> None:
    messages = read_pcap(many, jobs=1).message_list
    whole = share_details(messages, True, math.inf)  # type: ignore[arg-type]
    pieces, first = [], True
    while piece := share_details(messages, first, 20_000):
        assert sum(len(entry[1]) for entry in piece[:-1] if entry) < 20_000
        pieces += piece
        first = False
    assert pieces == whole


def test_the_findings_workers_make_only_the_tables_the_detectors_read(many: str) -> None:
    """The other per-API tables are asked of the workers that hold their shares later, one
    at a time: the tables of one process, and no table worker started."""
    from kdissect.present import findings
    from kdissect.present.parallel_tables import FACTS
    from kdissect.present.tables import TABLES

    one, two = read_pcap(many, jobs=1), read_pcap(many, jobs=2, findings=True)
    assert findings.find(two) == findings.find(one)
    assert two._workers.early_parts.expected == {FACTS, *findings.TABLES_READ}
    assert set(findings.TABLES_READ) < set(TABLES)
    for name in TABLES:
        pd.testing.assert_frame_equal(two.table(name), one.table(name), obj=name)
    assert two._workers.processes == []


def _failing_details(share: list, first: bool, piece_bytes: int) -> list:
    raise ValueError("cannot lay out this tree")


def test_a_worker_that_fails_the_trees_ends_the_page_with_its_error(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Said, not waited for: the workers stop, and the error names the worker and why."""
    from kdissect.parallel import WorkerError

    monkeypatch.setattr(report, "share_details", _failing_details)
    two = read_pcap(many, jobs=2, findings=True)
    with pytest.raises(WorkerError, match=r"worker \d failed: ValueError: cannot lay out this tree"):
        build_report(two)
    assert not two._workers.early.answering()  # stopped
