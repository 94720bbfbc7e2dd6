"""Light messages for `--jobs` text: what the merge reads of a message, carried and merged cheaply.

Where the workers make all the text of their messages (a `prepare` whose `light` is true,
`cli._TextLines`), the merging process reads of a message only what pairing and releasing in
capture order read (`pair.pairing`) and its notes. It makes a `Light` of that, not a Message.

Those few fields are ints, so a worker sends a batch of its events as a few arrays of 64-bit
ints (`Columns`): each event's key, each message's fields. The parent then unpickles a few
byte strings rather than a tuple for each event, and puts the workers' events in order with
numpy, a batch at a time (`merged`), rather than one heap step an event. What is not an int
goes as it is: the other events (a connection found, a note), and a message's notes or its
text when the text ring had no room (`rare`). A batch that holds an int beyond 64 bits (a
capture time far off) goes as the events themselves (`Columns.payload`), and from then on
the merge takes every worker's events one by one (`kdissect.parallel._Merge.messages`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from typing import Any

from kdissect.ingest.framing import Connection
from kdissect.notes import Note
from kdissect.spool import Piece, Ring

ROW = 10  # ints a message takes in a batch: see `Columns.message`
NOTHING_RARE: tuple[tuple[Note, ...], tuple[Note, ...], bytes | None] = ((), (), None)  # a message's usual `rare`
REQUEST, EXPECTS, CORRELATED = 1, 2, 4  # a message's flags

Key = tuple[int, int, int, int, int]  # where an event goes in one process's order (`kdissect.parallel`)
Event = tuple[Key, str, Any]  # (key, what, event): a worker's event as `kdissect.parallel` sends it
Placed = tuple[Key, int, str, Any]  # (key, worker, what, event): as the parent merges them


class Light:
    """A message as the merge makes it when its worker made all that is shown of it: what
    pairing and sequencing read of a message (`pair.pairing`), and its notes, but neither its
    bytes nor its header fields, which only the worker needed. It is its own frame: what they
    read of a frame, its connection and last packet's time, is its own."""

    __slots__ = ("_pair", "connection", "correlation_id", "expects_response", "frame_notes", "is_request",
                 "last_ns", "notes", "number", "size")

    def __init__(self, number: int, connection: Connection, is_request: bool, correlation_id: int | None,
                 expects_response: bool, last_ns: int, size: int, frame_notes: tuple[Note, ...],
                 notes: list[Note]) -> None:
        self.number, self.connection, self.is_request = number, connection, is_request
        self.correlation_id, self.expects_response = correlation_id, expects_response
        self.last_ns, self.size, self.frame_notes, self.notes = last_ns, size, frame_notes, notes
        self._pair: Light | None = None  # a request's response (a response's request is not needed)

    @property
    def frame(self) -> Light:
        return self

    def link(self, response: Light) -> None:
        self._pair = response

    def all_notes(self) -> list[Note]:
        """As `Message.all_notes` (the tree's are in the text the worker made)."""
        return [*self.frame_notes, *self.notes]


class Columns:
    """A batch of a light worker's events, in its order, as the pipe carries it: each key's
    five ints in `keys`; in `refs` for each event, a message's place among the batch's
    messages, whose ROW ints are in `rows` (`message`), or for any other event -1 less its
    place in `others`; and by its place among the batch's messages, what of a message is not
    an int (`rare`)."""

    __slots__ = ("keys", "others", "rare", "refs", "rows")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.refs: list[int] = []
        self.rows: list[int] = []
        self.others: list[tuple[str, Any]] = []
        self.rare: dict[int, tuple[tuple[Note, ...], tuple[Note, ...], bytes | None]] = {}

    def __len__(self) -> int:
        return len(self.refs)

    def add(self, key: Key, what: str, event: Any) -> None:
        """An event that is not a message."""
        self.keys += key
        self.refs.append(-1 - len(self.others))
        self.others.append((what, event))

    def message(self, key: Key, local: int, is_request: bool, correlation_id: int | None,
                expects_response: bool, last_ns: int, size: int, frame_notes: tuple[Note, ...],
                header_notes: tuple[Note, ...], ready: tuple[Any, int, int, int]) -> None:
        """A message: its connection's index in the worker, flags, correlation id, last packet's
        time, size, where its text lies in the worker's ring (start and length; -1 when the
        text itself is in `rare`), and the rest of what `prepare` made of it (`ready`)."""
        text, notes, cut, end = ready
        if type(text) is tuple:
            start, length = text
            text = None
        else:
            start = length = -1
        row = len(self.rows) // ROW
        if text is not None or frame_notes or header_notes:
            self.rare[row] = (frame_notes, header_notes, text)
        self.keys += key
        self.refs.append(row)
        self.rows += (local, is_request | expects_response << 1 | (correlation_id is not None) << 2,
                      correlation_id or 0, last_ns, size, start, length, notes, cut, end)

    def payload(self, read: int) -> tuple[str, Any]:
        """What goes down the pipe: ("lights", arrays and the rest), or ("events", ...) as any
        worker sends them, when an int does not fit in 64 bits."""
        try:
            keys, refs, rows = (array("q", ints).tobytes() for ints in (self.keys, self.refs, self.rows))
        except OverflowError:
            return "events", (expanded(self.keys, self.refs, self.rows, self.others, self.rare), read)
        return "lights", (keys, refs, rows, self.others, self.rare, read)


