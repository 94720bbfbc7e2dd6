"""Light batches (`kdissect.light`): a worker's events as arrays of ints, and the merge
that puts the workers' batches in order with numpy, checked against the events one by
one and against `heapq.merge` of their keys (what the merge does without them)."""

from __future__ import annotations

import contextlib
import heapq
import random
from typing import Any

import pytest

from kdissect import notes
from kdissect.ingest.framing import Connection
from kdissect.light import Columns, Light, Lights, made, merged, received
from kdissect.pair.pairing import Pairer, Sequencer
from kdissect.spool import Piece, Ring, read_all

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


def test_a_usual_message_goes_as_ints_and_comes_back_as_it_was() -> None:
    """A message without notes whose text is in the ring goes as the ints of its row
    (`light.pack`), in C as in the Python, and comes back the fields it was; anything else
    goes as its fields, a key beyond 64 bits not at all."""
    from kdissect.light import KEY, MESSAGE, PLAIN, ROW, pack, unplain

    pack_c = pytest.importorskip("kdissect._light_c").pack
    rng = random.Random(5)
    events = [
        *made_events(rng, 0, 400, Ring(1 << 16)),
        ((1, 0, 0, 0, 1), "light", (0, True, 1, False, FAR, 10, (), (), ((0, 10), 0, 1, 1))),  # a time far off
        ((1, 0, 0, 0, 2), "light", (0, 1, 1, False, 5, 10, (), (), ((0, 10), 0, 1, 1))),  # not a bool
        ((1, 0, 0, 0, 3), "light", (0, True, 1, False, 5, 10, [], (), ((0, 10), 0, 1, 1))),  # notes not a tuple
    ]
    plain = 0
    for key, what, event in events:
        fields = event if what == "light" else None
        rows = [bytearray(b"x"), bytearray(b"x"), bytearray(b"x")]
        found = [pack(rows[0], key, None, fields), pack_c(rows[1], key[:4], key[4], fields),
                 pack_c(rows[2], key, None, fields)]
        assert found[0] == found[1] == found[2] and rows[0] == rows[1] == rows[2] and len(rows[0]) == 1 + 8 * ROW
        row = memoryview(rows[0][1:]).cast("q").tolist()
        assert tuple(row[:KEY]) == key
        if found[0]:
            plain += 1
            assert unplain(row[KEY:]) == fields
        else:
            assert row[KEY:] == [0] * (ROW - KEY)
    assert 0 < plain < sum(what == "light" for _key, what, _event in events)
    assert (PLAIN, MESSAGE) == (2, 0)
    for packing in (pack, lambda rows, key, _sequence, fields: pack_c(rows, key[:4], key[4], fields)):
        rows = bytearray()
        with pytest.raises(OverflowError):
            packing(rows, (1, 0, FAR, 0, 1), None, None)
        assert rows == bytearray()  # nothing of it appended


def reference(streams: list[list[tuple[Any, str, Any]]]) -> list[tuple[int, str, Any]]:
    """The order of one process: the keys merged, ties broken by the worker's index."""
    placed = [[(key, worker, what, event) for key, what, event in events] for worker, events in enumerate(streams)]
    return [(worker, what, event) for _key, worker, what, event in heapq.merge(*placed)]


class Unpaired(Lights):
    """Lights released as soon as they are made, unpaired: the merge's order as it is."""

    def one(self, light: Any) -> list[tuple[Any, Any]]:
        return [(light, self.prepared[light.number])]


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
    for item in merged([iter(batches) for batches in payloads], connections, rings, Unpaired(prepared), other):
        if isinstance(item, tuple):  # the merge stopped: the rest, one by one, by key
            rest, last = item
            assert last == number
            for _key, worker, what, event in heapq.merge(*rest):
                if what == "light":
                    found.append((worker, "light", (*event[:8], None)))  # not numbered by the merge
                else:
                    other(worker, what, event)
            break
        for light, ready in item:
            assert isinstance(light, Light)
            number = len([what for _worker, what, _event in found if what == "light"]) + 1
            assert light.number == number and light.frame is light and ready is prepared[number]
            worker, local = next(key for key, connection in connections.items() if connection is light.connection)
            found.append((worker, "light", (local, light.is_request, light.correlation_id, light.expects_response,
                                            light.last_ns, light.size, light.frame_notes, tuple(light.notes), number)))
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


# -- pairing and releasing: `_light_c.Lights` against `Lights` --------------------------


