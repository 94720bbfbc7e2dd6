"""Findings: what went wrong in a capture, ranked, with the messages as evidence.

Each detector is a function registered with `@detector`; it reads the public
tables of a `Capture` (`messages`, `exchanges`, `quorum`, `quorum_replicas`,
`producers`, `topic_partitions`, `problems`) through `Evidence` and yields
`Finding`s. Adding a detector for a newly decoded API is one more decorated
function: nothing else changes. Every finding has a stable id (`quorum.voter_lag`),
so people filter and count by id rather than by wording, as with Wireshark's
expert info.

Severities: `high` means something is broken (a partition or quorum without a
leader, a stalled high watermark, a hanging transaction, sequence numbers going
backwards); `medium` is degraded or suspicious (lag, ISR shrink, error bursts,
slow or unanswered requests); `low` is a normal but notable event (a leader
election, a producer epoch bump); `info` is context (an observer joining).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kdissect.decode.schema.plan import StructPlan, message_plan
from kdissect.decode.tree import Node, printable
from kdissect.error_codes import error_name
from kdissect.notes import Note
from kdissect.present.summary import REQUEST_MISSING, plural

if TYPE_CHECKING:
    import pandas as pd

    from kdissect.pair.message import Message
    from kdissect.present.analysis import Capture


class Severity(enum.IntEnum):
    INFO = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that went wrong (or is worth knowing), with its evidence."""

    id: str  # stable kind, e.g. "quorum.voter_lag"
    severity: Severity
    summary: str  # one line; strings from the wire already made printable
    first_time: float  # epoch seconds of the first and last evidence
    last_time: float
    count: int  # how many occurrences the finding stands for
    messages: tuple[int, ...]  # message numbers of the evidence
    connection: int | None = None  # the stream, when one connection holds it all
    details: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """JSON-ready: times as ISO-8601 UTC, the severity as its name."""
        return {"id": self.id, "severity": str(self.severity), "summary": self.summary,
                "first_time": iso_time(self.first_time), "last_time": iso_time(self.last_time),
                "count": self.count, "messages": list(self.messages),
                "connection": self.connection, "details": dict(self.details)}


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a detector speaks up. Each default is documented beside it; change any with
    `--threshold NAME=VALUE` on the command line."""

    slow_ms: float = 1000.0  # an exchange slower than this is slow, whatever its API
    slow_factor: float = 10.0  # ... or slower than this many times its API's median latency
    slow_floor_ms: float = 100.0  # ... and above this (sub-millisecond noise is not slowness)
    error_burst: int = 3  # this many errors of one code for one API, client and topic ...
    error_window_s: float = 60.0  # ... within this many seconds make a burst
    voter_lag: int = 100  # offsets behind the leader's log end offset that count as lagging
    stale_fetch_ms: float = 2000.0  # last fetch older than this (Kafka's quorum fetch timeout)
    hw_stall_responses: int = 3  # high watermark unchanged in this many answers in a row
    transaction_s: float = 60.0  # a transaction open longer (Kafka's transaction.timeout.ms)
    join_storm: int = 10  # JoinGroup requests for one group within error_window_s: a storm
    max_per_kind: int = 50  # findings of one id kept before the rest are summed up

    @classmethod
    def parse(cls, settings: Iterable[str]) -> Thresholds:
        """`NAME=VALUE` pairs over the defaults; ValueError naming the bad one."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for setting in settings:
            name, _, text = setting.partition("=")
            kind = known.get(name.strip())
            if kind is None or not text:
                raise ValueError(f"unknown threshold {setting!r}: use NAME=VALUE, NAME one of "
                                 + ", ".join(known))
            try:
                value = (int if kind.type in ("int", int) else float)(text)
            except ValueError:
                raise ValueError(f"threshold {name} needs a number, not {text!r}") from None
            if not 0 <= value < float("inf"):  # (nan too: it would compare false with everything)
                raise ValueError(f"threshold {name} must be a finite number, not negative")
            changes[kind.name] = value
        return cls(**changes)

    @classmethod
    def describe(cls) -> str:
        return ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(cls))


# -- the detector registry ------------------------------------------------------------

Detector = Callable[["Evidence"], Iterable[Finding]]
DETECTORS: dict[str, Detector] = {}


def detector(name: str) -> Callable[[Detector], Detector]:
    """Register a detector under a name (its finding ids start with the same family)."""

    def register(function: Detector) -> Detector:
        DETECTORS[name] = function
        return function

    return register


# sees each message and its tree (None where the pass read flat values); whether it wants the next
TreeVisitor = Callable[["Message", Node | None], bool]
# sees every message and the flat values the pass read of it (None where it read the tree, or
# the body is not decoded)
ValuesVisitor = Callable[["Message", Any], None]


def find(capture: Capture, thresholds: Thresholds | None = None,
         on_tree: TreeVisitor | None = None) -> list[Finding]:
    """Every detector's findings, most severe first, then in time order.

    `on_tree` sees each message, in message order, with the tree the one pass that
    decodes bodies built of it (None where it read the flat values), until it answers
    False (the report's page is full): a caller that needs the trees too does not
    decode twice.
    """
    return run_detectors(Evidence(capture, thresholds or Thresholds(), on_tree))


def run_detectors(evidence: Evidence) -> list[Finding]:
    """Every detector over `evidence`, without the cycle collector (`cycle_collection_paused`):
    the rows of every exchange and the messages made for them hold no cycles, and the
    collector walked all of them again and again as they piled up (about a second on
    100 MB, a sixth of `--findings`' time)."""
    from kdissect.decode.values import cycle_collection_paused

    with cycle_collection_paused():
        return _run_detectors(evidence)


def _run_detectors(evidence: Evidence) -> list[Finding]:
    if evidence.has_visitor:
        evidence.body_facts  # noqa: B018 -- the one pass that shows the visitor every tree
    else:  # from the messages alone: made while the reading workers, if any, find the facts
        evidence.exchanges  # noqa: B018
    found: list[Finding] = []
    for run in DETECTORS.values():
        found.extend(run(evidence))
    found = _cap_per_kind(found, evidence.thresholds.max_per_kind)
    found.sort(key=lambda f: (-f.severity, f.first_time, f.id, f.messages))
    return found


def _cap_per_kind(found: list[Finding], limit: int) -> list[Finding]:
    """At most `limit` findings per id (the most severe, earliest); the rest summed in one."""
    by_id: dict[str, list[Finding]] = {}
    for item in found:
        by_id.setdefault(item.id, []).append(item)
    kept: list[Finding] = []
    for kind, items in by_id.items():
        items.sort(key=lambda f: (-f.severity, f.first_time))
        kept.extend(items[:limit])
        rest = items[limit:]
        if rest:
            kept.append(Finding(
                kind, max(f.severity for f in rest),
                f"{len(rest)} more {kind} findings like the above",
                min(f.first_time for f in rest), max(f.last_time for f in rest),
                sum(f.count for f in rest), tuple(sorted({n for f in rest for n in f.messages[:5]})),
                details={"summarised": len(rest)}))
    return kept