def expanded(keys: Any, refs: Any, rows: Any, others: list[tuple[str, Any]],
             rare: dict[int, Any]) -> list[Event]:
    """A batch's events as (key, what, event), the event of a message as `kdissect.parallel`
    sends it one by one ("light"). `keys` from the batch's first event of `refs` on."""
    found: list[Event] = []
    for at, ref in enumerate(refs):
        key: Key = (keys[5 * at], keys[5 * at + 1], keys[5 * at + 2], keys[5 * at + 3], keys[5 * at + 4])
        if ref < 0:
            found.append((key, *others[-1 - ref]))
            continue
        local, flags, correlation_id, last_ns, size, start, length, notes, cut, end = rows[ROW * ref:ROW * ref + ROW]
        frame_notes, header_notes, text = rare.get(ref, NOTHING_RARE)
        found.append((key, "light", (local, bool(flags & REQUEST), correlation_id if flags & CORRELATED else None,
                                     bool(flags & EXPECTS), last_ns, size, frame_notes, header_notes,
                                     ((start, length) if length >= 0 else text, notes, cut, end))))
    return found


def received(payload: tuple[Any, ...]) -> list[Event]:
    """The events of a "lights" payload, one by one."""
    keys, refs, rows, others, rare, _read = payload
    return expanded(array("q", keys), array("q", refs), array("q", rows), others, rare)


class _Batch:
    """A "lights" batch in the merge: its keys as an array (a row each), and from `at` on
    what of it is not merged yet."""

    __slots__ = ("at", "keys", "others", "rare", "refs", "rows")

    def __init__(self, payload: tuple[Any, ...]) -> None:
        import numpy as np

        keys, refs, rows, self.others, self.rare, _read = payload
        self.keys = np.frombuffer(keys, dtype=np.int64).reshape(-1, 5)
        self.refs = array("q", refs).tolist()
        self.rows = np.frombuffer(rows, dtype=np.int64).reshape(-1, ROW).tolist()
        self.at = 0


def merged(batches: list[Iterator[tuple[str, tuple[Any, ...]]]], connections: dict[tuple[int, int], Connection],
           rings: list[Ring] | None, prepared: dict[int, Any],
           other: Callable[[int, str, Any], None]) -> Iterator[Light | tuple[list[Iterator[Placed]], int]]:
    """The workers' events in one process's order (as `heapq.merge` of their keys, a key's
    ties broken by the worker's index): each message as a `Light`, numbered from 1, with
    what `prepare` made of it in `prepared`; each other event handed to `other(worker,
    what, event)`. `batches`: each worker's payloads, in its order. Should one come that is
    not "lights", the merge stops there and yields, last, each worker's events not yet
    merged (as iterators of (key, worker, what, event)) and the number of the last message."""
    import numpy as np

    current: list[_Batch | None] = [None] * len(batches)
    active = list(range(len(batches)))
    number = 0
    while True:
        for worker in list(active):
            batch = current[worker]
            while batch is None or batch.at == len(batch.refs):
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
        parts = [(worker, batch) for worker in active if (batch := current[worker]) is not None]
        if not parts:
            return
        # Every event up to the least of the workers' last keys can be merged now: no event to
        # come sorts before it.
        keys = np.concatenate([batch.keys[batch.at:] for _worker, batch in parts])
        sizes = [len(batch.refs) - batch.at for _worker, batch in parts]
        who = np.repeat([worker for worker, _batch in parts], sizes)
        at = np.concatenate([np.arange(batch.at, len(batch.refs)) for _worker, batch in parts])
        if len(parts) == 1:
            order = np.arange(len(keys))
        else:
            order = np.lexsort(keys.T[::-1])  # stable: equal keys stay in the workers' order
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            order = order[:int(rank[np.cumsum(sizes) - 1].min()) + 1]
        chosen = dict(parts)
        for worker, place in zip(who[order].tolist(), at[order].tolist(), strict=True):
            batch = chosen[worker]
            row = batch.refs[place]
            if row < 0:
                other(worker, *batch.others[-1 - row])
                continue
            local, flags, correlation_id, last_ns, size, start, length, notes, cut, end = batch.rows[row]
            frame_notes, header_notes, text = batch.rare.get(row, NOTHING_RARE) if batch.rare else NOTHING_RARE
            number += 1
            prepared[number] = (Piece(rings[worker], start, length) if length >= 0 and rings is not None
                                else text, notes, cut, end)
            yield Light(number, connections[worker, local], bool(flags & REQUEST),
                        correlation_id if flags & CORRELATED else None, bool(flags & EXPECTS), last_ns, size,
                        frame_notes, list(header_notes))
        for worker, count in zip(*np.unique(who[order], return_counts=True), strict=True):
            chosen[int(worker)].at += int(count)


def _rest(worker: int, batch: _Batch | None, batches: Iterator[tuple[str, Any]],
          came: tuple[str, Any] | None) -> Iterator[Placed]:
    """A worker's events not merged yet, one by one: what is left of its batch, then `came`
    (the payload that stopped the merge), then its next payloads."""
    for key, what, event in _rest_events(batch, batches, came):
        yield key, worker, what, event


def _rest_events(batch: _Batch | None, batches: Iterator[tuple[str, Any]],
                 came: tuple[str, Any] | None) -> Iterator[Event]:
    if batch is not None and batch.at < len(batch.refs):
        rows = [value for row in batch.rows for value in row]
        yield from expanded(batch.keys[batch.at:].ravel().tolist(), batch.refs[batch.at:], rows, batch.others,
                            batch.rare)
    if came is not None:
        yield from _events(*came)
    for kind, payload in batches:
        yield from _events(kind, payload)


def _events(kind: str, payload: Any) -> list[Event]:
    return received(payload) if kind == "lights" else payload[0]
