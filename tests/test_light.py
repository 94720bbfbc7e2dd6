"""Light batches (`kdissect.light`): a worker's events as arrays of ints, and the merge
that puts the workers' batches in order with numpy, checked against the events one by
one and against `heapq.merge` of their keys (what the merge does without them)."""

from __future__ import annotations

import heapq
import random
from typing import Any

import pytest

from kdissect import notes
from kdissect.ingest.framing import Connection
from kdissect.light import Columns, Light, merged, received
from kdissect.spool import Ring, read_all

pytest.importorskip("numpy")

FAR = 1 << 70  # beyond 64 bits


def made_events(rng: random.Random, worker: int, count: int, ring: Ring | None) -> list[tuple[Any, str, Any]]:
    """`count` events of one worker, keys growing, as `kdissect.parallel._Worker` makes them:
    connections found, notes, and messages with and without notes, their text in `ring` or
    as bytes, correlation ids missing, negative or large."""
    events: list[tuple[Any, str, Any]] = []
    packet, opened = 0, 0
    for sequence in range(1, count + 1):
        packet += rng.choice((0, 0, 1, 2, 5))
        key = (packet, rng.choice((-1, 0, 0, 0, 1)), rng.randrange(3), rng.randrange(3), sequence)
        if events and key < events[-1][0]:  # within a worker the keys only grow
            key = (*events[-1][0][:4], sequence)
        kind = rng.random()
        if kind < 0.1 or not opened:
            events.append((key, "open", (opened, f"client {worker}", f"server {opened}", False)))
            opened += 1
        elif kind < 0.15:
            events.append((key, "note", notes.warn(f"a capture note {sequence}")))
        else:
            text = f"message {worker}.{sequence} ☕".encode() * rng.randrange(1, 4)
            place = ring.put(text) if ring is not None and rng.random() < 0.8 else text
            frame_notes = (notes.note("cut short", 4),) if rng.random() < 0.1 else ()
            header_notes = (notes.warn("odd header", id="kafka.x"),) if rng.random() < 0.1 else ()
            correlation_id = rng.choice((None, -7, 0, 1, 2**31 - 1, rng.randrange(1000)))
            events.append((key, "light", (rng.randrange(opened), rng.random() < 0.5, correlation_id,
                                          rng.random() < 0.9, rng.randrange(1 << 62), rng.randrange(1 << 20),
                                          frame_notes, header_notes,
                                          (place, rng.choice((-1, 0, 2)), rng.randrange(99), rng.randrange(99)))))
    return events


def batched(events: list[tuple[Any, str, Any]], rng: random.Random, read: int = 0,
            sizes: tuple[int, ...] = (1, 2, 7, 64, 256)) -> list[tuple[str, Any]]:
    """The events as payloads, each of a size of `sizes` at random, as a worker sends them."""
    payloads = []
    at = 0
    while at < len(events):
        size = rng.choice(sizes)
        columns = Columns()
        for key, what, event in events[at:at + size]:
            if what == "light":
                columns.message(key[:4], key[4], event)
            else:
                columns.add(key, what, event)
        payloads.append(columns.payload(read + at))
        at += size
    return payloads


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_of_arrays_gives_back_the_events_it_was_given(seed: int) -> None:
    rng = random.Random(seed)
    events = made_events(rng, 0, 300, Ring(1 << 16))
    payloads = batched(events, rng)
    assert {kind for kind, _payload in payloads} == {"lights"}
    assert [event for _kind, payload in payloads for event in received(payload)] == events
    assert [payload[-1] for _kind, payload in payloads][-1] < len(events)  # how far the worker had read


def test_a_batch_with_a_key_beyond_64_bits_goes_as_its_events() -> None:
    """A capture time far off in a key does not fit the keys' array: that batch goes as the
    events themselves, as a worker that is not light sends them. A message's own time far
    off travels as it is."""
    rng = random.Random(7)
    events = made_events(rng, 0, 40, None)
    messages = [at for at, (_key, what, _event) in enumerate(events) if what == "light"]
    far_key = [(key if at != 3 else (key[0], 1, FAR, 0, key[4]), what, event)
               for at, (key, what, event) in enumerate(events)]
    far_time = [(key, what, event if at != messages[1] else (*event[:4], FAR, *event[5:]))
                for at, (key, what, event) in enumerate(events)]
    for changed, kind in ((far_key, "events"), (far_time, "lights")):
        columns = Columns()
        for key, what, event in changed:
            columns.message(key[:4], key[4], event) if what == "light" else columns.add(key, what, event)
        sent, payload = columns.payload(12)
        assert sent == kind
        assert (payload[0] if kind == "events" else received(payload)) == changed
        assert payload[-1] == 12