# -- evidence: the capture's tables and one pass over the bodies ------------------------


@dataclass(frozen=True, slots=True)
class BodyFact:
    """A fact found in a body: an error code, a throttle or wait time, a request's group id."""

    kind: str  # "error", "throttle", "group", "wait"
    time: float
    number: int  # the message's
    stream: int
    api: str
    value: str  # the error's name, the throttle milliseconds, the wait milliseconds
    client_id: str
    topic: str  # the topic the error sits under; for a group id, the group


TABLES_READ = ("quorum", "quorum_replicas", "producers", "topic_partitions")  # the per-API tables read here


def table_read(capture: Capture, name: str) -> pd.DataFrame:
    """One of `TABLES_READ`, made together with the others and without any other per-API
    table (whose bodies nothing here reads)."""
    frame: pd.DataFrame = capture.tables([name, *TABLES_READ])[name]
    return frame


class Evidence:
    """What detectors read: the capture's public tables, plus facts from message bodies."""

    def __init__(self, capture: Capture, thresholds: Thresholds, on_tree: TreeVisitor | None,
                 on_values: ValuesVisitor | None = None):
        self.capture = capture
        self.thresholds = thresholds
        self._on_tree = on_tree
        self._on_values = on_values  # the report's topics, from the same values

    @property
    def has_visitor(self) -> bool:
        return self._on_tree is not None or self._on_values is not None

    def table(self, name: str) -> pd.DataFrame:
        return table_read(self.capture, name)

    @cached_property
    def streams(self) -> dict[int, int]:
        """Message number -> stream."""
        return {m.number: m.frame.connection.index for m in self.capture.message_list}

    @cached_property
    def exchanges(self) -> list[dict[str, Any]]:
        """Answered exchanges from the messages themselves (no body decoded): request and
        response numbers, response time, API, latency, client id, stream, addresses."""
        return exchange_rows(self.capture.message_list)

    @cached_property
    def body_facts(self) -> BodyFacts:
        """Facts from one pass over every message's body (`body_facts_of`): the facts the
        workers that read the capture found, where they found them and no visitor needs
        the pass here."""
        if self._on_tree is None and self._on_values is None:
            found = self.capture.workers_body_facts()
            if found is not None:
                return found
        return body_facts_of(self.capture.message_list, self._on_tree, self._on_values)


def body_facts_of(messages: Iterable[Message], on_tree: TreeVisitor | None = None,
                  on_values: ValuesVisitor | None = None, pause: Callable[[], None] | None = None) -> BodyFacts:
    """Facts from one pass over every message's body (see `BodyFacts`): its flat values
    where the fast path takes it and they hold every fact (no notes then), else the
    interpreter's tree with its notes. `on_tree` and `on_values` see each message, as
    `find` and `Evidence` say. `pause`, when given, is called every `parallel.PAUSE_EVERY`
    messages (a reading worker answers there what it was asked: `parallel.serve_waiting`)."""
    from kdissect.parallel import PAUSE_EVERY

    facts = BodyFacts()
    visitor = on_tree
    for position, message in enumerate(messages, 1):
        if pause is not None and not position % PAUSE_EVERY:
            pause()
        client_id = message.client_id  # a response's is its request's
        problems = [n.message for n in message.all_notes() if int(n.severity) >= _ERROR_NOTE]
        values = message.fast_values(keep=False) if _values_tell(message) else None
        found: Iterator[BodyFact | Note]
        if values is not None:
            tree = None
            found = _walk_values(message, values, client_id or "")
        else:
            tree = message.tree(keep=False)
            found = _walk_body(message, tree, client_id or "")
        if visitor is not None and not visitor(message, tree):
            visitor = None
        if on_values is not None:
            on_values(message, values)
        for fact in found:
            if isinstance(fact, Note):
                if int(fact.severity) >= _ERROR_NOTE:
                    problems.append(fact.message)
            elif fact.kind == "error":
                facts.errors.append(fact)
            elif fact.kind == "throttle":
                facts.throttles.append(fact)
            elif fact.kind == "wait":
                facts.max_wait_ms[message.number] = int(fact.value)
            else:
                facts.group_ids[message.number] = fact.topic
        if problems:
            facts.malformed[message.number] = sorted(set(problems))
    return facts


def renumbered_facts(parts: Sequence[tuple[BodyFacts, Any, Any]]) -> BodyFacts:
    """The facts of several workers' shares as one pass over the whole capture finds them:
    each part's message numbers and streams made the capture's (`numbers[n - 1]`,
    `streams[s]`), and everything in message order (a message's facts, all from one worker,
    keep theirs: the sort is stable)."""
    facts = BodyFacts()
    for part, numbers, streams in parts:
        for name in _FACT_LISTS:
            getattr(facts, name).extend(dataclasses.replace(
                f, number=int(numbers[f.number - 1]), stream=int(streams[f.stream])) for f in getattr(part, name))
        for name in _FACT_MAPS:
            getattr(facts, name).update((int(numbers[n - 1]), value) for n, value in getattr(part, name).items())
    for name in _FACT_LISTS:
        getattr(facts, name).sort(key=lambda fact: fact.number)
    for name in _FACT_MAPS:
        setattr(facts, name, dict(sorted(getattr(facts, name).items())))
    return facts


_FACT_LISTS = ("errors", "throttles")  # of `BodyFacts`: facts in a list, and facts by message number
_FACT_MAPS = ("malformed", "group_ids", "max_wait_ms")


@dataclass(slots=True)
class BodyFacts:
    errors: list[BodyFact] = field(default_factory=list)  # non-zero ErrorCodes in responses
    throttles: list[BodyFact] = field(default_factory=list)  # ThrottleTimeMs > 0 (`value`: ms)
    malformed: dict[int, list[str]] = field(default_factory=dict)  # number -> problems
    group_ids: dict[int, str] = field(default_factory=dict)  # request number -> its GroupId
    max_wait_ms: dict[int, int] = field(default_factory=dict)  # request number -> MaxWaitMs


