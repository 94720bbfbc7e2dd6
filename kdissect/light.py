"""Light messages for `--jobs` text and JSON: what the merge reads of a message, carried and merged cheaply.

Where the workers make all the text of their messages (a `prepare` whose `light` is true,
`cli._TextLines`, `cli._JsonLines`), the merging process reads of a message only what pairing
and releasing in capture order read (`pair.pairing`), its notes and its pair's number. It
makes a `Light` of that, not a Message.

A worker sends the keys of a batch's events as one string of 64-bit ints (`Columns`), and
the events without them; a usual message (no notes, its text in the worker's ring) goes
whole as ints beside its key (`plain`), which the merge reads without a tuple unpickled.
The parent puts the workers' events in order with numpy, a batch at a time, up to the
least of the workers' last keys (`merged`), rather than one heap step an event, each event
made again into a tuple with its key and worker. A batch with a key beyond
64 bits (a capture time far off) goes as its events (`Columns.payload`), and from then on
the merge takes every worker's events one by one (`kdissect.parallel._Merge.messages`).

The Lights are paired and released in capture order as `pair.pairing` does it (`Lights`),
a round of the merge at a time: in C where that is built (`_light_c`, beside the Python
it mirrors): in a replay of a merge of 27,132 messages, 1.9 µs a message rather than 4.6.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from kdissect.ingest.framing import Connection
from kdissect.native import native_or
from kdissect.notes import Note
from kdissect.pair.pairing import HOLD_BYTES, HOLD_MESSAGES, HOLD_SECONDS, Pairer, Sequencer
from kdissect.spool import Piece, Ring, number_text, write_items

Key = tuple[int, int, int, int, int]  # where an event goes in one process's order (`kdissect.parallel`)
Event = tuple[Key, str, Any]  # (key, what, event): a worker's event as `kdissect.parallel` sends it
Placed = tuple[Key, int, str, Any]  # (key, worker, what, event): as the parent merges them
Released = list[tuple[Any, Any]]  # (Light, what `prepare` made of it): as pairing releases them


class Light:
    """A message as the merge makes it when its worker made all that is shown of it: what
    pairing and sequencing read of a message (`pair.pairing`), and its notes, but neither its
    bytes nor its header fields, which only the worker needed. It is its own frame: what they
    read of a frame, its connection and last packet's time, is its own."""

    __slots__ = ("_asked", "_pair", "connection", "correlation_id", "expects_response", "frame_notes", "is_request",
                 "last_ns", "notes", "number", "size")

    def __init__(self, number: int, connection: Connection, is_request: bool, correlation_id: int | None,
                 expects_response: bool, last_ns: int, size: int, frame_notes: tuple[Note, ...],
                 notes: list[Note]) -> None:
        self.number, self.connection, self.is_request = number, connection, is_request
        self.correlation_id, self.expects_response = correlation_id, expects_response
        self.last_ns, self.size, self.frame_notes, self.notes = last_ns, size, frame_notes, notes
        self._pair: Light | None = None  # a request's response
        # its pair's number: a response's request's once paired (the request itself is not
        # needed), a request's response's once released (`Lights`): what JSON writes
        self._asked: int | None = None

    @property
    def frame(self) -> Light:
        return self

    @property
    def pair_number(self) -> int | None:
        """As `Message.pair_number` when the message is written: at its release, where one
        process writes it (a request's response may come, and pair, after it was released)."""
        return self._asked

    def link(self, response: Light) -> None:
        self._pair = response
        response._asked = self.number

    def all_notes(self) -> list[Note]:
        """As `Message.all_notes` (the tree's are in the text the worker made)."""
        return [*self.frame_notes, *self.notes]


KEY = 5  # ints of an event's key
ROW = KEY + 10  # ints of an event in a batch's rows: its key, then a plain message's fields (`plain`)
NO_FIELDS = (0,) * (ROW - KEY)  # the rest of the row of an event that is not a plain message
MESSAGE, OTHER, PLAIN = 0, 1, 2  # the kinds of event in a batch