def reference(streams: list[list[tuple[Any, str, Any]]]) -> list[tuple[int, str, Any]]:
    """The order of one process: the keys merged, ties broken by the worker's index."""
    placed = [[(key, worker, what, event) for key, what, event in events] for worker, events in enumerate(streams)]
    return [(worker, what, event) for _key, worker, what, event in heapq.merge(*placed)]


def merge_all(payloads: list[list[tuple[str, Any]]], rings: list[Ring] | None
              ) -> tuple[list[tuple[int, str, Any]], dict[int, Any]]:
    """What `merged` makes of the payloads, as (worker, what, event): a Light back as the event
    it was made from, with its number; and, should the merge stop, the rest one by one."""
    connections: dict[tuple[int, int], Connection] = {}
    found: list[tuple[int, str, Any]] = []
    prepared: dict[int, Any] = {}

    def other(worker: int, what: str, event: Any) -> None:
        if what == "open":
            connections[worker, event[0]] = Connection(len(connections), event[1], event[2], event[3])
        found.append((worker, what, event))

    number = 0
    for item in merged([iter(batches) for batches in payloads], connections, rings, prepared, other):
        if isinstance(item, tuple):  # the merge stopped: the rest, one by one, by key
            rest, last = item
            assert last == number
            for _key, worker, what, event in heapq.merge(*rest):
                if what == "light":
                    found.append((worker, "light", (*event[:8], None)))  # not numbered by the merge
                else:
                    other(worker, what, event)
            break
        assert isinstance(item, Light)
        number = len([what for _worker, what, _event in found if what == "light"]) + 1
        assert item.number == number and item.frame is item
        worker, local = next(key for key, connection in connections.items() if connection is item.connection)
        found.append((worker, "light", (local, item.is_request, item.correlation_id, item.expects_response,
                                        item.last_ns, item.size, item.frame_notes, tuple(item.notes), number)))
    return found, prepared


def as_merged(expected: list[tuple[int, str, Any]], prepared: dict[int, Any],
              rings: list[Ring] | None) -> list[tuple[int, str, Any]]:
    """The reference's events as `merge_all` gives them: a message's text checked against
    what the merge handed on for its number (the same bytes, from the ring or not)."""
    shown = []
    number = 0
    for worker, what, event in expected:
        if what == "light":
            number += 1
            place, count, cut, end = event[8]
            text = bytes(rings[worker].view[place[0] % rings[worker].size:][:place[1]]) if (
                isinstance(place, tuple) and rings is not None) else place
            kept = prepared[number]
            assert (read_all(kept[0]), *kept[1:]) == (text, count, cut, end)
            event = (*event[:8], number)
        shown.append((worker, what, event))
    return shown


@pytest.mark.parametrize("seed", range(8))
def test_the_merge_gives_the_events_of_every_worker_in_the_order_of_their_keys(seed: int) -> None:
    rng = random.Random(seed)
    jobs = rng.choice((2, 3))
    rings = [Ring(1 << 20) for _ in range(jobs)]
    streams = [made_events(rng, worker, rng.randrange(0, 500), rings[worker]) for worker in range(jobs)]
    expected = reference(streams)
    found, prepared = merge_all([batched(events, rng) for events in streams], rings)
    assert found == as_merged(expected, prepared, rings)
    assert sum(what == "light" for _worker, what, _event in found) == len(prepared)


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_that_is_not_arrays_makes_the_merge_go_on_one_by_one(seed: int) -> None:
    """A worker's batch with an int beyond 64 bits comes as events: the merge hands every
    worker's events not yet merged on, in order, and what was merged before stays merged."""
    rng = random.Random(100 + seed)
    streams = [made_events(rng, worker, 300, None) for worker in range(2)]
    payloads = [batched(events, rng, sizes=(8, 16, 32)) for events in streams]
    late = payloads[1][len(payloads[1]) // 2]
    payloads[1][len(payloads[1]) // 2] = ("events", (received(late[1]), late[1][-1]))
    found, prepared = merge_all(payloads, None)
    expected = reference(streams)
    assert 0 < len(prepared) < sum(what == "light" for _worker, what, _event in expected)
    assert [(worker, what, event[:8] if what == "light" else event) for worker, what, event in found] == [
        (worker, what, event[:8] if what == "light" else event) for worker, what, event in expected]


def test_ties_between_workers_go_to_the_lower_worker_first() -> None:
    key = (5, 2, 0, 0, 1)  # the same key in both: each worker's capture-end event, say
    streams = [[(key, "note", notes.note(f"from {worker}"))] for worker in range(2)]
    found, _prepared = merge_all([batched(stream, random.Random(0)) for stream in streams], None)
    assert [(worker, event.message) for worker, _what, event in found] == [(0, "from 0"), (1, "from 1")]