def exchange_rows(messages: Iterable[Message]) -> list[dict[str, Any]]:
    from kdissect.ingest.net import format_address

    found = []
    answered: dict[int, float] = {}  # per connection: the time of its latest answer so far
    ends: dict[int, tuple[str, str]] = {}  # per connection: its client and server as text
    for response in messages:
        request = response.pair
        if response.is_request or request is None:
            continue
        connection = response.frame.connection
        asked, time = request.time, response.time
        # A broker reads a connection's next request only once it has answered the one
        # before: time between this request and the previous answer was spent queued.
        before = answered.get(id(connection), asked)
        answered[id(connection)] = time
        where = ends.get(id(connection))
        if where is None:
            where = ends[id(connection)] = (format_address(connection.client), format_address(connection.server))
        found.append({"request": request.number, "response": response.number,
                      "time": time, "api_name": response.api_name,
                      "latency_ms": (time - asked) * 1000.0,
                      "queued_ms": max(0.0, min(before, time) - asked) * 1000.0,
                      "client_id": request.client_id or "", "stream": connection.index,
                      "client": where[0], "server": where[1]})
    return found


_ERROR_NOTE = 3  # kdissect.notes.Severity.ERROR: the bytes contradict the protocol


def _walk_body(message: Message, tree: Node, client_id: str) -> Iterator[BodyFact | Note]:
    """In one walk: every note of the tree; in a response every non-zero ErrorCode, TopicErrorCode... (with
    the topic it sits under) and a throttle time; in a request its GroupId."""
    response = not message.is_request
    yield from tree.notes
    stack: list[tuple[Node, str, int]] = [(tree, "", 0)]
    while stack:
        node, topic, depth = stack.pop()
        named = next((c.value for c in node.children if c.name in _TOPIC_FIELDS
                      and isinstance(c.value, str)), None) if response else None
        topic = named if named is not None else topic
        for child in node.children:
            if child.notes:
                yield from child.notes
            if child.children:
                stack.append((child, topic, depth + 1))
            elif depth == 1 and child.name in _BODY_FACTS and (response != (child.name in _ASKED)):
                yield from _top_fact(message, child.name, child.value, client_id)
            value = child.value
            if response and child.name.endswith("ErrorCode") and isinstance(value, int) and value != 0:
                yield _fact(message, "error", error_name(value), client_id, topic)


def _walk_values(message: Message, values: dict[str, Any], client_id: str) -> Iterator[BodyFact]:
    """`_walk_body`'s facts, in its order, from the flat values of a body the fast path took
    (which has no notes), for a definition whose tagged fields hold none of them
    (`_values_tell`): each struct's fields in order, what lies under them once its own are
    seen, the last seen first, as the tree's walk takes them."""
    response = not message.is_request
    assert message.api_key is not None and message.api_version is not None
    plan = message_plan(message.api_key, message.api_version, message.kind)
    assert plan is not None
    stack: list[tuple[Any, StructPlan, str, bool]] = [(values, plan.body, "", True)]
    while stack:
        found, struct, topic, top = stack.pop()
        if isinstance(found, list):  # an array's struct items
            stack.extend((item, struct, topic, False) for item in found)
            continue
        if response:
            topic = next((value for f in struct.fields if f.name in _TOPIC_FIELDS
                          and isinstance(value := found[f.name], str)), topic)
        for member in struct.fields:
            name, value, element = member.name, found[member.name], member.element
            if member.struct is not None and value is not None:
                stack.append((value, member.struct, topic, False))
            elif element is not None and element.struct is not None and value:
                stack.append((value, element.struct, topic, False))
            elif top and name in _BODY_FACTS and (response != (name in _ASKED)):
                yield from _top_fact(message, name, value, client_id)
            if response and type(value) is int and value != 0 and name.endswith("ErrorCode"):
                yield _fact(message, "error", error_name(value), client_id, topic)


def _top_fact(message: Message, name: str, value: Any, client_id: str) -> Iterator[BodyFact]:
    if name == "GroupId" and isinstance(value, str):
        yield _fact(message, "group", "", client_id, value)
    elif name == "MaxWaitMs" and isinstance(value, int):
        yield _fact(message, "wait", str(value), client_id, "")
    elif name == "ThrottleTimeMs" and isinstance(value, int) and value > 0:
        yield _fact(message, "throttle", str(value), client_id, "")


def _fact(message: Message, kind: str, value: str, client_id: str, topic: str) -> BodyFact:
    return BodyFact(kind, message.time, message.number, message.frame.connection.index,
                    message.api_name or "?", value, client_id, topic)


def _values_tell(message: Message) -> bool:
    """Whether a body's flat values give every fact its tree does, in its order. The tree
    holds tagged fields deeper, under their block's entries, and `_walk_values` reads only
    the untagged ones: so not where a tagged field (at any depth, or under one) is an
    error code or a fact read at the top of a body, nor where one names a topic in a
    struct holding error codes; nor where a struct or an array is named as a fact is."""
    key, version = message.api_key, message.api_version
    return key is not None and version is not None and _plan_values_tell(key, version, message.kind)


@functools.cache
def _plan_values_tell(api_key: int, version: int, kind: str) -> bool:
    plan = message_plan(api_key, version, kind)
    return plan is not None and _struct_values_tell(plan.body, tagged=False)


def _struct_values_tell(struct: StructPlan, *, tagged: bool) -> bool:
    fields = [(f, tagged) for f in struct.fields] + [(f, True) for f in struct.tagged.values()]
    for member, hidden in fields:
        inner = member.element.struct if member.element is not None else member.struct
        fact = member.name in _BODY_FACTS or member.name.endswith("ErrorCode")
        if (fact or member.name in _TOPIC_FIELDS) and (inner is not None or member.element is not None):
            return False
        if hidden and (fact or (member.name in _TOPIC_FIELDS and _holds_error_codes(struct))):
            return False
        if inner is not None and not _struct_values_tell(inner, tagged=hidden):
            return False
    return True


def _holds_error_codes(struct: StructPlan) -> bool:
    """Whether an error code is a field of `struct` or of any struct under it, tagged or not."""
    for member in (*struct.fields, *struct.tagged.values()):
        inner = member.element.struct if member.element is not None else member.struct
        if member.name.endswith("ErrorCode") or (inner is not None and _holds_error_codes(inner)):
            return True
    return False


_BODY_FACTS = frozenset({"ThrottleTimeMs", "GroupId", "MaxWaitMs"})  # top of a body only
_ASKED = frozenset({"GroupId", "MaxWaitMs"})  # read in requests; the rest in responses
_TOPIC_FIELDS = frozenset({"Name", "TopicName", "Topic"})


# -- small helpers over tables ----------------------------------------------------------


def rows(frame: pd.DataFrame, columns: Iterable[str]) -> list[dict[str, Any]]:
    """Rows as dicts with plain Python values: missing -> None, times -> epoch seconds."""
    import pandas as pd

    picked = {}
    for name in columns:
        column = frame[name]
        if isinstance(column.dtype, pd.DatetimeTZDtype):
            picked[name] = _epoch_seconds(column)
        else:
            picked[name] = [None if v is pd.NA or v is None or v != v else v
                            for v in column.astype(object).tolist()]
    names = list(picked)
    return [dict(zip(names, values, strict=True)) for values in zip(*picked.values(), strict=True)]


