"""The walks compiled per plan find what a full walk finds, on every message of every capture.

`-i`'s errors, topics and change marks and the `errors` table read a body through walks
that look only where the plan says the fields are. The references here walk everything:
the interpreter's tree node by node (error codes, the scopes of the change marks), and the
generic field-name walk over flat values (entity paths, the paths of the summary rules).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kdissect.decode.dissect import message_body
from kdissect.decode.schema import message_plan
from kdissect.decode.tree import Node
from kdissect.decode.walks import chain_path, error_walk
from kdissect.dissectors.everyday import RULES
from kdissect.dissectors.summaries import (
    RuleSummary,
    _alternative,
    _walk,
    entity_paths,
    entity_walks,
)
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.changes import SCOPE_NAMES, ChangeMarker, _state, body_state
from kdissect.present.fields import GENERATED_FIELDS, TreeBody, scoped_structs
from kdissect.present.summary import body_plan
from tests.every_message import count_passing

FUZZ_REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
ENTITY_TYPES = ("topicName", "groupId", "transactionalId", "brokerId", "producerId")
INTEGERS = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32", "varint", "varlong"})


def tree_errors(node: Node, path: str = "") -> Iterator[tuple[str, int]]:
    """(path, code) of every non-zero integer `...ErrorCode` node, depth first; tagged
    fields (never among flat values) and wire scaffolding left out."""
    for child in node.children:
        if child.name in ("tagged_fields", "length", "presence") or child.generated:
            continue
        at = f"{path}.{child.name}" if path else child.name
        if child.type in INTEGERS and child.name.endswith("ErrorCode") and child.value:
            yield at, child.value
        elif child.type.startswith("[]"):
            elements = [c for c in child.children if c.name not in ("length",) and not c.generated]
            for index, element in enumerate(elements):
                yield from tree_errors(element, f"{at}[{index}]")
        elif child.children:
            yield from tree_errors(child, at)


def _check(message: Message) -> bool:
    """Assert every walk agrees with its reference; True when the body was read."""
    plan = body_plan(message)
    body = message.values(keep=False)
    if plan is None or body is None:
        return False
    tree = message_body(message.tree(keep=False))
    assert tree is not None
    found: list[tuple[str, int]] = []
    error_walk(plan)(body, lambda field, code, chain: found.append((chain_path(chain, field), code)))
    assert found == list(tree_errors(tree))
    for entity_type in ENTITY_TYPES:
        walked = [item for walk in entity_walks(plan, entity_type) for item in walk(body)]
        assert walked == [item for path in entity_paths(plan, entity_type) for item in _walk([body], path)]
    if not message.is_request:
        assert body_state(message) == _state(scoped_structs(TreeBody(tree)))
    rules = RULES.get(message.api_key or -1)
    if rules is not None:
        summary = RuleSummary(rules[0] if message.is_request else rules[1])
        for _, paths, _ in summary.rules:
            for path in paths.split("|"):
                walked = _alternative(plan, path)(body)
                assert walked == (_walk([body], path.split(".")) if path else [body]), path
        assert summary.for_plan(plan)(body) == summary(body)
    return True


def test_walks_find_what_the_tree_holds_on_every_shipped_capture(shipped_captures: Path) -> None:
    assert count_passing(sorted(shipped_captures.glob("*.pcap")), _check) > 50


def test_walks_find_what_the_tree_holds_on_every_third_party_capture(public_captures: Path) -> None:
    third_party = sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng"))
    assert count_passing(third_party, _check) > 5


def test_walks_find_what_the_tree_holds_on_every_fuzz_regression() -> None:
    count_passing(sorted(FUZZ_REGRESSIONS.glob("*.pcap")), _check)


def test_no_generated_value_is_read_by_the_change_marks() -> None:
    """The change marks read flat values without the dissectors' generated ones: exact only
    while no generated field bears one of the names they read."""
    assert not set(GENERATED_FIELDS) & set(SCOPE_NAMES)


def test_error_paths_name_array_elements_and_nested_structs() -> None:
    body: dict[str, Any] = {"ErrorCode": 0, "Topics": [
        {"Name": "a", "Partitions": [{"ErrorCode": 0}, {"ErrorCode": 6}]},
        {"Name": "b", "Partitions": [{"ErrorCode": 3}]}]}
    plan = message_plan(3, 12, "response")  # Metadata v12: Topics[].Partitions[].ErrorCode
    assert plan is not None
    metadata = {name: body.get(name) for name in ("ErrorCode", "Topics")}
    found: list[tuple[str, int]] = []
    error_walk(plan.body)(metadata, lambda field, code, chain: found.append((chain_path(chain, field), code)))
    assert found == [("Topics[0].Partitions[1].ErrorCode", 6), ("Topics[1].Partitions[0].ErrorCode", 3)]


def _marks_against_whole_tree_states(path: Path) -> int:
    """Every response's change mark names the previous response (of its connection and API)
    whose tree said something, and appears exactly when a place both name has moved."""
    marker, previous, marked = ChangeMarker(), {}, 0
    for message in read_messages(path):
        mark = marker.marks(message)
        if message.is_request:
            assert mark == ""
            continue
        tree = None if message.pair is None else message_body(message.tree(keep=False))
        state = {} if tree is None else _state(scoped_structs(TreeBody(tree)))
        if not state:
            assert mark == ""
            continue
        where = (message.frame.connection.index, message.api_key)
        before = previous.get(where)
        previous[where] = (message.number, state)
        moved = before is not None and any(p in before[1] and before[1][p] != v for p, v in state.items())
        assert mark.startswith(f" changed since #{before[0]}: ") if moved else mark == "", message.number
        marked += moved
    return marked


def test_change_marks_name_the_previous_response_on_every_shipped_capture(shipped_captures: Path) -> None:
    assert sum(_marks_against_whole_tree_states(path) for path in sorted(shipped_captures.glob("*.pcap"))) >= 3


def test_a_marker_tells_which_responses_a_later_mark_may_name(shipped_captures: Path) -> None:
    """What `--jobs` keeps to put the capture's numbers in the marks its workers make: each
    response that becomes the previous one of its connection and API (`kept`), and the one
    it takes the place of (`dropped`). Kept and not dropped are exactly the responses a mark
    may name next, one per connection and API; every mark names one of them."""
    for path in sorted(shipped_captures.glob("*.pcap")):
        marker, nameable = ChangeMarker(), set()
        for message in read_messages(path):
            mark = marker.marks(message)
            if mark:
                assert marker.named in nameable, (path.name, message.number)
            if marker.dropped:
                nameable.remove(marker.dropped)
            if marker.kept:
                assert marker.kept == message.number
                nameable.add(marker.kept)
            assert nameable == {number for number, _state, _rows in marker._previous.values()}
