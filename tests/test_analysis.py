"""The Capture object itself: chunked building, memory behaviour, Jupyter views."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import kdissect
from kdissect.error_codes import error_name
from kdissect.present import analysis
from kdissect.present.tables import TABLES
from tests.conftest import CAPTURES

QUORUM = CAPTURES / "quorum_story.pcap"


def test_fields_built_in_chunks_equal_fields_built_at_once(monkeypatch: pytest.MonkeyPatch):
    whole = kdissect.read_pcap(QUORUM).fields
    monkeypatch.setattr(analysis, "FIELDS_CHUNK_ROWS", 97)
    chunked = kdissect.read_pcap(QUORUM).fields
    assert len(whole) > 97 * 10
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)


def test_tables_do_not_keep_the_trees_they_decode():
    capture = kdissect.read_pcap(QUORUM)
    assert len(capture.fields) and len(capture.quorum_replicas)
    assert all(message._tree is None for message in capture.message_list)
    tree = capture.tree(28)  # asking for one tree keeps that one
    assert capture.message(28)._tree is tree


def test_jupyter_views_render():
    capture = kdissect.read_pcap(QUORUM)
    html = capture._repr_html_()
    assert "50 Kafka messages on 6 connections" in html and "<table" in html
    assert "<th>api_name</th>" in html and "<td>DescribeQuorum</td>" in html  # no column hidden
    assert "<th>...</th>" not in html
    tree_html = capture.message(28)._repr_html_()
    assert "<details" in tree_html and "HighWatermark" in tree_html
    assert "kd-gen" in tree_html  # generated nodes are marked
    assert "Capture quorum_story.pcap" in repr(capture)


def test_read_pcap_filters_apis_and_takes_extra_ports():
    capture = kdissect.read_pcap(QUORUM, apis=[55], ports=[19092])
    assert set(capture.messages.api_key.dropna()) == {55}
    assert len(capture) == 32


FUZZ_REGRESSIONS = Path(__file__).parent / "fuzz_regressions"


def _every_capture(public: Path) -> list[Path]:
    return sorted([*CAPTURES.glob("*.pcap"), *FUZZ_REGRESSIONS.glob("*.pcap*"), *public.glob("*.pcap*")])


def test_exchange_errors_read_from_the_frame_equal_the_decoded_bodies(public_captures: Path):
    """The exchanges' `error` is read at its fixed place in the frame when it can be: it
    must name the same code as the top-level ErrorCode of the decoded body, everywhere."""
    compared = 0
    for path in _every_capture(public_captures):
        for message in kdissect.read_pcap(path, jobs=1).message_list:
            if message.is_request:
                continue
            body = message.values(keep=False)
            code = None if body is None else body.get("ErrorCode")
            assert analysis._top_level_error(message) == (error_name(code) if type(code) is int else None)
            compared += body is not None and "ErrorCode" in body
    assert compared > 100


def test_tables_made_in_one_pass_equal_each_table_made_alone(public_captures: Path):
    for path in [CAPTURES / "incident.pcap", *_every_capture(public_captures)]:
        capture = kdissect.read_pcap(path, jobs=1)
        together = capture.tables()
        for name in TABLES:
            alone = analysis.table_of(capture.message_list, name)
            pd.testing.assert_frame_equal(together[name], alone, check_exact=True)


def test_some_tables_made_without_the_others_equal_each_table_made_alone():
    """`tables(names)` decodes only the bodies its per-API tables need; what it makes is
    what each table is made alone, generic tables among them, in the order asked."""
    names = ["quorum", "messages", "topic_partitions", "quorum", "producers", "exchanges", "produce"]
    rows = dict.fromkeys(names, 0)
    for path in sorted(CAPTURES.glob("*.pcap")):
        capture = kdissect.read_pcap(path, jobs=1)
        some = capture.tables(names)
        assert list(some) == list(rows)
        assert not set(capture._api_tables) - set(names)  # no other per-API table was made
        for name, frame in some.items():
            alone = kdissect.read_pcap(path, jobs=1).table(name)
            pd.testing.assert_frame_equal(frame, alone, check_exact=True)
            rows[name] += len(frame)
    assert all(rows.values()), rows
    with pytest.raises(KeyError):
        kdissect.read_pcap(CAPTURES / "incident.pcap", jobs=1).tables(["no_such_table"])
    one = kdissect.read_pcap(CAPTURES / "quorum_story.pcap", jobs=1).tables("quorum")  # a name, not its letters
    assert list(one) == ["quorum"] and len(one["quorum"]) > 0


@pytest.mark.parametrize(("table", "module", "builder"), [
    ("messages", "kdissect.present.analysis", "_messages_frame"),
    ("fields", "kdissect.present.analysis", "_fields_frame"),
    ("records", "kdissect.present.record_tables", "record_and_batch_columns"),
    ("batches", "kdissect.present.record_tables", "batch_columns")])
def test_generic_tables_are_built_without_the_cycle_collector(table, module, builder, monkeypatch):
    """A table's rows hold no cycles: the collector would only walk them as they pile up."""
    import gc
    import importlib

    where = importlib.import_module(module)
    seen = []
    build = getattr(where, builder)

    def noting(*args, **kwargs):
        seen.append(gc.isenabled())
        return build(*args, **kwargs)

    monkeypatch.setattr(where, builder, noting)
    capture = kdissect.read_pcap(CAPTURES / "tansu_records.pcap", jobs=1)
    assert len(getattr(capture, table)) > 0
    assert seen == [False] and gc.isenabled()


@pytest.mark.parametrize("first", ["records", "batches"])
def test_records_and_batches_decode_each_records_field_once_in_either_order(first, monkeypatch):
    """The records table makes the batches table in the same pass (each `records` field
    decoded once); asked first, the batches table is made alone, and the records table
    then makes no second one. Both as each makes them alone."""
    from kdissect.present import record_tables

    alone = kdissect.read_pcap(CAPTURES / "tansu_records.pcap", jobs=1)
    expected = {"records": alone.records}
    expected["batches"] = kdissect.read_pcap(CAPTURES / "tansu_records.pcap", jobs=1).batches
    decoded = []
    fields = record_tables.records_fields

    def counting(*args, **kwargs):
        decoded.append(1)
        return fields(*args, **kwargs)

    monkeypatch.setattr(record_tables, "records_fields", counting)
    capture = kdissect.read_pcap(CAPTURES / "tansu_records.pcap", jobs=1)
    second = "batches" if first == "records" else "records"
    for name in (first, second):
        pd.testing.assert_frame_equal(capture.table(name), expected[name])
    assert len(decoded) == (1 if first == "records" else 2)
    assert capture._batches_ahead is None  # handed on, not kept twice
