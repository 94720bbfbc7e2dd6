"""Record batches laid out as rows (`kdissect.decode.record_rows`) are exactly the interpreter's tree.

`-V` and JSON write the `records` fields of bodies the fast path took from rows
made straight from the decoded batches; the interpreter's tree (`record_nodes`)
stays the reference. Every record batch of every shipped, third-party and
fuzz-regression capture, and batches and message sets built by kafka-python's
record builders (every magic and codec), must render to the same text and JSON
either way; entries with a note are left to the tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.decode import record_nodes
from kdissect.decode.record_rows import entries_rows
from kdissect.decode.tree import Node
from kdissect.pipeline import read_messages
from kdissect.present.records import rows_record, tree_record
from kdissect.present.text import render_rows, render_tree
from tests.test_generated import FUZZ_REGRESSIONS
from tests.test_records import CODECS, QUICK, legacy_set, record, v2_batch

PUBLIC_SUFFIXES = (".pcap", ".pcapng")


def _same_entries(data: bytes, start: int, end: int, nodes: list[Node]) -> int:
    """Compare the rows of data[start:end] with the tree's entry nodes; the batches compared."""
    rows = entries_rows(data, start, end)
    if rows is None:  # some entry has something to say: the tree says it
        assert any(node.notes or any(True for _ in node.all_notes()) for node in nodes)
        return 0
    assert len(rows) == len(nodes)
    for row, node in zip(rows, nodes, strict=True):
        for wide in (False, True):
            assert render_rows(row, wide=wide) == render_tree(node, wide=wide)
        assert render_rows(row, show_generated=False) == render_tree(node, show_generated=False)
        for about in (False, True):
            assert rows_record(row, about=about) == tree_record(node, about=about)
    return len(rows)


def _records_fields(tree: Node) -> list[Node]:
    return [node for node in tree.nodes() if node.type == "records" and node.value is not None
            and node.children and node.children[0].name == "length"]


def _same_on_captures(paths: list[Path]) -> int:
    compared = 0
    for path in paths:
        for message in read_messages(path):
            if message.api_key is None or (not message.is_request and message.pair is None):
                continue
            data = message.frame.data
            for field in _records_fields(message.tree(keep=False)):
                length = field.children[0]
                start = length.offset + length.size
                try:
                    compared += _same_entries(data, start, field.offset + field.size, field.children[1:])
                except AssertionError as problem:
                    raise AssertionError(f"{path.name} message {message.number}: {problem}") from None
    return compared


def test_record_rows_are_the_tree_on_every_batch_of_the_shipped_captures(shipped_captures: Path) -> None:
    assert _same_on_captures(sorted(shipped_captures.glob("*.pcap"))) >= 44  # every batch of tansu_records


def test_record_rows_are_the_tree_on_every_batch_of_the_third_party_captures(public_captures: Path) -> None:
    assert _same_on_captures(sorted(p for p in public_captures.iterdir() if p.suffix in PUBLIC_SUFFIXES)) > 0


def test_record_rows_are_the_tree_on_every_fuzz_regression() -> None:
    _same_on_captures(sorted(FUZZ_REGRESSIONS.glob("*.pcap")))
    for path in sorted(FUZZ_REGRESSIONS.glob("*.records")):
        data = path.read_bytes()
        assert _same_entries(data, 0, len(data), record_nodes.entries_nodes(data, 0, len(data))) == 0, path.name


@pytest.mark.parametrize("codec", sorted(CODECS))
@QUICK
@given(batches=st.lists(st.lists(record, min_size=1, max_size=5), min_size=1, max_size=3),
       base=st.integers(0, 2**40), transactional=st.booleans())
def test_record_rows_are_the_tree_on_batches_kafka_python_built(codec: int, batches: list, base: int,
                                                                transactional: bool) -> None:
    data = b"".join(v2_batch(records, codec, base_offset=base + 100 * i, transactional=transactional,
                             producer=(7, 3, 11) if transactional else (-1, -1, -1))
                    for i, records in enumerate(batches))
    assert _same_entries(data, 0, len(data), record_nodes.entries_nodes(data, 0, len(data))) == len(batches)


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)])
@QUICK
@given(records=st.lists(record, min_size=1, max_size=5), base=st.integers(0, 2**40))
def test_record_rows_are_the_tree_on_message_sets_kafka_python_built(magic: int, codec: int, records: list,
                                                                     base: int) -> None:
    data = legacy_set(magic, records, codec, base_offset=base)
    nodes = record_nodes.entries_nodes(data, 0, len(data))
    assert _same_entries(data, 0, len(data), nodes) == len(nodes) > 0