def conversation(rng: random.Random, worker: int, count: int, ring: Ring | None) -> list[tuple[Any, str, Any]]:
    """`count` events of one worker whose messages pair as Kafka's do, and as they do not:
    requests answered in order, out of order, never, twice (a correlation id reused while
    in flight), not at all (acks=0), without a correlation id; responses without a request;
    capture time that jumps past the hold; frames large enough to pass the bytes held."""
    events: list[tuple[Any, str, Any]] = []
    flights: list[list[int]] = []
    packet, time_ns, next_id = 0, 0, 0
    for sequence in range(1, count + 1):
        packet += rng.choice((1, 1, 2))
        time_ns += rng.choice((1_000, 50_000, 2_500_000, 3_000_000_000, 5_000_000_000))
        key = (packet, 0, 0, 0, sequence)
        if not flights or rng.random() < 0.05:
            events.append((key, "open", (len(flights), f"client {worker}", f"server {len(flights)}", False)))
            flights.append([])
            continue
        if rng.random() < 0.03:
            events.append((key, "note", notes.warn(f"a capture note {worker}.{sequence}")))
            continue
        local = rng.randrange(len(flights))
        flight = flights[local]
        roll = rng.random()
        if not flight or roll < 0.5:
            is_request = True
            correlation_id: int | None = rng.choice(flight) if flight and rng.random() < 0.05 else next_id
            next_id += 1
            expects = rng.random() < 0.9
            if rng.random() < 0.03:
                correlation_id = None
            elif expects:
                flight.append(correlation_id)  # type: ignore[arg-type]
        else:
            is_request, expects = False, False
            at = 0 if roll < 0.85 else rng.randrange(len(flight))
            correlation_id = flight.pop(at) if roll < 0.97 else 10**9 + sequence  # else no such request
        text = f"message {worker}.{sequence}".encode()
        place = ring.put(text) if ring is not None and rng.random() < 0.9 else text
        size = rng.choice((40, 300, 5_000, 70_000))
        header_notes = (notes.warn("odd header", id="kafka.x"),) if rng.random() < 0.05 else ()
        events.append((key, "light", (local, is_request, correlation_id, expects, time_ns, size, (), header_notes,
                                      (place, 0, 1, 2))))
    return events


def paired_run(lights: type[Any], payloads: list[list[tuple[str, Any]]], rings: list[Ring] | None,
               **hold: Any) -> list[Any]:
    """Every event and released message of a merge paired by `lights`, in order, as plain
    values: a message's number, notes, pair and text."""
    connections: dict[tuple[int, int], Connection] = {}
    seen: list[Any] = []

    def other(worker: int, what: str, event: Any) -> None:
        if what == "open":
            connections[worker, event[0]] = Connection(len(connections), event[1], event[2], event[3])
        seen.append((worker, what, event))

    def shown(released: list[tuple[Any, Any]]) -> None:
        for message, ready in released:
            pair = message._pair
            seen.append((message.number, message.is_request, message.correlation_id, message.last_ns, message.size,
                         message.connection.index, [(n.severity, n.message, n.id) for n in message.all_notes()],
                         None if pair is None else pair.number, message.pair_number, read_all(ready[0]), ready[1:]))

    prepared: dict[int, Any] = {}
    pairing = lights(prepared, **hold)
    for item in merged([iter(batches) for batches in payloads], connections, rings, pairing, other):
        if isinstance(item, tuple):
            rest, number = item
            for _key, worker, what, event in heapq.merge(*rest):
                if what == "light":
                    number += 1
                    shown(pairing.one(pairing.made(number, worker, event, connections, rings)))
                else:
                    other(worker, what, event)
            break
        shown(item)
    shown(pairing.finish())
    assert not prepared  # every message released, with what was made of it
    return seen


HOLDS = ({}, {"hold_seconds": 5.0}, {"hold_messages": 7}, {"hold_bytes": 100_000},
         {"hold_seconds": 0.0025, "hold_messages": 3, "hold_bytes": 6_000})


