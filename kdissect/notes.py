"""Expert notes: how every stage reports what went wrong, as data.

A note never stops the run. It travels with the thing it is about (a frame, a
tree node, a message) and is shown by the presentation layer, like Wireshark's
expert info. A note may carry a stable id (`kafka.request_missing`), so that
users filter and count notes by what happened rather than by their wording;
`EXPERT_IDS` lists every id with its severity and meaning.
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
    """One finding, optionally pinned to a byte offset within its frame.

    `id` names the situation (see `EXPERT_IDS`); it is empty where no stable id
    has been given yet.
    """

    severity: Severity
    message: str
    offset: int | None = None
    id: str = ""

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at 0x{self.offset:04x}"
        return f"{self.severity}: {self.message}{where}"


def chat(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.CHAT, message, offset, id)


def note(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.NOTE, message, offset, id)


def warn(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.WARN, message, offset, id)


def error(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.ERROR, message, offset, id)


@dataclass(frozen=True, slots=True)
class ExpertId:
    id: str
    severity: Severity
    meaning: str


# Every stable id, in the order the README's table shows them. An id names one
# situation; its wording may carry details (numbers, names), its id never does.
EXPERT_IDS: tuple[ExpertId, ...] = (
    ExpertId("kafka.request_missing", Severity.WARN,
             "a response whose request is not in the capture (capture started after it, "
             "or its bytes were lost); its body cannot be decoded"),
    ExpertId("kafka.unanswered", Severity.NOTE,
             "a request still unanswered when the capture ends"),
    ExpertId("kafka.response_overdue", Severity.NOTE,
             "a request shown before its answer was seen, because holding it longer would "
             "exceed the hold limits (30 s of capture time, 10,000 messages or 64 MiB); "
             "a response that comes later is still paired with it"),
    ExpertId("kafka.duplicate_correlation_id", Severity.WARN,
             "a request reuses the correlation id of a request still in flight on its connection"),
    ExpertId("kafka.response_out_of_order", Severity.WARN,
             "a response answers a request while an older request of its connection is "
             "still unanswered (Kafka answers in order)"),
    ExpertId("kafka.header_short", Severity.ERROR,
             "a frame too short to hold a Kafka request or response header"),
    ExpertId("kafka.header_cut", Severity.WARN,
             "a request header cut before or inside its client id"),
)
EXPERT = {expert.id: expert for expert in EXPERT_IDS}
