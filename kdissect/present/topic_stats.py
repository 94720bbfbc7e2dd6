"""`--stats`' Topics section: what was produced to and fetched from each topic.

Read from the decoded bodies' flat values: a Produce request's partitions and the
record batches they carry, a Produce response's partition errors, a Fetch response's
partitions, records and partition errors. Records are counted from the batch headers
(`traffic_tables.record_count`, control records included), bytes are the `Records`
fields' sizes on the wire. Followers' fetches count with the consumers': both are
data leaving the broker.

A topic named only by id (Produce and Fetch v13+) takes its name from any answer of
the capture that gives the id and the name together (Metadata v10+,
DescribeTopicPartitions, CreateTopics v7+), wherever in the capture that answer is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kdissect.decode.tree import printable
from kdissect.dissectors import Values, items
from kdissect.pair.message import Message
from kdissect.present.table_spec import uuid_text
from kdissect.present.traffic_tables import record_count

PRODUCE, FETCH = 0, 1
# Answers that give topic ids with their names: Metadata, CreateTopics, DescribeTopicPartitions.
NAMING_APIS = frozenset({3, 19, 75})
_NAME_FIELDS = ("Name", "Topic", "TopicName")
_MAX_TOPICS = 1 << 16  # topics kept: a capture names as many as it likes, memory may not grow with it
OTHER_TOPICS = "(other topics)"


@dataclass(slots=True)
class Flow:
    """One direction of one topic's traffic: partitions, records, bytes, partition errors."""

    partitions: int = 0
    records: int = 0
    bytes: int = 0
    errors: int = 0

    def merged(self, other: Flow) -> Flow:
        return Flow(self.partitions + other.partitions, self.records + other.records,
                    self.bytes + other.bytes, self.errors + other.errors)

    def as_dict(self) -> dict[str, int]:
        return {"partitions": self.partitions, "records": self.records, "bytes": self.bytes,
                "errors": self.errors}


@dataclass(slots=True)
class TopicStats:
    produced: Flow
    fetched: Flow

    def merged(self, other: TopicStats) -> TopicStats:
        return TopicStats(self.produced.merged(other.produced), self.fetched.merged(other.fetched))


class Topics:
    """Per topic, by name or (for a topic seen only by id) by id text."""

    def __init__(self) -> None:
        self.topics: dict[tuple[str | None, str | None], TopicStats] = {}  # (name, id)
        self.names: dict[str, str] = {}  # topic id text -> name, from any answer
        self.named: dict[str, int] = {}  # topic id text -> the message that last named it

    def add(self, api_key: int | None, is_request: bool, body: Values, number: int = 0) -> None:
        """One decoded body (of message `number`, where known); bodies of other APIs only
        lend names to topic ids."""
        self.add_facts(body_facts(api_key, is_request, body), number)

    def add_facts(self, facts: Facts | None, number: int = 0) -> None:
        """What `body_facts` read of a body (of message `number`), counted."""
        if facts is None:
            return
        what, entries = facts
        if what == "names":
            if len(self.names) < _MAX_TOPICS:
                for topic_id, name in entries:
                    self.names[topic_id] = name
                    self.named[topic_id] = number
            return
        for key, partitions, records, size, errors in entries:
            stats = self._topic(key)
            flow = stats.produced if what == "produced" else stats.fetched
            flow.partitions += partitions
            flow.records += records
            flow.bytes += size
            flow.errors += errors

    def add_messages(self, messages: Iterable[Message]) -> Topics:
        """Every message whose body counts here, decoded for it (and not kept)."""
        for message in messages:
            self.add_message(message)
        return self

    def add_message(self, message: Message, body: Values | None = None) -> None:
        """A message, if its body counts here: `body`, its values where the caller has them
        (a pass over every body, as the report's findings make), else decoded for it."""
        key = message.api_key
        if key == PRODUCE or (not message.is_request and (key == FETCH or key in NAMING_APIS)):
            if body is None:
                body = message.values(keep=False)
            if body is not None:
                self.add(key, message.is_request, body, message.number)

    def _topic(self, key: tuple[str | None, str | None]) -> TopicStats:
        if key not in self.topics and len(self.topics) >= _MAX_TOPICS:
            key = (None, None)  # shown as OTHER_TOPICS
        found = self.topics.get(key)
        if found is None:
            found = self.topics[key] = TopicStats(Flow(), Flow())
        return found

    @property
    def bounded(self) -> bool:
        """Whether the bound on topics kept has changed what was counted (`merged_topics`
        cannot merge such counts as one pass over the whole capture makes them)."""
        return (None, None) in self.topics or len(self.names) >= _MAX_TOPICS

    def resolved(self) -> list[tuple[str | None, str | None, TopicStats]]:
        """(name, id, stats) per topic, ids named where an answer told the name (and merged
        with the traffic seen by that name), the busiest first."""
        merged: dict[tuple[str | None, str | None], TopicStats] = {}
        for (name, topic_id), stats in self.topics.items():
            if name is None and topic_id in self.names:
                name, topic_id = self.names[topic_id], None
            seen = merged.get((name, topic_id))
            merged[(name, topic_id)] = stats if seen is None else seen.merged(stats)
        return sorted(((name, topic_id, stats) for (name, topic_id), stats in merged.items()),
                      key=lambda t: (-(t[2].produced.bytes + t[2].fetched.bytes), t[0] or "", t[1] or ""))

    # -- output --------------------------------------------------------------------

    def lines(self) -> list[str]:
        rows = self.resolved()
        if not rows:
            return []
        lines = ["Topics", "======",
                 f"{'topic':<30} {'produce':>7} {_HEAD}   {'fetch':>7} {_HEAD}"]
        for name, topic_id, stats in rows:
            label = topic_label(name, topic_id, quoted=True)
            lines.append(f"{label:<30} {_cells(stats.produced)}   {_cells(stats.fetched)}")
        lines.append("produce: topic-partitions in Produce requests, the records and bytes of their "
                     "batches, and the partitions their answers refused (errors); fetch: "
                     "topic-partitions in Fetch responses (consumers' and followers'), their records, "
                     "bytes and partition errors")
        return lines

    def as_dicts(self) -> list[dict[str, Any]]:
        return [{"topic_name": name, "topic_id": topic_id, "produced": stats.produced.as_dict(),
                 "fetched": stats.fetched.as_dict()} for name, topic_id, stats in self.resolved()]


