"""`-V` text and JSON written from flat values are exactly what the interpreter's tree gives.

For every message whose body takes the fast path, the tree laid out as rows
(`kdissect.decode.rows`) must render to the same text, line for line, and to
the same JSON record as the `Node` tree the interpreter builds, on every
shipped, third-party and fuzz-regression capture and on random messages of
every shipped definition encoded by kio.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.rows import message_rows, raw_message_rows
from kdissect.decode.schema import message_plan
from kdissect.decode.values import fast_body
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.records import message_json, message_record, rows_record, tree_record
from kdissect.present.text import render_rows, render_tree
from tests.test_generated import (
    FUZZ_REGRESSIONS,
    KIO_CASES,
    QUICK,
    _kio_frame,
    carries_tagged_fields,
)


def _assert_same_outputs(data: bytes, kind: str, api_key: int, version: int) -> bool:
    if message_plan(api_key, version, kind) is None:  # an API whose bodies stay raw
        rows = raw_message_rows(data, kind, api_key, version)
        if rows is None:
            return False
    else:
        values = fast_body(data, kind, api_key, version)
        if values is None:
            return False
        rows = message_rows(data, kind, api_key, version, values)
        assert rows is not None  # record batches too: the fast path took only clean ones
    tree = dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)
    for wide in (False, True):
        assert render_rows(rows, wide=wide) == render_tree(tree, wide=wide)
    assert render_rows(rows, show_generated=False) == render_tree(tree, show_generated=False)
    for about in (False, True):
        assert rows_record(rows, about=about) == tree_record(tree, about=about)
    return True


def _same_on_captures(paths: list[Path]) -> int:
    taken = 0
    for path in paths:
        for message in read_messages(path):
            if message.api_key is None or message.api_version is None:
                continue
            if not message.is_request and message.pair is None:
                continue
            kind = "request" if message.is_request else "response"
            try:
                taken += _assert_same_outputs(message.frame.data, kind, message.api_key, message.api_version)
            except AssertionError as problem:
                raise AssertionError(f"{path.name} message {message.number}: {problem}") from None
    return taken


def test_rows_render_like_trees_on_every_shipped_capture(shipped_captures: Path) -> None:
    assert _same_on_captures(sorted(shipped_captures.glob("*.pcap"))) > 140  # decoded and raw bodies


def test_rows_render_like_trees_on_every_third_party_capture(public_captures: Path) -> None:
    _same_on_captures(sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng")))


def test_rows_render_like_trees_on_every_fuzz_regression() -> None:
    _same_on_captures(sorted(FUZZ_REGRESSIONS.glob("*.pcap")))


@pytest.mark.parametrize(("api_key", "version", "kind"), KIO_CASES)
@QUICK
@given(data=st.data())
def test_rows_render_like_trees_on_kio_messages(api_key: int, version: int, kind: str,
                                                 data: st.DataObject) -> None:
    frame = _kio_frame(api_key, version, kind, data)
    assert _assert_same_outputs(frame, kind, api_key, version) or carries_tagged_fields(
        frame, kind, api_key, version)


def _json_of_tree(message: Message, about: bool) -> dict:
    record = message_record(message)
    record["tree"] = tree_record(message.tree(keep=False), about=about)
    # JSON writes the exact decimal of the nanoseconds; parsed back it is that decimal's float
    record["time"] = float(record["time"].exact())
    return record


@pytest.mark.parametrize("about", [False, True])
def test_message_json_is_the_tree_record_as_ascii_json(shipped_captures: Path, about: bool) -> None:
    for message in read_messages(shipped_captures / "quorum_story.pcap"):
        text = message_json(message, about=about)
        assert text.isascii() and "\n" not in text
        assert json.loads(text) == _json_of_tree(message, about)
        assert ("about" in json.loads(text)["tree"]) == about


def test_message_json_escapes_text_outside_ascii() -> None:
    from kdissect.present.records import _NON_ASCII, _escape

    text = '{"a":"\u202eevil\U0001f600é"}'
    escaped = _NON_ASCII.sub(_escape, text)
    assert escaped.isascii() and json.loads(escaped) == json.loads(text)
    assert escaped == json.dumps(json.loads(text), separators=(",", ":"))


@given(st.integers(1, 253402300799999))
def test_timestamps_read_as_datetime_formats_them(milliseconds: int) -> None:
    import datetime

    from kdissect.dissectors import format_timestamp

    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=milliseconds)
    assert format_timestamp(milliseconds) == f"{moment:%Y-%m-%d %H:%M:%S}.{milliseconds % 1000:03d} UTC"


@pytest.mark.parametrize("capture", ["quorum_story.pcap", "producers_story.pcap", "tansu_topic_partitions.pcap"])
def test_fields_table_from_rows_equals_the_one_from_trees(shipped_captures: Path, capture: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    import kdissect

    from_rows = kdissect.read_pcap(shipped_captures / capture).fields
    monkeypatch.setattr(Message, "rows", lambda self: None)  # every message through its Node tree
    from_trees = kdissect.read_pcap(shipped_captures / capture).fields
    pd.testing.assert_frame_equal(from_rows, from_trees, check_exact=True)
    assert str(from_rows.path.dtype) == "category"  # paths repeat from message to message
    assert str(from_rows.display.dtype) == "category"  # and so do displays


def test_about_texts_are_in_json_only_with_the_about_flag(shipped_captures: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kdissect.cli import main

    def first_tree(*options: str) -> dict:
        assert main(["-T", "jsonl", "-c", "1", *options, str(shipped_captures / "quorum_story.pcap")]) == 0
        return json.loads(capsys.readouterr().out)["tree"]

    plain, described = first_tree(), first_tree("--about")
    assert "about" not in plain and "about" not in plain["children"][0]
    assert described["children"][0]["about"] == "length-delimited framing"
