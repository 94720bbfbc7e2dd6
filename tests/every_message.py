"""Checks run over every message of a set of captures, for tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

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


T = TypeVar("T")


class TreesBuilt:
    """Which messages' trees a reading builds: `during(read)` runs `read` with
    `Message.tree` counting, into `keys`, the API key of each message it builds one of."""

    def __init__(self, monkeypatch: Any) -> None:
        self.keys: list[int | None] = []
        self.monkeypatch = monkeypatch

    def during(self, read: Callable[[], T]) -> T:
        tree, keys = Message.tree, self.keys

        def counted(message: Message, *, keep: bool = True) -> Any:
            keys.append(message.api_key)
            return tree(message, keep=keep)

        self.monkeypatch.setattr(Message, "tree", counted)
        try:
            return read()
        finally:
            self.monkeypatch.setattr(Message, "tree", tree)