def plain(fields: tuple[Any, ...]) -> tuple[int, ...] | None:
    """A message's fields (`Columns.message`) as the ten ints its row holds, when it is a
    usual one: without notes, with a correlation id, its text a place in the worker's ring
    (`cli._TextLines`), each int within 64 bits: (connection, 1 if a request + 2 if it
    expects a response, correlation id, last packet's time, size, the text's offset and
    length, notes, cut, end); else None (`pack`)."""
    local, is_request, correlation_id, expects_response, last_ns, size, frame_notes, header_notes, ready = fields
    if (type(frame_notes) is not tuple or frame_notes or type(header_notes) is not tuple or header_notes
            or type(is_request) is not bool or type(expects_response) is not bool
            or type(ready) is not tuple or len(ready) != 4 or type(ready[0]) is not tuple or len(ready[0]) != 2):
        return None
    row = (local, is_request + 2 * expects_response, correlation_id, last_ns, size, *ready[0], *ready[1:])
    if not all(type(value) is int and -(1 << 63) <= value < 1 << 63 for value in row):
        return None
    return row


def unplain(row: Sequence[int]) -> tuple[Any, ...]:
    """The fields of a plain message (`plain`) from the ten ints of its row."""
    local, flags, correlation_id, last_ns, size, start, length, notes, cut, end = row
    return (local, bool(flags & 1), correlation_id, bool(flags & 2), last_ns, size, (), (),
            ((start, length), notes, cut, end))


def pack(rows: bytearray, key: tuple[int, ...], sequence: int | None, fields: tuple[Any, ...] | None) -> bool:
    """An event's row appended to `rows` (`ROW` 64-bit ints): its key (`key`, and `sequence`
    unless `key` has all five), then the fields of a plain message (`plain`; `fields`, None
    for an event that is not a message), else zeros; whether it was a plain message. A key
    beyond 64 bits raises OverflowError, and nothing is appended. The reference of
    `_light_c.pack`."""
    if len(key) != KEY - (sequence is not None) or not all(type(value) is int for value in key):
        raise TypeError("pack: a key five ints, or four and a sequence")
    row = None if fields is None else plain(fields)
    rows += array("q", (*key, *(() if sequence is None else (sequence,)), *(row or NO_FIELDS))).tobytes()
    return row is not None


class Columns:
    """A batch of a light worker's events, in its order, as the pipe carries it: in `rows`
    `ROW` 64-bit ints an event, its key's five then, for a plain message, its fields
    (`plain`); `kinds`, MESSAGE, OTHER (any other event) or PLAIN; and in `items` each event
    itself: a message's fields as `kdissect.parallel` makes them (`message`), any other event
    as (what, event), None for a plain message. Should a key not fit in 64 bits, the batch
    keeps its events as they are from then on (`wide`) and goes so."""

    __slots__ = ("items", "kinds", "rows", "wide")

    def __init__(self) -> None:
        self.rows = bytearray()
        self.kinds = bytearray()
        self.items: list[tuple[Any, ...] | None] = []
        self.wide: list[Event] | None = None  # every event, once a key did not fit

    def __len__(self) -> int:
        return len(self.kinds)

    def add(self, key: Key, what: str, event: Any) -> None:
        """An event that is not a message."""
        if self.wide is None:
            try:
                _pack(self.rows, key, None, None)
            except OverflowError:
                self._widen()
            else:
                self.kinds.append(OTHER)
                self.items.append((what, event))
                return
        self.kinds.append(OTHER)
        self.wide.append((key, what, event))  # type: ignore[union-attr]

    def message(self, key: tuple[int, int, int, int], sequence: int, fields: tuple[Any, ...]) -> None:
        """A message: (its connection's index in the worker, whether it is a request, its
        correlation id, whether it expects a response, its last packet's time, its size, its
        frame's notes, its header's, what `prepare` made of it), keyed `(*key, sequence)`."""
        if self.wide is None:
            try:
                packed = _pack(self.rows, key, sequence, fields)
            except OverflowError:
                self._widen()
            else:
                self.kinds.append(PLAIN if packed else MESSAGE)
                self.items.append(None if packed else fields)
                return
        self.kinds.append(MESSAGE)
        self.wide.append(((*key, sequence), "light", fields))  # type: ignore[union-attr]

    def _widen(self) -> None:
        self.wide = expanded(array("q", self.rows), self.kinds, self.items)

    def payload(self, read: int) -> tuple[str, Any]:
        """What goes down the pipe: ("lights", the rows as bytes, the kinds, the items), or
        ("events", ...) as any worker sends them, when a key does not fit in 64 bits."""
        if self.wide is not None:
            return "events", (self.wide, read)
        return "lights", (bytes(self.rows), bytes(self.kinds), self.items, read)


