"""Stage 6: pair each response with its request, per connection, by correlation id.

Kafka answers the requests of one connection in the order they were sent, so
the oldest request in flight is the one a response should match; a match
further back is noted as out of FIFO order. Once paired, a response knows its
API key and version (a response header carries neither).

`Sequencer` then releases messages in capture order once they are settled, so
that a request leaves the pipeline already knowing its response. Holding
messages back is bounded, in count and in capture time, so a request that is
never answered cannot stall the output or pin memory.

Of a message, both read only its number, direction, correlation id, whether it expects
a response, notes, `size`, `link` and pair, and its frame's connection and last
packet's time (what `kdissect.parallel` also gives the lighter messages it merges).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kdissect import notes
from kdissect.pair.message import Message

HOLD_SECONDS = 30.0  # release an unanswered request after this much capture time
HOLD_MESSAGES = 10_000  # and never hold more messages than this
HOLD_BYTES = 64 * 1024 * 1024  # nor more frame bytes than this


class Pairer:
    """Matches responses to requests; keeps only the requests still in flight."""

    def __init__(self) -> None:
        self._in_flight: dict[int, OrderedDict[int, Message]] = {}

    def add(self, message: Message) -> None:
        correlation_id = message.correlation_id
        if correlation_id is None:
            return
        index = message.frame.connection.index
        flight = self._in_flight.get(index)
        if flight is None:
            flight = self._in_flight[index] = OrderedDict()
        if message.is_request:
            if message.expects_response:  # not Produce with acks=0 (the broker sends nothing back)
                earlier = flight.pop(correlation_id, None)
                if earlier is not None:
                    _duplicate(message, earlier)
                flight[correlation_id] = message
                if len(flight) > HOLD_MESSAGES:
                    flight.popitem(last=False)
            return
        request = flight.pop(correlation_id, None)  # the usual case: the oldest, in FIFO order
        if request is not None and (not flight or next(iter(flight.values())).number >= request.number):
            request.link(message)
        else:
            self._add_response(flight, message, request)

    def _add_response(self, flight: OrderedDict[int, Message], response: Message,
                      request: Message | None) -> None:
        """A response whose request is missing, or not the oldest in flight."""
        if request is None:
            _missing(response)
            return
        _out_of_order(response, next(iter(flight.values())))
        request.link(response)


# The notes pairing and releasing give, one function each (`kdissect.light`'s C merge makes
# them with these too).


def _duplicate(request: Message, earlier: Message) -> None:
    request.notes.append(notes.warn(
        f"duplicate correlation id {request.correlation_id} in flight "
        f"(message #{earlier.number} still unanswered)", id="kafka.duplicate_correlation_id"))


def _missing(response: Message) -> None:
    from kdissect.decode.dissect import REQUEST_MISSING  # the decode tier only when needed

    response.notes.append(notes.warn(REQUEST_MISSING, id="kafka.request_missing"))


def _out_of_order(response: Message, oldest: Message) -> None:
    response.notes.append(notes.warn(
        f"response out of FIFO order: an older request on this connection (#{oldest.number}) is still unanswered",
        id="kafka.response_out_of_order"))


def _overdue(request: Message, newest_ns: int, later: int) -> None:
    request.notes.append(overdue_note(newest_ns - request.frame.last_ns, later))


def _unanswered(request: Message) -> None:
    request.notes.append(UNANSWERED)


def overdue_note(waited_ns: int, later: int) -> notes.Note:
    return notes.note(f"no response within {waited_ns / 1e9:.3f} s and {later} later "
                      f"message{'' if later == 1 else 's'}: shown before any answer (hold limit)",
                      id="kafka.response_overdue")


UNANSWERED = notes.note("request never answered in this capture", id="kafka.unanswered")


class Sequencer:
    """Releases messages in capture order once each is settled.

    A response is settled at once; a request when it is answered, when no
    answer is expected (Produce with acks=0), or when holding it longer would
    exceed the bounds (capture time, messages, or frame bytes held behind it). Requests still unanswered when released at the end of
    the capture get a note.
    """

    def __init__(self, hold_seconds: float = HOLD_SECONDS, hold_messages: int = HOLD_MESSAGES,
                 hold_bytes: int = HOLD_BYTES) -> None:
        self._queue: deque[Message] = deque()
        self._hold_ns = round(hold_seconds * 1e9)
        self._hold_messages = hold_messages
        self._hold_bytes = hold_bytes
        self._held_bytes = 0  # frame bytes of the messages in the queue

    def push(self, message: Message) -> Sequence[Message]:
        """Add the next message; the messages now settled at the head, in order."""
        queue = self._queue
        queue.append(message)
        self._held_bytes += message.size
        newest = message.frame.last_ns
        head = queue[0]
        if (head.is_request and head._pair is None and head.expects_response  # not _settled(head)
                and head.correlation_id is not None and len(queue) <= self._hold_messages
                and self._held_bytes <= self._hold_bytes and newest - head.frame.last_ns <= self._hold_ns):
            return ()  # the oldest still waits for its answer, and may: nothing leaves yet
        released = []
        while queue:
            head = queue[0]
            if (head.is_request and head._pair is None and head.expects_response  # not _settled(head)
                    and head.correlation_id is not None):
                if (len(queue) <= self._hold_messages and self._held_bytes <= self._hold_bytes
                        and newest - head.frame.last_ns <= self._hold_ns):
                    break
                _overdue(head, newest, len(queue) - 1)
            released.append(queue.popleft())
            self._held_bytes -= head.size
        return released

    def finish(self) -> Iterator[Message]:
        while self._queue:
            head = self._queue.popleft()
            if not _settled(head):
                _unanswered(head)
            yield head


def _settled(message: Message) -> bool:
    return (
        not message.is_request
        or message._pair is not None  # answered (no need to follow the weak reference)
        or not message.expects_response
        or message.correlation_id is None
    )


def pair_messages(messages: Iterable[Message]) -> Iterator[Message]:
    """Pair and re-sequence a stream of messages in capture order."""
    pairer, sequencer = Pairer(), Sequencer()
    add, push = pairer.add, sequencer.push
    for message in messages:
        add(message)
        yield from push(message)
    yield from sequencer.finish()


def release_notes(waiting: Any, answered_at: Any, last_ns: Any, size: Any, hold_seconds: float = HOLD_SECONDS,
                  hold_messages: int = HOLD_MESSAGES, hold_bytes: int = HOLD_BYTES) -> list[tuple[int, notes.Note]]:
    """The notes releasing in capture order (`Sequencer`) gives messages numbered and paired
    already (for a table made without the messages: `kdissect.present.parallel_tables`),
    each with its place in capture order. Arrays in capture order: whether the message is a
    request that waits for an answer (`waiting`: one that expects a response and has a
    correlation id), the place of its response (`answered_at`: the number of messages
    where it has none), its last packet's time (int64, or Python ints) and its size.

    A waiting request is released unanswered at the first message by which holding it
    breaks a bound (messages, bytes or capture time, all counted from it, and growing as
    messages come: one that an earlier request waits behind breaks its bound no sooner), if
    that comes before its response: the overdue note; without either, the capture's end
    notes it unanswered. Found with numpy where the times never go back; else by replaying
    the messages through a `Sequencer` (the reference, which a test holds this to).
    """
    import numpy as np

    count = len(size)
    heads = np.flatnonzero(np.asarray(waiting, dtype=bool))
    if not len(heads):
        return []
    times = None
    with contextlib.suppress(OverflowError):  # a time beyond 64 bits: the long way
        times = np.asarray(last_ns, dtype=np.int64)
    if times is None or (np.diff(times) < 0).any():
        return _replayed_release(heads, answered_at, last_ns, size, hold_seconds, hold_messages, hold_bytes)
    ends = np.concatenate(([0], np.cumsum(np.asarray(size, dtype=np.int64))))
    broken = np.minimum(heads + hold_messages,  # the first message that breaks a bound
                        np.searchsorted(ends, ends[heads] + hold_bytes, side="right") - 1)
    broken = np.minimum(broken, np.searchsorted(times, times[heads] + round(hold_seconds * 1e9), side="right"))
    answer = np.asarray(answered_at, dtype=np.int64)[heads]
    found = [(int(head), overdue_note(int(times[at] - times[head]), int(at - head)))
             for head, at in zip(heads[(broken < answer) & (broken < count)].tolist(),
                                 broken[(broken < answer) & (broken < count)].tolist(), strict=True)]
    found += [(head, UNANSWERED) for head in heads[(broken >= count) & (answer >= count)].tolist()]
    return sorted(found, key=lambda item: item[0])


class _Held:
    """What `Sequencer` reads of a message, for `_replayed_release`."""

    __slots__ = ("_pair", "correlation_id", "expects_response", "frame", "is_request", "last_ns", "notes", "size")

    def __init__(self, waiting: bool, last_ns: int, size: int) -> None:
        self.is_request = self.expects_response = waiting
        self.correlation_id = 0 if waiting else None
        self._pair: bool | None = None
        self.frame, self.last_ns, self.size = self, last_ns, size
        self.notes: list[notes.Note] = []


def _replayed_release(heads: Any, answered_at: Any, last_ns: Any, size: Any, hold_seconds: float,
                      hold_messages: int, hold_bytes: int) -> list[tuple[int, notes.Note]]:
    """`release_notes` the long way: the messages through a `Sequencer`, each request's
    response making it answered when it comes."""
    waiting = set(heads.tolist())
    answers = {int(answered_at[head]): head for head in waiting}
    held = [_Held(place in waiting, int(time), int(bytes_)) for place, (time, bytes_)
            in enumerate(zip(last_ns, size, strict=True))]
    sequencer = Sequencer(hold_seconds, hold_messages, hold_bytes)
    for place, message in enumerate(held):
        request = answers.get(place)
        if request is not None:
            held[request]._pair = True
        sequencer.push(message)  # type: ignore[arg-type]
    for _message in sequencer.finish():
        pass
    return [(place, note) for place in sorted(waiting) for note in held[place].notes]
