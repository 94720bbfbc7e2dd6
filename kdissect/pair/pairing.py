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

from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence

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
    request.notes.append(notes.note(
        f"no response within {(newest_ns - request.frame.last_ns) / 1e9:.3f} s and {later} later "
        f"message{'' if later == 1 else 's'}: shown before any answer (hold limit)",
        id="kafka.response_overdue"))


def _unanswered(request: Message) -> None:
    request.notes.append(notes.note("request never answered in this capture", id="kafka.unanswered"))


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