def expanded(keys: Any, kinds: Any, items: list[Any]) -> list[Event]:
    """A batch's events as (key, what, event) (`keys`: their rows, one after another), a
    message's as `kdissect.parallel` sends it one by one ("light")."""
    events: list[Event] = []
    for at, (kind, item) in enumerate(zip(kinds, items, strict=True)):
        row = keys[ROW * at:ROW * (at + 1)]
        key = tuple(row[:KEY])
        if kind == OTHER:
            events.append((key, *item))
        else:
            events.append((key, "light", unplain(row[KEY:]) if kind == PLAIN else item))
    return events


def received(payload: tuple[Any, ...]) -> list[Event]:
    """The events of a "lights" payload, one by one."""
    keys, kinds, items, _read = payload
    return expanded(array("q", keys), kinds, items)


class _Batch:
    """A "lights" batch in the merge: its rows as they came (`rows`, bytes) and as an array
    (`table`), its keys (`keys`, the array's first columns), and from `at` on what of it is
    not merged yet."""

    __slots__ = ("at", "items", "keys", "kinds", "rows", "table")

    def __init__(self, payload: tuple[Any, ...]) -> None:
        import numpy as np

        self.rows, self.kinds, self.items, _read = payload
        self.table = np.frombuffer(self.rows, dtype=np.int64).reshape(-1, ROW)
        self.keys = self.table[:, :KEY]
        self.at = 0


def merged(batches: list[Iterator[tuple[str, tuple[Any, ...]]]], connections: dict[tuple[int, int], Connection],
           rings: list[Ring] | None, lights: Lights | Any,
           other: Callable[[int, str, Any], None]) -> Iterator[Released | tuple[list[Iterator[Placed]], int]]:
    """The workers' events in one process's order (as `heapq.merge` of their keys, a key's
    ties broken by the worker's index): each message made a `Light`, numbered from 1, paired
    and released in capture order by `lights`, which yields what it released of each
    round; each other event handed to `other(worker, what, event)`. `batches`: each
    worker's payloads, in its order. Should one come that is not "lights", the merge stops
    there and yields, last, each worker's events not yet merged (as iterators of (key,
    worker, what, event)) and the number of the last message."""
    import numpy as np

    current: list[_Batch | None] = [None] * len(batches)
    active = list(range(len(batches)))
    items: list[list[Any] | None] = [None] * len(batches)
    kinds: list[bytes | None] = [None] * len(batches)
    rows: list[bytes | None] = [None] * len(batches)
    number = 0
    while True:
        for worker in list(active):
            batch = current[worker]
            while batch is None or batch.at == len(batch.kinds):
                kind, payload = next(batches[worker], ("", ()))
                if not kind:
                    active.remove(worker)
                    break
                if kind != "lights":  # one by one from here on
                    rest = [_rest(index, current[index], batches[index], (kind, payload) if index == worker else None)
                            for index in range(len(batches))]
                    yield rest, number
                    return
                batch = current[worker] = _Batch(payload)
                items[worker], kinds[worker], rows[worker] = batch.items, batch.kinds, batch.rows
        parts = [(worker, batch) for worker in active if (batch := current[worker]) is not None]
        if not parts:
            return
        # Every event up to the least of the workers' last keys can be merged now: no event to
        # come sorts before it.
        keys = np.concatenate([batch.keys[batch.at:] for _worker, batch in parts])
        sizes = [len(batch.kinds) - batch.at for _worker, batch in parts]
        who = np.repeat([worker for worker, _batch in parts], sizes)
        at = np.concatenate([np.arange(batch.at, len(batch.kinds)) for _worker, batch in parts])
        if len(parts) == 1:
            order = np.arange(len(keys))
        else:
            order = np.lexsort(keys.T[::-1])  # stable: equal keys stay in the workers' order
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            order = order[:int(rank[np.cumsum(sizes) - 1].min()) + 1]
        for worker, count in enumerate(np.bincount(who[order], minlength=len(batches)).tolist()):
            if count:
                current[worker].at += count  # type: ignore[union-attr]
        who_in_order, at_in_order = who[order].tolist(), at[order].tolist()
        index = 0
        while index < len(who_in_order):
            number, released, index = lights.round(number, who_in_order, at_in_order, index, items, kinds, rows,
                                                   connections, rings, other)
            if released:
                yield released


