"""Checks run over every message of a set of captures, for tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from tests.conftest import CAPTURES, PUBLIC_CAPTURES


def count_passing(paths: Iterable[Path], check: Callable[[Message], bool]) -> int:
    """How many messages `check` took (returned True for); a failed assertion names the message."""
    taken = 0
    for path in paths:
        for message in read_messages(path):
            try:
                taken += check(message)
            except AssertionError as problem:
                raise AssertionError(f"{path.name} message {message.number}: {problem}") from None
    return taken


def reading_captures() -> list[Path]:
    """The shipped captures, the fuzz-found ones, and the third-party ones where they are."""
    found = sorted(CAPTURES.glob("*.pcap")) + sorted((CAPTURES.parent / "tests" / "fuzz_regressions").glob("*.pcap"))
    if PUBLIC_CAPTURES.is_dir():
        found += sorted(PUBLIC_CAPTURES.glob("*.pcap*"))
    return found