@pytest.mark.parametrize("seed", range(10))
def test_lights_in_c_pair_and_release_as_the_python_does(seed: int) -> None:
    """Message by message: the same numbers, notes (their text and ids), pairs and text, in
    the same order among the other events, under every hold limit."""
    c_lights = pytest.importorskip("kdissect._light_c").Lights
    rng = random.Random(300 + seed)
    jobs = rng.choice((2, 3))
    streams = [conversation(rng, worker, rng.randrange(50, 600), None) for worker in range(jobs)]
    payloads = [batched(events, rng) for events in streams]
    if seed % 3 == 2:  # one batch that is not arrays: the rest one by one
        late = payloads[0][len(payloads[0]) // 2]
        payloads[0][len(payloads[0]) // 2] = ("events", (received(late[1]), late[1][-1]))
    hold = HOLDS[seed % len(HOLDS)]
    python = paired_run(Lights, payloads, None, **hold)
    assert paired_run(c_lights, payloads, None, **hold) == python
    found = [entry for entry in python if isinstance(entry[0], int) and not isinstance(entry[1], str)]
    assert len(found) == sum(what == "light" for events in streams for _key, what, _event in events)
    ids = {note_id for entry in found for _severity, _text, note_id in entry[6]}
    if not hold:  # the run with Kafka's own limits still meets every note pairing gives
        assert {"kafka.response_out_of_order", "kafka.request_missing", "kafka.duplicate_correlation_id",
                "kafka.unanswered"} <= ids
    elif "hold_seconds" in hold:
        assert "kafka.response_overdue" in ids


def test_lights_in_c_take_their_text_from_the_rings() -> None:
    c_lights = pytest.importorskip("kdissect._light_c").Lights
    rng = random.Random(5)
    rings = [Ring(1 << 16) for _ in range(2)]
    streams = [conversation(rng, worker, 400, rings[worker]) for worker in range(2)]
    payloads = [batched(events, rng) for events in streams]
    assert paired_run(c_lights, payloads, rings) == paired_run(Lights, payloads, rings)


def test_a_light_in_c_is_a_light() -> None:
    """What the rest of the merge reads and writes of a Light, the C one has alike."""
    c_light = pytest.importorskip("kdissect._light_c").Light
    connection = Connection(3, "client", "server", False)
    made = [kind(7, connection, True, 12, True, 10**20, 99, (notes.note("cut", 4),), [notes.warn("odd")])
            for kind in (Light, c_light)]
    for light in made:
        kind = type(light)
        assert light.frame is light and light._pair is None and light.pair_number is None
        answer = kind(9, connection, False, 12, False, 10**20 + 1, 5, (), [])
        light.link(answer)
        light.notes.append(notes.note("later"))
        assert light._pair is answer and answer.pair_number == 7  # a request's, once released
        assert [note.message for note in light.all_notes()] == ["cut", "odd", "later"]
        light.number = 8
    python, native_light = made
    for name in ("number", "connection", "is_request", "correlation_id", "expects_response", "last_ns", "size",
                 "frame_notes", "notes"):
        assert getattr(native_light, name) == getattr(python, name)
    with pytest.raises(AttributeError):
        native_light.file  # noqa: B018  # as the Python's slots: nothing else


@pytest.mark.parametrize("seed", range(6))
def test_a_message_shows_its_pair_as_it_stood_when_released(seed: int) -> None:
    """One process writes a message as soon as pairing releases it: a request released
    before its answer came (the hold limits) shows no pair, though its response pairs with
    it later. The merge releases a round's messages at once, after the whole round: each
    shows its pair as it stood when it was released, in C as in the Python."""
    rng = random.Random(500 + seed)
    streams = [conversation(rng, worker, 400, None) for worker in range(2)]
    payloads = [batched(events, rng) for events in streams]
    hold = {"hold_seconds": 5.0} if seed % 2 else {"hold_seconds": 0.0025, "hold_messages": 3}
    connections: dict[tuple[int, int], Connection] = {}
    pairer, sequencer = Pairer(), Sequencer(**hold)
    expected = []
    number = 0
    for worker, what, event in reference(streams):  # one by one, each written when released
        if what == "open":
            connections[worker, event[0]] = Connection(len(connections), event[1], event[2], event[3])
        if what != "light":
            continue
        number += 1
        light = made(number, worker, event, connections, None, {})
        pairer.add(light)  # type: ignore[arg-type]
        for message in sequencer.push(light):  # type: ignore[arg-type]
            expected.append(written(message))
    expected += [written(message) for message in sequencer.finish()]
    # requests released unanswered whose response came, and paired with them, later
    answered = {pair for _number, pair, is_request in expected if not is_request}
    assert any(is_request and pair is None and number in answered for number, pair, is_request in expected)
    kinds = [Lights]
    with contextlib.suppress(ImportError):
        from kdissect._light_c import Lights as CLights

        kinds.append(CLights)
    for kind in kinds:
        found = [(entry[0], entry[8], entry[1]) for entry in paired_run(kind, payloads, None, **hold)
                 if isinstance(entry[0], int) and not isinstance(entry[1], str)]
        assert found == expected, kind


def written(message: Any) -> tuple[int, int | None, bool]:
    """A message's number, its pair's as one process writes it at once, and its direction."""
    if message.is_request:
        return message.number, None if message._pair is None else message._pair.number, True
    return message.number, message._asked, False


# -- writing the released texts: `_light_c.write_texts` against `write_texts` ----------


LATE = notes.warn("late", id="kafka.response_overdue")


def released_texts(rng: random.Random, rings: list[Ring], light: type[Any], count: int) -> list[tuple[Any, Any]]:
    """Messages as a merge releases them for the text output: each with its worker's text,
    bytes or a place in its ring, and now and then one the Python must write (notes that
    pairing gave it, no text, a text of another kind, a number of six places and more)."""
    connection = Connection(1, "client", "server", False)
    released = []
    number = rng.randrange(1, 5) * 10 ** rng.choice((0, 4, 6))
    for _ in range(count):
        number += rng.randrange(1, 3)
        found = [LATE] * rng.choice((0, 0, 0, 1, 2))
        message = light(number, connection, rng.random() < 0.5, 7, True, 10 ** 18, 100, (), found)
        text = bytes(rng.randrange(32, 127) for _ in range(rng.choice((0, 1, 40, 300, 5_000))))
        ring = rng.choice(rings)
        tail: Any = text
        if len(text) > 100 and rng.random() < 0.7:
            place = ring.put(text)
            tail = place if type(place) is bytes else Piece(ring, *place)
        kind = rng.random()
        if kind < 0.02:
            prepared: Any = None
        elif kind < 0.04:
            prepared = (tail, len(found), 0, 0, 0, 0)  # not the text output's
        else:
            prepared = (tail, len(found) + (rng.random() < 0.03), 0, 0)  # the notes differ: Python
        released.append((message, prepared))
    return released


def texts_run(write: Any, released: list[tuple[Any, Any]], fd: int) -> list[int]:
    """`released` written by `write`, a marker written for each message it leaves (with its
    index); the indexes it left."""
    import os

    left, at = [], 0
    while at < len(released):
        at = write(fd, released, at)
        if at < len(released):
            os.write(fd, b"<%d>" % at)
            left.append(at)
            at += 1
    return left


@pytest.mark.parametrize("seed", range(8))
def test_the_texts_in_c_are_written_as_the_python_writes_them(seed: int, tmp_path: Any) -> None:
    """The same bytes to a file, the same messages left to the caller, the rings freed as
    far: on lists of every size round the writev limit, texts in bytes and in two rings."""
    from kdissect import light

    write_c = pytest.importorskip("kdissect._light_c").write_texts
    from kdissect._light_c import Light as CLight

    rng = random.Random(700 + seed)
    count = rng.choice((0, 1, 511, 512, 513, 1_500))
    found = []
    for write, kind in ((light.write_texts, Light), (write_c, CLight), (write_c, Light)):
        rings = [Ring(1 << 20) for _ in range(2)]
        released = released_texts(random.Random(seed), rings, kind, count)
        path = tmp_path / f"out-{len(found)}"
        with open(path, "wb") as out:
            left = texts_run(write, released, out.fileno())
        found.append((path.read_bytes(), left, [ring.written.value for ring in rings]))
    assert found[1] == found[0]
    assert found[2] == found[0]
    expected = b"".join(b"%6d" % m.number + read_all(p[0]) if i not in found[0][1] else b"<%d>" % i
                        for i, (m, p) in enumerate(released))
    assert found[0][0] == expected


def test_the_texts_in_c_go_whole_through_a_small_pipe() -> None:
    """A pipe that takes a little at a time, the writing interrupted by a signal every
    millisecond (writev then writes part of what it is given, or nothing): every byte comes
    out, in order."""
    import fcntl
    import os
    import signal
    import threading
    import time

    write_c = pytest.importorskip("kdissect._light_c").write_texts
    from kdissect._light_c import Light as CLight

    rings = [Ring(1 << 20)]
    released = [(m, (p[0], len(m.notes), 0, 0)) for m, p in released_texts(random.Random(3), rings, CLight, 800) if p]
    expected = b"".join(b"%6d" % m.number + read_all(p[0]) for m, p in released)
    reading, writing = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(writing, 1031, 4096)  # F_SETPIPE_SZ: the least a pipe holds
    got = bytearray()

    def drain() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the writer is interrupted
        while chunk := os.read(reading, 1000):
            got.extend(chunk)
            time.sleep(0.0002)

    alarms = []
    before = signal.signal(signal.SIGALRM, lambda *_: alarms.append(1))
    reader = threading.Thread(target=drain)
    reader.start()
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    try:
        assert write_c(writing, released, 0) == len(released)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        os.close(writing)
        reader.join()
        os.close(reading)
    assert alarms  # the writing was interrupted
    assert bytes(got) == expected
    assert rings[0].written.value == rings[0].end


def test_a_closed_output_is_an_error_not_a_crash() -> None:
    import os

    write_c = pytest.importorskip("kdissect._light_c").write_texts
    from kdissect._light_c import Light as CLight

    released = released_texts(random.Random(4), [Ring(1 << 16)], CLight, 5)
    reading, writing = os.pipe()
    os.close(reading)
    try:
        with pytest.raises(BrokenPipeError):
            texts_run(write_c, released, writing)
    finally:
        os.close(writing)
    with pytest.raises(TypeError):
        write_c(1, tuple(released), 0)
    with pytest.raises(ValueError):
        write_c(-1, released, 0)