def made(number: int, worker: int, fields: tuple[Any, ...], connections: dict[tuple[int, int], Connection],
         rings: list[Ring] | None, prepared: dict[int, Any], light: type[Any] = Light) -> Any:
    """Message `number`, of `worker`, from its fields (`Columns.message`), a `light`; what
    `prepare` made of it goes in `prepared`, its text as a `Piece` of the worker's ring where
    it lies there."""
    local, is_request, correlation_id, expects_response, last_ns, size, frame_notes, header_notes, ready = fields
    if rings is not None and type(ready[0]) is tuple:  # a place in the worker's ring
        ready = (Piece(rings[worker], *ready[0]), *ready[1:])
    prepared[number] = ready
    return light(number, connections[worker, local], is_request, correlation_id, expects_response, last_ns, size,
                 frame_notes, list(header_notes) if header_notes else [])


class Lights:
    """Pairing and releasing in capture order (`pair.pairing`) of the Lights a merge makes,
    each released with what `prepare` made of it (taken from `prepared`): the reference of
    `_light_c.Lights`, which does the same in C, round after round."""

    light = Light  # what it makes of a message's fields

    def __init__(self, prepared: dict[int, Any], hold_seconds: float = HOLD_SECONDS,
                 hold_messages: int = HOLD_MESSAGES, hold_bytes: int = HOLD_BYTES) -> None:
        self.prepared = prepared
        self.add = Pairer().add
        self.sequencer = Sequencer(hold_seconds, hold_messages, hold_bytes)

    def round(self, number: int, who: list[int], at: list[int], start: int, items: list[Any], kinds: list[Any],
              rows: list[Any], connections: dict[tuple[int, int], Connection], rings: list[Ring] | None,
              other: Callable[[int, str, Any], None]) -> tuple[int, Released, int]:
        """Of each (worker, place) in `who` and `at` in turn from `start` on, the event at
        `place` of the worker's `items` (`kinds` says which are messages, and which plain ones,
        whose fields are in the worker's `rows`): a message made a Light numbered after
        `number`, paired and held until it can be released; another event handed to `other`,
        but only once what was released before it is handed on (as one process does, which
        writes those messages before a note that comes after them). The last message's
        number, what was released, in order, and where it stopped."""
        released: Released = []
        prepared = self.prepared
        for index in range(start, len(who)):
            worker, place = who[index], at[index]
            item = items[worker][place]
            kind = kinds[worker][place]
            if kind == OTHER:
                if released:
                    return number, released, index
                other(worker, *item)
                continue
            if kind == PLAIN:
                item = unplain(memoryview(rows[worker]).cast("q")[ROW * place + KEY:ROW * (place + 1)].tolist())
            number += 1
            released += self.one(made(number, worker, item, connections, rings, prepared))
        return number, released, len(who)

    def made(self, number: int, worker: int, fields: tuple[Any, ...], connections: dict[tuple[int, int], Connection],
             rings: list[Ring] | None) -> Light:
        """As `made`, the Light of the kind this pairs."""
        return made(number, worker, fields, connections, rings, self.prepared, self.light)

    def one(self, light: Light) -> Released:
        """A Light paired and held; what it releases."""
        self.add(light)  # type: ignore[arg-type]
        return self._released(self.sequencer.push(light))  # type: ignore[arg-type]

    def finish(self) -> Released:
        """Every Light still held, released at the capture's end."""
        return self._released(self.sequencer.finish())  # type: ignore[arg-type]

    def _released(self, messages: Iterable[Light]) -> Released:
        """Each message released with what `prepare` made of it; a request knows the number
        of its response so far (`Light.pair_number`)."""
        prepared = self.prepared
        released = []
        for message in messages:
            if message.is_request:
                pair = message._pair
                message._asked = None if pair is None else pair.number
            released.append((message, prepared.pop(message.number, None)))
        return released