def _epoch_seconds(column: pd.Series) -> list[float | None]:
    """A time column as epoch seconds. A column of microseconds (a body's timestamps) may
    hold times beyond what nanoseconds reach (year 2262): those are divided in their own
    unit."""
    import pandas as pd

    try:
        seconds = (column - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    except (pd.errors.OutOfBoundsDatetime, OverflowError):
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[column.dtype.unit]
        ticks, missing = column.array.asi8.tolist(), column.isna().tolist()
        return [None if gone else tick / per_second for tick, gone in zip(ticks, missing, strict=True)]
    return [None if v != v else float(v) for v in seconds.tolist()]


def _finding(kind: str, severity: Severity, summary: str, evidence: list[dict[str, Any]],
             streams: Mapping[int, int], count: int | None = None, **details: Any) -> Finding:
    """A finding from rows that carry `time` and the message `number`; `count` defaults to the rows."""
    numbers = tuple(sorted({int(row["number"]) for row in evidence}))
    times = [row["time"] for row in evidence if row["time"] is not None]
    connections = {streams.get(n) for n in numbers}
    return Finding(kind, severity, summary, min(times), max(times),
                   len(evidence) if count is None else count, numbers,
                   connections.pop() if len(connections) == 1 else None, details)


def _brokers(brokers: Sequence[int]) -> str:
    return f"broker {brokers[0]}" if len(brokers) == 1 else f"brokers {', '.join(map(str, brokers))}"


def episodes(series: list[dict[str, Any]], active: Callable[[dict[str, Any]], bool],
             ) -> Iterator[list[dict[str, Any]]]:
    """Runs of consecutive rows for which `active` holds."""
    run: list[dict[str, Any]] = []
    for row in series:
        if active(row):
            run.append(row)
        elif run:
            yield run
            run = []
    if run:
        yield run


def grouped(items: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Rows grouped by the values of `keys`, each group in its original (time) order."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for item in items:
        groups.setdefault(tuple(item[k] for k in keys), []).append(item)
    return groups


def _topic_partition(topic: Any, partition: Any) -> str:
    return f"{printable(str(topic))}-{partition}"


# -- traffic ----------------------------------------------------------------------------

_NOTE_KINDS = (  # message note ids -> (finding id, severity, (noun, what it means))
    ("kafka.unanswered", "traffic.unanswered", Severity.MEDIUM, ("request", "never answered")),
    ("kafka.request_missing", "traffic.response_without_request", Severity.LOW,
     ("response", "whose request is not in the capture")),
    ("tcp.lost_bytes", "capture.gap", Severity.MEDIUM, ("message", "cut by lost bytes")),
    ("kafka.frame_incomplete", "capture.gap", Severity.MEDIUM, ("message", "cut by lost bytes")),
    ("kafka.response_out_of_order", "traffic.out_of_order", Severity.MEDIUM,
     ("response", "out of request order")),
    ("kafka.duplicate_correlation_id", "traffic.duplicate_correlation", Severity.MEDIUM,
     ("request", "reusing a correlation id still in flight")),
)
_MISSING_BYTES = re.compile(r"(\d+) bytes missing|ends (\d+) bytes before")


@detector("traffic.notes")
def note_findings(evidence: Evidence) -> Iterator[Finding]:
    """Unanswered requests, responses without requests, gaps: one finding per connection."""
    buckets: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for message in evidence.capture.message_list:
        if not (message.notes or message.frame.notes):
            continue
        found = message.all_notes()
        ids = {n.id for n in found}
        if "kafka.response_overdue" in ids and message.is_request and message.pair is None:
            ids.add("kafka.unanswered")  # shown before the capture ended (hold limit), never answered
        text = "; ".join(n.message for n in found)
        for expert_id, kind, _, _ in _NOTE_KINDS:
            if expert_id in ids:
                stream = message.frame.connection.index
                buckets.setdefault((kind, stream), []).append(
                    {"number": message.number, "time": message.time, "notes": text})
                break
    meaning = {kind: (severity, said) for _, kind, severity, said in _NOTE_KINDS}
    for (kind, stream), items in buckets.items():
        severity, (noun, rest) = meaning[kind]
        details: dict[str, Any] = {}
        if kind == "capture.gap":
            details["lost_bytes"] = sum(int(a or b) for r in items
                                        for a, b in _MISSING_BYTES.findall(r["notes"]))
        summary = f"{plural(len(items), noun)} {rest} on stream {stream}"
        if details:
            summary += f" ({details['lost_bytes']} bytes lost)"
        yield _finding(kind, severity, summary, items, evidence.streams, **details)


_UNDECRYPTED = frozenset({"tls.no_keys", "tls.not_decrypted", "tls.unsupported"})


@detector("capture.problems")
def capture_problems(evidence: Evidence) -> Iterator[Finding]:
    """No Kafka found, TLS on a Kafka port, cut or corrupt capture files (not tied to a
    message). Without messages they are placed at the capture's first packet."""
    problems = evidence.capture.problems
    tls = [p.message for p in problems if p.id in _UNDECRYPTED]
    none_found = [p.message for p in problems if p.id == "kafka.none_found"]
    other = [p.message for p in problems if p.id not in _UNDECRYPTED and p.id != "kafka.none_found"]
    messages = evidence.capture.message_list
    first = evidence.capture.start or 0.0
    start, end = (messages[0].time, messages[-1].time) if messages else (first, first)
    if none_found:  # nothing else can be said of such a capture: said first
        yield Finding("capture.no_kafka", Severity.MEDIUM, printable(none_found[0]), start, end, len(none_found),
                      (), None, {"problems": [printable(t) for t in none_found]})
    if tls:
        yield Finding("capture.tls", Severity.MEDIUM,
                      f"TLS on a Kafka port: {plural(len(tls), 'connection')} cannot be decoded",
                      start, end, len(tls), (), None, {"connections": [printable(t) for t in tls]})
    if other:
        yield Finding("capture.damaged", Severity.MEDIUM,
                      f"{plural(len(other), 'capture file problem')}: {printable(other[0])}",
                      start, end, len(other), (), None, {"problems": [printable(t) for t in other]})


@detector("traffic.malformed")
def malformed(evidence: Evidence) -> Iterator[Finding]:
    broken = evidence.body_facts.malformed
    if not broken:
        return
    found = [{"number": n, "time": evidence.capture.message(n).time,
              "api_name": evidence.capture.message(n).api_name} for n in sorted(broken)]
    for api, items in grouped(found, "api_name").items():
        first = broken[items[0]["number"]][0]
        yield _finding("traffic.malformed", Severity.MEDIUM,
                       f"{plural(len(items), f'malformed {api[0] or REQUEST_MISSING} message')}, first: "
                       f"{printable(first)}", items, evidence.streams,
                       api=api[0], problems=sorted({p for r in items for p in broken[r["number"]]})[:10])


@detector("traffic.slow")
def slow_exchanges(evidence: Evidence) -> Iterator[Finding]:
    """Exchanges slower than the absolute threshold, or far slower than their API usually is.
    An exchange is judged on the broker's own time: from its request, or from the answer
    to the request before it on the connection when that came later (a broker answers a
    connection's requests one at a time, so a request pipelined behind a slow one waits
    without being slow itself). A request that asks the broker to wait (Fetch's
    MaxWaitMs, once its body is decoded) is judged on the time beyond that wait; the
    finding then gives both, the latency as the message list shows it and the time
    beyond the wait."""
    limits = evidence.thresholds
    waits = evidence.body_facts.max_wait_ms  # long polls (Fetch) may wait this long by design
    found = [{**r, "beyond_ms": r["latency_ms"] - r["queued_ms"] - max(waits.get(r["request"], 0), 0)}
             for r in evidence.exchanges]
    for (api,), items in grouped(found, "api_name").items():
        ordered = sorted(r["beyond_ms"] for r in items)
        median = ordered[len(ordered) // 2]
        slow = [r for r in items if r["beyond_ms"] > limits.slow_ms
                or (len(items) >= 10 and r["beyond_ms"] > limits.slow_floor_ms
                    and r["beyond_ms"] > limits.slow_factor * median)]
        if not slow:
            continue
        evidence_rows = [{"time": r["time"], "number": r["request"]} for r in slow]
        evidence_rows += [{"time": r["time"], "number": r["response"]} for r in slow]
        worst = max(slow, key=lambda r: r["beyond_ms"])
        details: dict[str, Any] = {"api": api, "worst_ms": round(worst["latency_ms"], 3)}
        slowest = f"{plural(len(slow), f'slow {api} exchange')}: up to {worst['latency_ms']:.1f} ms"
        if worst["queued_ms"] > 0:
            slowest += f" ({worst['queued_ms']:.1f} ms of it queued behind earlier requests of its connection)"
            details["worst_queued_ms"] = round(worst["queued_ms"], 3)
        if any(waits.get(r["request"], 0) > 0 for r in items):  # judged beyond the waits asked for
            summary = (f"{slowest}, "
                       f"{worst['beyond_ms']:.1f} ms beyond the wait its request allowed "
                       f"(median beyond the wait {median:.1f} ms over {len(items)})")
            details.update(worst_beyond_wait_ms=round(worst["beyond_ms"], 3), median_beyond_wait_ms=round(median, 3))
        else:
            summary = (f"{slowest} "
                       f"(median {median:.1f} ms over {len(items)})")
            details["median_ms"] = round(median, 3)
        yield _finding("traffic.slow", Severity.MEDIUM, summary, evidence_rows, evidence.streams,
                       count=len(slow), **details)


@detector("traffic.errors")
def error_bursts(evidence: Evidence) -> Iterator[Finding]:
    """Error codes by API, client and topic: a burst is medium, a few are low."""
    limits = evidence.thresholds
    items = [dataclasses.asdict(e) for e in evidence.body_facts.errors]
    for (api, error, client, topic), group in grouped(items, "api", "value", "client_id",
                                                       "topic").items():
        burst = _densest(group, limits.error_window_s)
        where = f" on {printable(topic)}" if topic else ""
        who = f" to client {printable(client)}" if client else ""
        if len(burst) >= limits.error_burst:
            yield _finding("traffic.error_burst", Severity.MEDIUM,
                           f"{len(burst)} {error} errors in {api} answers{who}{where} within "
                           f"{burst[-1]['time'] - burst[0]['time']:.1f} s", burst,
                           evidence.streams, api=api, error=error, client_id=client, topic=topic)
        else:
            yield _finding("traffic.errors", Severity.LOW,
                           f"{plural(len(group), f'{error} error')} in {api} answers{who}{where}", group,
                           evidence.streams, api=api, error=error, client_id=client, topic=topic)


@detector("traffic.throttle")
def throttling(evidence: Evidence) -> Iterator[Finding]:
    """Answers asking the client to back off (ThrottleTimeMs > 0), by API and client."""
    items = [dataclasses.asdict(e) for e in evidence.body_facts.throttles]
    for (api, client), group in grouped(items, "api", "client_id").items():
        worst = max(int(r["value"]) for r in group)
        who = f" to client {printable(client)}" if client else ""
        yield _finding("traffic.throttled", Severity.MEDIUM,
                       f"{plural(len(group), f'throttled {api} answer')}{who}, up to {worst} ms", group,
                       evidence.streams, api=api, client_id=client, worst_ms=worst)


JOIN_GROUP = 11


@detector("groups.join_storm")
def join_group_storms(evidence: Evidence) -> Iterator[Finding]:
    """Many JoinGroup requests for one group in a short time: a rebalance storm. Read from
    the headers, so it works before JoinGroup bodies are decoded (the group is then '?')."""
    limits = evidence.thresholds
    groups = evidence.body_facts.group_ids
    joins = [{"time": m.time, "number": m.number, "client": m.client_id or "",
              "group": groups.get(m.number, "?")}
             for m in evidence.capture.message_list if m.is_request and m.api_key == JOIN_GROUP]
    for (group,), items in grouped(joins, "group").items():
        burst = _densest(items, limits.error_window_s)
        if len(burst) < limits.join_storm:
            continue
        clients = sorted({r["client"] for r in burst})
        yield _finding("groups.join_storm", Severity.MEDIUM,
                       f"group {printable(group)}: {len(burst)} JoinGroup requests from "
                       f"{plural(len(clients), 'client id')} "
                       f"within {burst[-1]['time'] - burst[0]['time']:.1f} s",
                       burst, evidence.streams, group=group, clients=clients[:20])


FIND_COORDINATOR = 10
COORDINATOR_ERRORS = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"})
_KEY_TYPES = {0: "group", 1: "transactional id", 2: "share group"}


def coordinator_answers(evidence: Evidence) -> list[dict[str, Any]]:
    """Per key, in time order: each coordinator a FindCoordinator answer names (`node`,
    `address`), each it refuses, and each NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE a
    group's other answers give (`error`, node None)."""
    found = []
    for response in evidence.capture.message_list:
        request = response.pair
        if response.is_request or response.api_key != FIND_COORDINATOR or request is None:
            continue
        body, asked = response.values(keep=False), request.values(keep=False)
        if body is None or asked is None:
            continue
        answers = body.get("Coordinators")
        if not isinstance(answers, list):  # v0-3: one key, answered at the top level
            answers = [{**body, "Key": asked.get("Key")}]
        for answer in answers:
            error = answer.get("ErrorCode") or 0
            found.append({"time": response.time, "number": response.number, "key": answer.get("Key"),
                          "key_type": asked.get("KeyType", 0), "node": None if error else answer.get("NodeId"),
                          "address": None if error else f"{answer.get('Host')}:{answer.get('Port')}",
                          "error": error_name(error) if error else None})
    groups = evidence.body_facts.group_ids
    for fact in evidence.body_facts.errors:
        request = evidence.capture.message(fact.number).pair
        group = None if request is None else groups.get(request.number)
        if fact.value in COORDINATOR_ERRORS and group is not None:
            found.append({"time": fact.time, "number": fact.number, "key": group, "key_type": 0,
                          "node": None, "address": None, "error": fact.value})
    return sorted(found, key=lambda r: (r["time"], r["number"]))


@detector("groups.coordinator")
def coordinator_moves(evidence: Evidence) -> Iterator[Finding]:
    """A coordinator named at another node or address than the one before for the same key:
    low, or medium when clients saw NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE in between.
    The evidence is those errors and the answer naming the new coordinator."""
    for (key_type, key), series in grouped(coordinator_answers(evidence), "key_type", "key").items():
        if key is None:
            continue
        before: dict[str, Any] | None = None
        troubles: list[dict[str, Any]] = []
        for row in series:
            if row["node"] is None:
                troubles.append(row)
                continue
            if before is not None and (row["node"], row["address"]) != (before["node"], before["address"]):
                errors = sorted({r["error"] for r in troubles})
                after = f" after {plural(len(troubles), '/'.join(errors) + ' answer')}" if troubles else ""
                yield _finding("groups.coordinator_moved", Severity.MEDIUM if troubles else Severity.LOW,
                               f"{_KEY_TYPES.get(key_type, 'key')} {printable(str(key))}: coordinator "
                               f"{before['node']} ({printable(before['address'])}) -> {row['node']} "
                               f"({printable(row['address'])}){after}", [*troubles, row], evidence.streams,
                               count=1, key=key, key_type=key_type, node_from=before["node"],
                               node_to=row["node"], address_from=before["address"],
                               address_to=row["address"], errors=errors, since_message=before["number"])
            before, troubles = row, []


def _densest(items: list[dict[str, Any]], window: float) -> list[dict[str, Any]]:
    """The largest run of items whose times fit in `window` seconds."""
    best: list[dict[str, Any]] = []
    start = 0
    for end in range(len(items)):
        while items[end]["time"] - items[start]["time"] > window:
            start += 1
        if end - start + 1 > len(best):
            best = items[start : end + 1]
    return best


# -- quorum (DescribeQuorum) ------------------------------------------------------------


def voter_lags(capture: Capture) -> list[dict[str, Any]]:
    """Each voter's lag in each DescribeQuorum answer, by Kafka's definition: the leader's
    log end offset minus the replica's. The leader itself has lag 0; an answer without a
    known leader gives no lags."""
    replicas = rows(table_read(capture, "quorum_replicas"), (
        "time", "number", "topic_name", "partition_index", "role", "replica_id", "log_end_offset", "leader_id",
        "leader_epoch"))
    lags = []
    for group in grouped(replicas, "number", "topic_name", "partition_index").values():
        leader_end = next((r["log_end_offset"] for r in group if r["role"] == "leader"), None)
        if leader_end is None:
            continue
        for r in group:
            if r["role"] in ("leader", "voter") and r["log_end_offset"] is not None:
                lags.append({**r, "lag": leader_end - r["log_end_offset"]})
    return lags


@detector("quorum.leader")
def quorum_leaders(evidence: Evidence) -> Iterator[Finding]:
    """Leader changes and epoch bumps (low), answers with no leader (high)."""
    quorum = rows(evidence.table("quorum"), ("time", "number", "topic_name", "partition_index", "leader_id",
                                             "leader_epoch"))
    for (topic, partition), series in grouped(quorum, "topic_name", "partition_index").items():
        name = _topic_partition(topic, partition)
        for before, after in itertools.pairwise(series):
            if (before["leader_id"], before["leader_epoch"]) != (after["leader_id"], after["leader_epoch"]):
                yield _finding("quorum.leader_change", Severity.LOW,
                               f"{name}: leader {_id(before['leader_id'])} -> {_id(after['leader_id'])}, "
                               f"epoch {before['leader_epoch']} -> {after['leader_epoch']}",
                               [before, after], evidence.streams, count=1, topic=topic,
                               partition=partition, leader_from=before["leader_id"], leader_to=after["leader_id"],
                               epoch_from=before["leader_epoch"], epoch_to=after["leader_epoch"])
        for run in episodes(series, lambda r: r["leader_id"] is None):
            yield _finding("quorum.no_leader", Severity.HIGH,
                           f"{name}: no quorum leader in {plural(len(run), 'answer')} (epoch "
                           f"{run[0]['leader_epoch']})", run, evidence.streams, topic=topic,
                           partition=partition)


def _id(value: Any) -> str:
    return "none" if value is None else str(value)


@detector("quorum.lag")
def quorum_voter_lag(evidence: Evidence) -> Iterator[Finding]:
    """Voter lag episodes: start, end, peak; high when a majority of voters lags at once."""
    limit = evidence.thresholds.voter_lag
    lags = voter_lags(evidence.capture)
    lagging_per_answer: dict[int, int] = {}
    voters_per_answer: dict[int, int] = {}
    for r in lags:
        voters_per_answer[r["number"]] = voters_per_answer.get(r["number"], 0) + 1
        lagging_per_answer[r["number"]] = lagging_per_answer.get(r["number"], 0) + (r["lag"] > limit)
    for (topic, partition, replica), series in grouped(lags, "topic_name", "partition_index",
                                                        "replica_id").items():
        for run in episodes(series, lambda r: r["lag"] > limit):
            peak = max(run, key=lambda r: r["lag"])
            majority = any(2 * lagging_per_answer[r["number"]] > voters_per_answer[r["number"]]
                           for r in run)
            ended = run[-1] is not series[-1]
            yield _finding("quorum.voter_lag", Severity.HIGH if majority else Severity.MEDIUM,
                           f"{_topic_partition(topic, partition)}: voter {replica} lagged up to "
                           f"{peak['lag']} offsets behind the leader's log end offset in "
                           f"{plural(len(run), 'answer')}" + ("" if ended else ", still at the end")
                           + ("; a majority of voters lagged" if majority else ""),
                           run, evidence.streams, topic=topic, partition=partition,
                           replica_id=replica, peak_lag=peak["lag"], peak_message=peak["number"],
                           majority_lagging=majority, ended=ended)


@detector("quorum.fetch")
def quorum_stale_fetchers(evidence: Evidence) -> Iterator[Finding]:
    """Replicas whose last fetch is older than the threshold when the leader answered."""
    limit_s = evidence.thresholds.stale_fetch_ms / 1000.0
    replicas = rows(evidence.table("quorum_replicas"), (
        "time", "number", "topic_name", "partition_index", "role", "replica_id", "last_fetch_timestamp",
        "last_caught_up_timestamp"))
    # "Now" on the leader's clock: the latest time the answer mentions (the leader's own
    # caught-up time is its clock at the answer), so clock skew between the broker and the
    # capturing host does not make fetchers look stale; the capture time when none is given.
    leader_now: dict[int, float] = {}
    for r in replicas:
        for stamp in (r["last_fetch_timestamp"], r["last_caught_up_timestamp"]):
            if stamp is not None:
                leader_now[r["number"]] = max(leader_now.get(r["number"], stamp), stamp)
    followers = [{**r, "since": leader_now.get(r["number"], r["time"]) - r["last_fetch_timestamp"]}
                 for r in replicas if r["role"] != "leader" and r["last_fetch_timestamp"] is not None]
    for (topic, partition, replica, role), series in grouped(
            followers, "topic_name", "partition_index", "replica_id", "role").items():
        for run in episodes(series, lambda r: r["since"] > limit_s):
            worst = max(r["since"] for r in run)
            yield _finding("quorum.stale_fetch", Severity.HIGH if role == "voter" else Severity.MEDIUM,
                           f"{_topic_partition(topic, partition)}: {role} {replica} last fetched "
                           f"up to {worst:.1f} s before the answer, in {plural(len(run), 'answer')}",
                           run, evidence.streams, topic=topic, partition=partition,
                           replica_id=replica, role=role, worst_seconds=round(worst, 3))


@detector("quorum.observers")
def quorum_observers(evidence: Evidence) -> Iterator[Finding]:
    """Observers joining or leaving the quorum's answer (info)."""
    replicas = rows(evidence.table("quorum_replicas"), (
        "time", "number", "topic_name", "partition_index", "role", "replica_id"))
    answers = grouped(replicas, "topic_name", "partition_index", "number")
    previous: dict[tuple[Any, Any], tuple[dict[str, Any], set[int]]] = {}
    for (topic, partition, _), group in answers.items():
        seen = {r["replica_id"] for r in group if r["role"] == "observer"}
        earlier = previous.get((topic, partition))
        previous[(topic, partition)] = (group[0], seen)
        if earlier is None:
            continue
        for change, ids in (("joined", seen - earlier[1]), ("left", earlier[1] - seen)):
            for replica in sorted(ids):
                yield _finding(f"quorum.observer_{change}", Severity.INFO,
                               f"{_topic_partition(topic, partition)}: observer {replica} {change}",
                               [earlier[0], group[0]], evidence.streams, count=1, topic=topic,
                               partition=partition, replica_id=replica)


@detector("quorum.high_watermark")
def quorum_high_watermark(evidence: Evidence) -> Iterator[Finding]:
    """A high watermark that stops while the leader's log keeps growing (high)."""
    ends = {(r["number"], r["topic_name"], r["partition_index"]): r["log_end_offset"] for r in rows(
        evidence.table("quorum_replicas"), ("number", "topic_name", "partition_index", "role",
                                            "log_end_offset")) if r["role"] == "leader"}
    quorum = rows(evidence.table("quorum"), ("time", "number", "topic_name", "partition_index",
                                             "high_watermark"))
    for (topic, partition), series in grouped(quorum, "topic_name", "partition_index").items():
        marked = []
        for before, after in itertools.pairwise(series):
            end_before = ends.get((before["number"], topic, partition))
            end_after = ends.get((after["number"], topic, partition))
            stalled = (after["high_watermark"] is not None
                       and after["high_watermark"] == before["high_watermark"]
                       and end_before is not None and end_after is not None
                       and end_after > end_before)
            marked.append({**after, "stalled": stalled, "leader_end": end_after,
                           "first": {**before, "leader_end": end_before}})
        for run in episodes(marked, lambda r: r["stalled"]):
            answers = [run[0]["first"], *run]  # every answer showing the stuck value, the first too
            if len(answers) < evidence.thresholds.hw_stall_responses:
                continue
            grown = (run[-1]["leader_end"] or 0) - (answers[0]["leader_end"] or 0)
            yield _finding("quorum.hw_stall", Severity.HIGH,
                           f"{_topic_partition(topic, partition)}: high watermark stuck at "
                           f"{run[0]['high_watermark']} in {len(answers)} answers while the "
                           f"leader's log grew by {grown}", answers, evidence.streams, topic=topic,
                           partition=partition, high_watermark=run[0]["high_watermark"],
                           leader_log_growth=grown)


# -- producers (DescribeProducers) ------------------------------------------------------

_PRODUCER_COLUMNS = ("time", "number", "topic_name", "partition_index", "producer_id", "producer_epoch",
                     "last_sequence", "current_txn_start_offset")


def _producer_rows(capture: Capture) -> list[dict[str, Any]]:
    return [r for r in rows(table_read(capture, "producers"), _PRODUCER_COLUMNS) if r["producer_id"] is not None]


def transaction_ages(capture: Capture) -> list[dict[str, Any]]:
    """For every answer showing an open transaction: how long it has been seen open
    (since the first answer that showed the same start offset), in seconds."""
    ages = []
    for _, series in grouped(_producer_rows(capture), "producer_id", "topic_name", "partition_index").items():
        opened: tuple[Any, float] | None = None
        for r in series:
            start = r["current_txn_start_offset"]
            if start is None:
                opened = None
                continue
            if opened is None or opened[0] != start:
                opened = (start, r["time"])
            ages.append({**r, "age": r["time"] - opened[1]})
    return ages


@detector("producers")
def producer_findings(evidence: Evidence) -> Iterator[Finding]:
    """Epoch bumps (low), sequence numbers going backwards within an epoch (high)."""
    found = _producer_rows(evidence.capture)
    for (producer,), series in grouped(found, "producer_id").items():
        for before, after in itertools.pairwise(series):
            if (after["producer_epoch"] or 0) > (before["producer_epoch"] or 0):
                yield _finding("producer.epoch_bump", Severity.LOW,
                               f"producer {producer}: epoch {before['producer_epoch']} -> "
                               f"{after['producer_epoch']}", [before, after], evidence.streams,
                               count=1, producer_id=producer, epoch_from=before["producer_epoch"],
                               epoch_to=after["producer_epoch"])
    for (producer, topic, partition), series in grouped(found, "producer_id", "topic_name",
                                                         "partition_index").items():
        for before, after in itertools.pairwise(series):
            if (after["producer_epoch"] == before["producer_epoch"]
                    and after["last_sequence"] is not None and before["last_sequence"] is not None
                    and after["last_sequence"] < before["last_sequence"]
                    and before["last_sequence"] < _SEQUENCE_WRAP):
                yield _finding("producer.sequence_backwards", Severity.HIGH,
                               f"producer {producer} on {_topic_partition(topic, partition)}: "
                               f"sequence {before['last_sequence']} -> {after['last_sequence']} "
                               f"in epoch {after['producer_epoch']}", [before, after],
                               evidence.streams, count=1, producer_id=producer, topic=topic,
                               partition=partition, sequence_from=before["last_sequence"],
                               sequence_to=after["last_sequence"])


_SEQUENCE_WRAP = 2**31 - 2**20  # sequences near int32's end wrap to 0: not going backwards


@detector("producers.transactions")
def open_transactions(evidence: Evidence) -> Iterator[Finding]:
    """Transactions seen open longer than the threshold (high: read_committed consumers stall)."""
    limit = evidence.thresholds.transaction_s
    ages = transaction_ages(evidence.capture)
    for (producer, topic, partition, start), series in grouped(
            ages, "producer_id", "topic_name", "partition_index", "current_txn_start_offset").items():
        oldest = max(r["age"] for r in series)
        if oldest <= limit:
            continue
        yield _finding("producer.open_transaction", Severity.HIGH,
                       f"producer {producer} on {_topic_partition(topic, partition)}: transaction "
                       f"from offset {start} open at least {oldest:.1f} s", series,
                       evidence.streams, producer_id=producer, topic=topic, partition=partition,
                       start_offset=start, open_seconds=round(oldest, 3))


# -- partitions (DescribeTopicPartitions) ------------------------------------------------

_PARTITION_COLUMNS = ("time", "number", "level", "topic_name", "partition_index", "partition_error",
                      "leader_id", "isr_nodes", "eligible_leader_replicas", "offline_replicas")


def _partition_rows(capture: Capture) -> list[dict[str, Any]]:
    found = rows(table_read(capture, "topic_partitions"), _PARTITION_COLUMNS)
    return [{**r, **{k: tuple(r[k] or ()) for k in _PARTITION_COLUMNS[-3:]}} for r in found
            if r["level"] == "partition" and r["partition_error"] in (None, "NONE")]


@detector("partitions")
def partition_findings(evidence: Evidence) -> Iterator[Finding]:
    """Leaderless partitions and eligible leader replicas in use (high)."""
    series_by_partition = grouped(_partition_rows(evidence.capture), "topic_name", "partition_index")
    for (topic, partition), series in series_by_partition.items():
        name = _topic_partition(topic, partition)
        for run in episodes(series, lambda r: r["leader_id"] is None):
            yield _finding("partition.leaderless", Severity.HIGH,
                           f"{name}: no leader in {plural(len(run), 'answer')}", run, evidence.streams,
                           topic=topic, partition=partition)
        for run in episodes(series, lambda r: bool(r["eligible_leader_replicas"])):
            elr = sorted({b for r in run for b in r["eligible_leader_replicas"]})
            yield _finding("partition.elr_in_use", Severity.HIGH,
                           f"{name}: ISR below min.insync.replicas, eligible leader replicas "
                           f"{elr} in {plural(len(run), 'answer')}", run, evidence.streams, topic=topic,
                           partition=partition, eligible_leader_replicas=elr)
    yield from _isr_changes(evidence, series_by_partition)
    yield from _offline(evidence, series_by_partition)


def _isr_changes(evidence: Evidence, series_by_partition: dict[tuple[Any, ...], list[dict[str, Any]]],
                 ) -> Iterator[Finding]:
    """ISR shrinks (medium) and expansions (info), one finding per answer and brokers."""
    changes: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
    for (topic, partition), series in series_by_partition.items():
        for before, after in itertools.pairwise(series):
            left = tuple(sorted(set(before["isr_nodes"]) - set(after["isr_nodes"])))
            joined = tuple(sorted(set(after["isr_nodes"]) - set(before["isr_nodes"])))
            for kind, brokers in (("shrink", left), ("expand", joined)):
                if brokers:
                    changes.setdefault((kind, brokers), []).append(
                        {**after, "name": _topic_partition(topic, partition)})
    for (kind, brokers), items in changes.items():
        for _, group in grouped(items, "number").items():
            names = sorted({r["name"] for r in group})
            verb = "left" if kind == "shrink" else "rejoined"
            yield _finding(f"partition.isr_{kind}", Severity.MEDIUM if kind == "shrink"
                           else Severity.INFO,
                           f"ISR {kind}: {_brokers(brokers)} {verb} the ISR of "
                           f"{plural(len(names), 'partition')}: {', '.join(names[:6])}"
                           + (" ..." if len(names) > 6 else ""), group, evidence.streams,
                           brokers=list(brokers), partitions=names)


def _offline(evidence: Evidence, series_by_partition: dict[tuple[Any, ...], list[dict[str, Any]]],
             ) -> Iterator[Finding]:
    """Offline replicas (medium), one finding per set of offline brokers."""
    found: dict[tuple[int, ...], list[dict[str, Any]]] = {}
    for (topic, partition), series in series_by_partition.items():
        for r in series:
            if r["offline_replicas"]:
                found.setdefault(tuple(sorted(r["offline_replicas"])), []).append(
                    {**r, "name": _topic_partition(topic, partition)})
    for brokers, items in found.items():
        names = sorted({r["name"] for r in items})
        yield _finding("partition.offline_replicas", Severity.MEDIUM,
                       f"replicas on {_brokers(brokers)} offline for "
                       f"{plural(len(names), 'partition')}, in "
                       f"{plural(len({r['number'] for r in items}), 'answer')}",
                       items, evidence.streams, brokers=list(brokers), partitions=names)


# -- text ---------------------------------------------------------------------------------


def render_text(found: list[Finding], base_time: float | None = None) -> str:
    """One block per finding: severity, id, time span (relative to `base_time`), summary."""
    if not found:
        return "No findings.\n"
    lines = []
    for item in found:
        start, end = item.first_time, item.last_time
        span = (f"{start - base_time:9.3f}s..{end - base_time:.3f}s" if base_time is not None
                else f"{iso_time(start)}..{iso_time(end)}")
        lines.append(f"{str(item.severity).upper():<6} {item.id:<34} {span}  x{item.count}")
        lines.append(f"       {item.summary}")
        shown = ", ".join(map(str, item.messages[:12])) + (" ..." if len(item.messages) > 12 else "")
        if shown:
            lines.append(f"       messages: {shown}")
    counts = {s: sum(1 for f in found if f.severity == s) for s in Severity}
    lines.append("")
    lines.append(f"{plural(len(found), 'finding')}: " + ", ".join(
        f"{n} {s}" for s, n in sorted(counts.items(), reverse=True) if n))
    return "\n".join(lines) + "\n"
