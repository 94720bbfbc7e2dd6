"""Filters and `-i`'s change marks read an ordinary body from its flat values, no tree built;
what they read must be exactly what the interpreter's tree holds. Checked on every message of
the shipped, third-party and fuzz-regression captures, path by path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kdissect.decode.dissect import message_body
from kdissect.decode.schema.plan import message_plan
from kdissect.decode.tree import Node
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.fields import (
    Step,
    TreeBody,
    ValuesBody,
    body_fields,
    schema_index,
    scoped_structs,
)
from tests.every_message import count_passing

FUZZ_REGRESSIONS = Path(__file__).parent / "fuzz_regressions"


def _plain(value: Any) -> Any:
    """A struct (a tree node or a dict of values) stands for itself: compare it as a marker."""
    return "<struct>" if isinstance(value, Node | dict) else value


def _paths(names: list[str]) -> Iterator[tuple[Step, ...]]:
    """Every field of the body on its own, with an index, and with each of its sub-fields."""
    children = schema_index().children
    for name in sorted(names):
        yield (Step(name),)
        for index in (0, -1, 5):
            yield (Step(name, index, True),)
        for child in sorted(children.get(name, ())):
            yield Step(name), Step(child)
            yield Step(name, None, True), Step(child)
            yield Step(name, -1, True), Step(child)
            for grandchild in sorted(children.get(child, ()))[:3]:
                yield Step(name, None, True), Step(child, 0, True), Step(grandchild)


def _agree(message: Message) -> bool:
    """Assert both readings agree; True when the message's body took the fast path."""
    fast = body_fields(message)
    if not isinstance(fast, ValuesBody):
        return False
    tree = message_body(message.tree(keep=False))
    assert tree is not None
    reference = TreeBody(tree)
    named = list(reference._named())
    plan = message_plan(message.api_key, message.api_version, message.kind)
    if plan is not None and plan.body.holds_records:
        # Record batches are read as values (`record_values`) by every name a filter takes;
        # what no name reaches (length prefixes, cut entries, control-record fields) is not
        # there. -i's change marks read such a body without its records (`changes`).
        known = schema_index().types
        named = [name for name in named if name in known]
        assert [name for name in fast._named() if name in known] == named
    else:
        assert list(fast._named()) == named
        assert list(scoped_structs(fast)) == list(scoped_structs(reference))
    for path in _paths(named):
        assert [_plain(v) for v in fast.values(path)] == [_plain(v) for v in reference.values(path)], path
    return True


def test_flat_values_read_as_the_tree_on_every_shipped_capture(shipped_captures: Path) -> None:
    assert count_passing(sorted(shipped_captures.glob("*.pcap")), _agree) > 50


def test_flat_values_read_as_the_tree_on_every_third_party_capture(public_captures: Path) -> None:
    third_party = sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng"))
    count_passing(third_party, _agree)


def test_flat_values_read_as_the_tree_on_every_fuzz_regression() -> None:
    count_passing(sorted(FUZZ_REGRESSIONS.glob("*.pcap")), _agree)


def test_a_body_already_kept_as_a_tree_is_read_from_the_tree(shipped_captures: Path) -> None:
    message = next(m for m in read_messages(shipped_captures / "quorum_story.pcap")
                   if not m.is_request and m.api_key == 55)
    assert isinstance(body_fields(message), ValuesBody)
    message.tree()
    assert isinstance(body_fields(message), TreeBody)
