"""The `records` and `batches` tables find every `records` field, its topic and partition and
the offsets a Produce response gave it, from the bodies' flat values: exactly what the whole
annotated tree of each message holds, on every shipped, fuzz-found and third-party capture."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kdissect.decode.record_nodes import records_unexpanded
from kdissect.decode.tree import Node
from kdissect.pair.message import Message, message_from_frame
from kdissect.pipeline import read_messages
from kdissect.present import record_tables
from kdissect.present.record_tables import (
    PARTITION_FIELDS,
    TOPIC_FIELDS,
    TOPIC_ID_FIELDS,
    records_fields,
)
from tests.conftest import CAPTURES
from tests.every_message import TreesBuilt, reading_captures


def nodes_in_context(root: Node, wanted: Callable[[Node], bool]) -> Iterator[tuple[Any, Any, Node]]:
    """(topic, partition, node) of each wanted node of a tree, the topic and partition named
    by the nodes around it: what the tables read from trees before they read values."""
    stack: list[tuple[Node, Any, Any]] = [(root, (None, None), None)]
    while stack:
        node, topic, partition = stack.pop()
        if node.type in ("RecordBatch", "Message"):
            continue
        for child in node.children:
            if child.name in TOPIC_FIELDS and isinstance(child.value, str):
                topic = (child.value, topic[1])
            elif child.name in TOPIC_ID_FIELDS and child.value is not None:
                topic = (topic[0], str(child.value))
            elif child.name in PARTITION_FIELDS and isinstance(child.value, int):
                partition = child.value
        if wanted(node):
            yield topic, partition, node
            continue
        stack.extend((child, topic, partition) for child in reversed(node.children))


def from_the_tree(message: Message) -> list[tuple[Any, ...]]:
    """Each records field of the message's tree: topic, partition, bytes, assigned base offset."""
    if not record_tables.carries_records(message):
        return []
    bases = {}
    response = message.pair if message.is_request and message.api_key == 0 else None
    if response is not None and response.api_version is not None:
        for topic, partition, node in nodes_in_context(response.tree(keep=False),
                                                       lambda n: n.child("BaseOffset") is not None):
            base, error = node["BaseOffset"].value, node.child("ErrorCode")
            if isinstance(base, int) and base >= 0 and (error is None or error.value == 0):
                bases[topic, partition] = base
    with records_unexpanded():
        tree = message.tree(keep=False)
    return [(topic, partition, node.value, bases.get((topic, partition)) if message.is_request else None)
            for topic, partition, node in nodes_in_context(tree, lambda n: n.type == "records")
            if isinstance(node.value, bytes)]


def read_both_ways(message: Message) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The message's records fields as the tables read them, and as its tree holds them."""
    read = [(f.topic, f.partition, f.entries, f.log_base) for f in records_fields([message])]
    expected = [(topic, partition, record_tables.decode_records(data), base)
                for topic, partition, data, base in from_the_tree(message)]
    return read, expected


def test_records_fields_read_from_values_are_the_trees(monkeypatch):
    trees = TreesBuilt(monkeypatch)
    fields = based = 0
    for path in reading_captures():
        for message in read_messages(str(path)):
            read = trees.during(lambda m=message: [(f.topic, f.partition, f.entries, f.log_base)
                                                  for f in records_fields([m])])
            assert read == read_both_ways(message)[1], (path.name, message.number)
            fields += len(read)
            based += sum(base is not None for *_, base in read)
    assert fields >= 32 and based >= 30
    # only bodies the generated decoders refuse (damaged ones) are read off a tree
    assert len(trees.keys) < fields / 10


@pytest.mark.parametrize("name", ["tansu_records.pcap", "tansu_topic_partitions.pcap"])
def test_damaged_bodies_give_the_fields_their_trees_hold(name: str):
    """A Produce or Fetch body cut short or with a byte changed takes the interpreter: the
    tables find the records fields (and offsets) its partial tree holds, no more, no less."""
    messages = list(read_messages(str(CAPTURES / name)))
    carrying = [m for m in messages if record_tables.carries_records(m)
                or (m.api_key == 0 and m.pair is not None)]
    damaged = differing = 0
    for message in carrying:
        request, response = (message, message.pair) if message.is_request else (message.pair, message)
        data = message.frame.data
        for at in range(8, len(data), max(1, len(data) // 40)):
            for changed in (data[:at], data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]):
                copy = message_from_frame(message.number, dataclasses.replace(message.frame, data=changed))
                if message.is_request:
                    copy.link(response)
                    read_by = copy
                else:  # a Produce response gives its request's records their offsets
                    request.link(copy)
                    read_by = request if request.api_key == 0 else copy
                read, expected = read_both_ways(read_by)
                request.link(response)
                assert read == expected, (message.number, at)
                damaged += 1
                differing += read != read_both_ways(request if read_by is request else message)[0]
    assert damaged > 500 and differing > 100