# What a body adds to the topics (`body_facts`): ("produced" or "fetched", per topic entry its
# key (name, id text), partitions, records, bytes and partition errors), or ("names", the
# (id text, name) of each topic an answer names): plain values, for another process.
Facts = tuple[str, list[tuple[Any, ...]]]


def body_facts(api_key: int | None, is_request: bool, body: Values) -> Facts | None:
    """What a decoded body adds to `Topics` (`Topics.add_facts`); None for a body that adds
    nothing. Records are counted from the batch headers, bytes are the `Records` fields'."""
    if api_key == PRODUCE and is_request:
        return "produced", [(_key(topic), *_records(items(topic, "PartitionData")), 0)
                            for topic in items(body, "TopicData")]
    if api_key == PRODUCE:
        return "produced", [(_key(topic), 0, 0, 0, sum(bool(p.get("ErrorCode"))
                                                         for p in items(topic, "PartitionResponses")))
                            for topic in items(body, "Responses")]
    if api_key == FETCH and not is_request:
        entries = []
        for topic in items(body, "Responses"):
            partitions = items(topic, "Partitions")
            entries.append((_key(topic), *_records(partitions), sum(bool(p.get("ErrorCode")) for p in partitions)))
        return "fetched", entries
    if not is_request and api_key in NAMING_APIS:
        named = [(topic_id, name) for topic in items(body, "Topics")
                 if (topic_id := uuid_text(topic.get("TopicId"))) is not None
                 and isinstance(name := topic.get("Name"), str)]
        return "names", named
    return None


def _key(topic: Values) -> tuple[str | None, str | None]:
    """A topic entry's key: its name, else its id as text."""
    name = next((topic[f] for f in _NAME_FIELDS if isinstance(topic.get(f), str)), None)
    return name, None if name is not None else uuid_text(topic.get("TopicId"))


def _records(partitions: list[Any]) -> tuple[int, int, int]:
    """Partitions, records and bytes of a topic entry's partitions' `Records`."""
    records = size = 0
    for partition in partitions:
        data = partition.get("Records")
        if isinstance(data, bytes | bytearray | memoryview):
            records += record_count(data)
            size += len(data)
    return len(partitions), records, size


def merged_topics(parts: Iterable[tuple[Topics, Any]]) -> Topics | None:
    """The topics of several workers' shares (each with the array of the capture's number
    of each of its messages) as one pass over the whole capture counts them: flows added,
    an id named as the message that named it last did. None where a share reached the
    bound on topics kept."""
    whole = Topics()
    last: dict[str, int] = {}
    for topics, numbers in parts:
        if topics.bounded:
            return None
        for key, stats in topics.topics.items():
            seen = whole.topics.get(key)
            whole.topics[key] = stats if seen is None else seen.merged(stats)
        for topic_id, name in topics.names.items():
            number = int(numbers[topics.named[topic_id] - 1])
            if number > last.get(topic_id, 0):
                whole.names[topic_id], last[topic_id] = name, number
    if whole.bounded or len(whole.topics) > _MAX_TOPICS:  # one pass would have bounded them
        return None
    return whole


def topic_label(name: str | None, topic_id: str | None, *, quoted: bool) -> str:
    """A topic as printable text: its name (escaped, in quotes if `quoted`), else `id ...`,
    else the row of topics beyond the bound."""
    if name is not None:
        return f'"{printable(name)}"' if quoted else printable(name)
    return OTHER_TOPICS if topic_id is None else f"id {topic_id}"


_HEAD = f"{'records':>9} {'bytes':>13} {'errors':>6}"


def _cells(flow: Flow) -> str:
    return f"{flow.partitions:>7} {flow.records:>9} {flow.bytes:>13} {flow.errors:>6}"
