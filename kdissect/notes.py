"""Expert notes: how every stage reports what went wrong, as data.

A note never stops the run. It travels with the thing it is about (a frame, a
tree node, a message) and is shown by the presentation layer, like Wireshark's
expert info.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """How much a note matters, lowest first (Wireshark's expert severities)."""

    CHAT = 0  # normal but worth knowing (a retransmission delivered once)
    NOTE = 1  # unusual (request never answered)
    WARN = 2  # the data is incomplete (a gap, a missing request)
    ERROR = 3  # malformed: the bytes contradict the protocol

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Note:
    """One finding, optionally pinned to a byte offset within its frame."""

    severity: Severity
    message: str
    offset: int | None = None

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at 0x{self.offset:04x}"
        return f"{self.severity}: {self.message}{where}"


def chat(message: str, offset: int | None = None) -> Note:
    return Note(Severity.CHAT, message, offset)


def note(message: str, offset: int | None = None) -> Note:
    return Note(Severity.NOTE, message, offset)


def warn(message: str, offset: int | None = None) -> Note:
    return Note(Severity.WARN, message, offset)


def error(message: str, offset: int | None = None) -> Note:
    return Note(Severity.ERROR, message, offset)
