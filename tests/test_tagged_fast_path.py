"""Bodies carrying tagged fields take the fast path, and render exactly as the interpreter's tree.

The fast path checks a non-empty tagged-field block (tags ascending, each known
value exactly its declared size, unknown tags kept as bytes) and skips it; `-V`
and JSON lay it out again from the frame. Checked on real bytes (a Tansu
broker's answers and third-party captures), on those bytes with a tag renumbered
or reordered, and on messages kio encodes with its tagged fields set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.tree import Node
from kdissect.decode.values import fast_body
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from tests.test_generated import QUICK, _check_agreement, _kio_frame
from tests.test_rows import _assert_same_outputs

Case = tuple[bytes, str, int, int]


def _kind(message: Message) -> str:
    return "request" if message.is_request else "response"


def _tree(data: bytes, kind: str, api_key: int, version: int) -> Node:
    return dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)


def _tagged_blocks(tree: Node) -> list[Node]:
    return [node for node in tree.nodes() if node.name == "tagged_fields" and node.value]


def _tagged_messages(paths: list[Path]) -> Iterator[Case]:
    """Every message of these captures whose tree holds a non-empty tagged-field block."""
    for path in paths:
        for message in read_messages(path):
            if message.api_key is None or message.api_version is None:
                continue
            case = (message.frame.data, _kind(message), message.api_key, message.api_version)
            if _tagged_blocks(_tree(*case)):
                yield case


def _assert_fast_and_same(case: Case) -> None:
    tree = _tree(*case)
    if list(tree.all_notes()):
        assert fast_body(*case) is None  # whatever the interpreter has to say, it says
        return
    assert _check_agreement(*case)
    assert _assert_same_outputs(*case)


def test_tagged_fields_from_a_real_broker_take_the_fast_path(shipped_captures: Path) -> None:
    cases = list(_tagged_messages([shipped_captures / "tansu_records.pcap",
                                   shipped_captures / "tansu_topic_partitions.pcap"]))
    assert len(cases) >= 20
    for case in cases:
        assert fast_body(*case) is not None
        _assert_fast_and_same(case)


def test_tagged_fields_in_third_party_captures_take_the_fast_path(public_captures: Path) -> None:
    paths = sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng"))
    cases = list(_tagged_messages(paths))
    assert cases  # an ApiVersions v3 response among them
    for case in cases:
        _assert_fast_and_same(case)


def _with_last_tag(case: Case, change: int) -> tuple[Case, Node]:
    """The message with the last entry of its first tagged-field block renumbered by `change`."""
    data, kind, api_key, version = case
    block = _tagged_blocks(_tree(*case))[0]
    tag = block.children[-1].children[0]
    assert tag.size == 1 and 0 <= tag.value + change < 0x80
    frame = bytearray(data)
    frame[tag.offset] = tag.value + change
    return (bytes(frame), kind, api_key, version), block


@pytest.mark.parametrize("change", [1, 40, 100])
def test_an_unknown_tag_is_kept_as_bytes_on_the_fast_path(shipped_captures: Path, change: int) -> None:
    for case in _tagged_messages([shipped_captures / "tansu_records.pcap"]):
        renumbered, _ = _with_last_tag(case, change)
        tree = _tree(*renumbered)
        if list(tree.all_notes()):  # a known tag whose value does not fit the renumbered one
            assert fast_body(*renumbered) is None
            continue
        assert fast_body(*renumbered) is not None
        _assert_fast_and_same(renumbered)


def test_tags_out_of_order_are_left_to_the_interpreter(shipped_captures: Path) -> None:
    checked = 0
    for case in _tagged_messages([shipped_captures / "tansu_records.pcap",
                                  shipped_captures / "tansu_topic_partitions.pcap"]):
        block = _tagged_blocks(_tree(*case))[0]
        if block.value < 2:
            continue
        previous = block.children[-2].children[0].value
        last = block.children[-1].children[0].value
        reordered, _ = _with_last_tag(case, previous - last)  # the same tag twice
        assert fast_body(*reordered) is None
        assert any(n.id == "kafka.tags_unordered" for n in _tree(*reordered).all_notes())
        checked += 1
    if not checked:
        pytest.skip("no block of two tags in these captures")


# ApiVersions v3+ (supported and finalized features), CreateTopics v5+ (a topic's config error),
# Metadata and DescribeCluster answers: kio writes each tagged field whose value is not its default.
TAGGED_CASES = [(18, 3, "response"), (18, 4, "response"), (19, 7, "response"), (3, 13, "response"),
                (60, 2, "response")]


@pytest.mark.parametrize(("api_key", "version", "kind"), TAGGED_CASES)
@QUICK
@given(data=st.data())
def test_kio_messages_with_tagged_fields_take_the_fast_path(api_key: int, version: int, kind: str,
                                                            data: st.DataObject) -> None:
    _assert_fast_and_same((_kio_frame(api_key, version, kind, data), kind, api_key, version))