def write_texts(fd: int, released: Released, start: int) -> int:
    """The text of the messages `released` from `start` on, each its number then the text its
    worker made (`cli._TextLines`: bytes, or a `Piece` of the worker's ring), written to file
    descriptor `fd` (`spool.write_items`), up to the first message that needs more: one whose
    prepared text is not such a (text, notes, cut, end) tuple, or whose notes are not as many
    as when its worker made its text (pairing in capture order gave it others). Its index
    (the list's length when there is none); the caller writes it, then the rest from after it.

    The reference of `_light_c.write_texts` (`texts_written`), which does the same in C."""
    items: list[Any] = []
    stop = len(released)
    for index in range(start, len(released)):
        message, prepared = released[index]
        if type(prepared) is not tuple or len(prepared) != 4 or prepared[1] != len(message.notes) \
                or not (type(prepared[0]) is bytes or type(prepared[0]) is Piece):
            stop = index
            break
        items += (number_text(message.number), prepared[0])
    if items:
        write_items(fd, items)
    return stop


def _rest(worker: int, batch: _Batch | None, batches: Iterator[tuple[str, Any]],
          came: tuple[str, Any] | None) -> Iterator[Placed]:
    """A worker's events not merged yet, one by one: what is left of its batch, then `came`
    (the payload that stopped the merge), then its next payloads."""
    for key, what, event in _rest_events(batch, batches, came):
        yield key, worker, what, event


def _rest_events(batch: _Batch | None, batches: Iterator[tuple[str, Any]],
                 came: tuple[str, Any] | None) -> Iterator[Event]:
    if batch is not None and batch.at < len(batch.kinds):
        yield from expanded(batch.table[batch.at:].ravel().tolist(), batch.kinds[batch.at:], batch.items[batch.at:])
    if came is not None:
        yield from _events(*came)
    for kind, payload in batches:
        yield from _events(kind, payload)


def _events(kind: str, payload: Any) -> list[Event]:
    return received(payload) if kind == "lights" else payload[0]


# An event's row packed (`pack`): in C where it is built.
_pack: Callable[[bytearray, tuple[int, ...], int | None, tuple[Any, ...] | None], bool] = native_or(
    "kdissect._light_c", "pack", pack)
# What pairs a merge's Lights: `_light_c.Lights` where it is built (its Lights, of its own
# `Light` type, are made by it), else `Lights` (`kdissect.native`).
new_lights: type[Lights] = native_or("kdissect._light_c", "Lights", Lights)
# What writes the released messages' text (`write_texts`): in C where it is built.
texts_written: Callable[[int, Released, int], int] = native_or("kdissect._light_c", "write_texts", write_texts)
