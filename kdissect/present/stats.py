"""`--stats`, `--interval` and `--top`: statistics over the messages shown, like tshark's -z.

Per API and version (counts, latency percentiles, bytes, error codes), per client id
(latency), per topic (records and bytes produced and fetched: `topic_stats`), per connection, per time bucket (`--interval`, like `-z io,stat`), and the
slowest exchanges (`--top N`). As text, or as one JSON object with `-T json`.

Error codes are counted in the bodies that are decoded (the APIs with loaded
definitions): for any other API the error count is "n/d" (not decoded), never 0.
"""

from __future__ import annotations

import heapq
import textwrap
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kdissect.decode.tree import printable
from kdissect.ingest.net import format_address
from kdissect.pair.message import Message
from kdissect.present.summary import REQUEST_MISSING, body_plan, error_counts
from kdissect.present.topic_stats import PRODUCE, Facts, Topics, body_facts

if TYPE_CHECKING:
    from kdissect.light import Light

NOT_DECODED = "n/d"
_PERCENTILES = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
WRAP = 100  # columns for wrapped lists of error names
EMPTY_RUN = 3  # --interval: from this many buckets in a row without a message, one line tells them


@dataclass(slots=True)
class Latencies:
    values: array = field(default_factory=lambda: array("d"))

    def add(self, milliseconds: float) -> None:
        self.values.append(milliseconds)

    def summary(self) -> dict[str, float] | None:
        if not self.values:
            return None
        ordered = sorted(self.values)
        last = len(ordered) - 1
        return {name: round(ordered[round(q * last)], 6) for name, q in _PERCENTILES}


@dataclass(slots=True)
class ApiStats:
    requests: int = 0
    responses: int = 0
    unanswered: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    decoded: bool = False  # its response bodies are decoded, so errors are counted
    errors: Counter[str] = field(default_factory=Counter)
    latency: Latencies = field(default_factory=Latencies)


@dataclass(slots=True)
class ClientStats:
    exchanges: int = 0
    errors: int = 0
    latency: Latencies = field(default_factory=Latencies)


@dataclass(slots=True)
class ConnectionStats:
    client: str
    server: str
    file: str  # the capture's, where files are read each as a capture of its own (--separate)
    client_ids: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    responses: int = 0


@dataclass(slots=True)
class Bucket:
    requests: int = 0
    responses: int = 0
    errors: int = 0
    undecoded: int = 0  # responses whose errors could not be counted
    latency: Latencies = field(default_factory=Latencies)


@dataclass(order=True, slots=True)
class Slow:
    latency_ms: float
    number: int
    message: Message = field(compare=False)


def kept_among(slowest: list[Any], top: int, item: Any) -> bool:
    """`item` put in `slowest`, a min-heap of the `top` greatest items so far, when it is one
    of them now; whether it is."""
    if len(slowest) < top:
        heapq.heappush(slowest, item)
        return True
    if top and item > slowest[0]:
        heapq.heapreplace(slowest, item)
        return True
    return False


_NO_ERRORS: Counter[str] = Counter()  # a response's errors when it has none (never changed)
NOT_RANKED = ("",)  # a worker's facts of a message --top alone cannot show (`cli._StatsFacts`)


class Statistics:
    """Every table; with `topics=False` no topic table (so no Produce request is decoded:
    enough for --interval); with `bodies=False` also no error counts, only what the
    message headers say, latencies, counts and bytes; with `counts=False` nothing but the
    `top` slowest answers (--top alone, whose lines decode their own few answers' errors)."""

    def __init__(self, interval: float | None = None, top: int = 0, *, bodies: bool = True,
                 topics: bool = True, counts: bool = True) -> None:
        self.bodies = bodies
        self.counts = counts
        self.with_topics = bodies and topics
        self.apis: dict[tuple[str, int | None], ApiStats] = {}
        self.clients: dict[str | None, ClientStats] = {}
        self.connections: dict[tuple[int, int], ConnectionStats] = {}  # by capture and stream
        self.captures: list[str] = []  # the files read each as a capture of its own (`new_capture`)
        self.topics = Topics()
        self.interval = interval
        self.start: float | None = None  # the capture's first packet, for the buckets
        self.buckets: dict[int, Bucket] = {}
        self.top = top
        self.slowest: list[Slow] = []  # a min-heap of the `top` slowest responses

    def begin(self, start: float | None) -> None:
        """The time of the capture's first packet; buckets count from the first file's."""
        if self.start is None:
            self.start = start

    def add(self, message: Message) -> None:
        if not self.counts:
            if not message.is_request and (latency := message.latency) is not None:
                self._rank(message, latency * 1000.0)
            return
        facts = message_facts(message, bodies=self.bodies, topics=self.with_topics)
        self._count(message, facts, len(message.frame.data), message.time, message)

    def add_light(self, light: Light, facts: MessageFacts | tuple[str]) -> None:
        """A message of a merge of `--jobs` (`kdissect.light.Light`), counted as `add` counts
        it from what its worker read of it (`message_facts`, made with this one's `bodies`
        and `topics`; without `counts`, only for the answers that may be among the slowest,
        `NOT_RANKED` for the others: `cli._StatsFacts`)."""
        if not self.counts:  # (few have facts: the slowest of their workers' shares so far)
            if len(facts) > 1 and facts[4] is not None:
                self._rank(_Answered(light, facts), facts[4] * 1000.0)  # type: ignore[arg-type]
            return
        assert len(facts) > 1
        answered = _Answered(light, facts) if self.top and facts[4] is not None else None
        self._count(light, facts, light.size, light.last_ns / 1e9, answered)  # (as `Message.time`)

    def _count(self, message: Message | Light, facts: MessageFacts, size: int, time: float, ranked: Any) -> None:
        """A message counted from its facts (`message_facts`): `ranked` is what --top keeps
        of a response."""
        name, version, _key, client_id, latency, errors, topic = facts
        api = self.apis.get(key := (name or REQUEST_MISSING, version))
        if api is None:  # (not setdefault: its default would be made for every message)
            api = self.apis[key] = ApiStats()
        connection = self._connection(message)  # type: ignore[arg-type]
        bucket = self._bucket(time)
        self.topics.add_facts(topic)
        if message.is_request:
            api.requests += 1
            api.request_bytes += size
            # answered when written (a light message: when released, as one process writes it; a
            # request shown before any answer, by the hold limit, may pair later in the same round)
            api.unanswered += message.pair_number is None and message.expects_response
            connection.requests += 1
            if client_id is not None:
                connection.client_ids[client_id] += 1
            if bucket is not None:
                bucket.requests += 1
            return
        api.responses += 1
        api.response_bytes += size
        connection.responses += 1
        self._response(api, bucket, client_id, None if errors is None else Counter(dict(errors)) if errors else _NO_ERRORS,
                       latency, ranked)

    def _response(self, api: ApiStats, bucket: Bucket | None, client_id: str | None,
                  errors: Counter[str] | None, latency: float | None, message: Any) -> None:
        """A response counted: its request's client id, its errors (None: not decoded), its
        latency in seconds (None: unanswered); `message` ranked by it for --top."""
        client = self.clients.get(client_id)
        if client is None:
            client = self.clients[client_id] = ClientStats()
        client.exchanges += 1
        if errors is not None:
            api.decoded = True
            api.errors.update(errors)
            client.errors += sum(errors.values())
        if latency is not None:
            api.latency.add(latency * 1000.0)
            client.latency.add(latency * 1000.0)
            self._rank(message, latency * 1000.0)
        if bucket is not None:
            bucket.responses += 1
            bucket.errors += 0 if errors is None else sum(errors.values())
            bucket.undecoded += errors is None
            if latency is not None:
                bucket.latency.add(latency * 1000.0)

    def _rank(self, message: Message, milliseconds: float) -> None:
        if self.top:  # ties: the earlier one ranks higher
            kept_among(self.slowest, self.top, Slow(milliseconds, -message.number, message))

    def _bucket(self, time: float) -> Bucket | None:
        """The bucket of a message of capture time `time` (seconds since the epoch)."""
        if self.interval is None:
            return None
        start = time if self.start is None else self.start
        self.start = start
        index = max(int((time - start) // self.interval), 0)
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = Bucket()
        return bucket

    def new_capture(self, name: str) -> None:
        """Files read each as a capture of their own (--separate) start again at stream 0:
        their connections are told apart by capture, each with its file's name."""
        self.captures.append(name)

    def _connection(self, message: Message) -> ConnectionStats:
        connection = message.frame.connection
        key = (len(self.captures), connection.index)
        found = self.connections.get(key)
        if found is None:
            found = ConnectionStats(format_address(connection.client), format_address(connection.server),
                                    self.captures[-1] if self.captures else "")
            self.connections[key] = found
        return found

    # -- text ----------------------------------------------------------------------

    def render(self, *, full: bool = True) -> str:
        """The tables as text: everything with `full`, else only --interval's and --top's."""
        sections = []
        if full:
            sections += [self._api_table(), self._error_lines(), self._client_table(),
                         self.topics.lines(), self._connection_table()]
        if self.interval is not None:
            sections.append(self._interval_table())
        if self.top:
            sections.append(self._top_lines())
        return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"

    def _api_table(self) -> list[str]:
        lines = _title("Kafka APIs",
            f"{'API':<30} {'ver':>3} {'req':>7} {'resp':>7} {'unans':>6} {_latency_head()} "
            f"{'bytes':>11} {'errors':>6}")
        for (name, version), api in sorted(self.apis.items(), key=_api_order):
            errors = str(sum(api.errors.values())) if api.decoded else NOT_DECODED
            lines.append(
                f"{name:<30} {'' if version is None else version:>3} {api.requests:>7} "
                f"{api.responses:>7} {api.unanswered:>6} {_latency_cells(api.latency)} "
                f"{api.request_bytes + api.response_bytes:>11} {errors:>6}")
        lines.append("latency in milliseconds, from the request's last packet to the response's; "
                     f"errors: non-zero error codes in the responses, {NOT_DECODED} where the "
                     "bodies of that API are not decoded")
        return lines

    def _error_lines(self) -> list[str]:
        lines = []
        for (name, version), api in sorted(self.apis.items(), key=_api_order):
            if api.errors:
                counted = ", ".join(f"{error} x{count}" for error, count in api.errors.most_common())
                lines += textwrap.wrap(counted, WRAP, initial_indent=f"{name} v{version}: ",
                                       subsequent_indent="    ", break_on_hyphens=False)
        return _title("Error codes") + lines if lines else []

    def _client_table(self) -> list[str]:
        lines = _title("Latency by client id",
            f"{'client id':<30} {'exch':>7} {'errors':>6} {_latency_head()}")
        for client_id, client in sorted(self.clients.items(), key=lambda i: -i[1].exchanges):
            lines.append(f"{_client_label(client_id):<30} {client.exchanges:>7} {client.errors:>6} "
                         f"{_latency_cells(client.latency)}")
        return lines if self.clients else []

    def _connection_table(self) -> list[str]:
        separate = len(self.captures) > 1  # each connection's file, at the end of its line
        lines = _title("Connections",
            f"{'stream':>6} {'client':>23} {'server':>23} {'req':>7} {'resp':>7}  client ids"
            + ("  (file)" if separate else ""))
        for (_capture, index), conn in sorted(self.connections.items()):
            ids = ", ".join(_client_label(c) for c, _ in conn.client_ids.most_common(3)) or "-"
            lines.append(f"{index:>6} {conn.client:>23} {conn.server:>23} {conn.requests:>7} "
                         f"{conn.responses:>7}  {ids}" + (f"  ({printable(conn.file)})" if separate else ""))
        return lines

    def _interval_table(self) -> list[str]:
        lines = _title(f"Intervals of {self.interval:g} s from the capture's first packet",
            f"{'start':>10} {'end':>10} {'req':>7} {'resp':>7} {'errors':>6} {'p99 ms':>10}")
        assert self.interval is not None
        following = 0  # the bucket after the previous row's
        for index, row in self._interval_rows():
            if index > following:  # a stretch without messages, told in one line
                lines.append(f"{self._bound(following):>10.3f} {self._bound(index):>10.3f}   "
                             f"({index - following} intervals without messages)")
            following = index + 1
            p99 = "-" if row["p99_ms"] is None else f"{row['p99_ms']:.3f}"
            errors = f"{row['errors']}" + ("+" if row["undecoded"] else "")
            lines.append(f"{row['start']:>10.3f} {row['end']:>10.3f} {row['requests']:>7} "
                         f"{row['responses']:>7} {errors:>6} {p99:>10}")
        lines.append("errors: non-zero error codes in decoded responses; + when some responses "
                     "of the interval were not decoded")
        return lines

    def interval_rows(self) -> list[dict[str, Any]]:
        """A row per bucket from the first to the last, but for stretches of `EMPTY_RUN` or
        more buckets in a row without a message, which are left out: a fine interval over
        a long, mostly quiet capture stays as small as its messages."""
        return [row for _index, row in self._interval_rows()]

    def _interval_rows(self) -> list[tuple[int, dict[str, Any]]]:
        if not self.buckets or self.interval is None:
            return []
        rows, following = [], 0
        for index in sorted(self.buckets):
            if index - following < EMPTY_RUN:  # a short stretch without messages: shown as it is
                rows += [(empty, self._interval_row(empty, Bucket())) for empty in range(following, index)]
            rows.append((index, self._interval_row(index, self.buckets[index])))
            following = index + 1
        return rows

    def _bound(self, index: int) -> float:
        """Where bucket `index` starts, in seconds from the capture's first packet: from whole
        nanoseconds, so the bounds read as decimal as the interval at any distance."""
        assert self.interval is not None
        return index * round(self.interval * 1e9) / 1e9

    def _interval_row(self, index: int, bucket: Bucket) -> dict[str, Any]:
        latency = bucket.latency.summary()
        return {"start": self._bound(index), "end": self._bound(index + 1),
                "requests": bucket.requests, "responses": bucket.responses,
                "errors": bucket.errors, "undecoded": bucket.undecoded,
                "p99_ms": None if latency is None else latency["p99"]}

    def _top_lines(self) -> list[str]:
        shown = len(self.slowest)
        plural = "" if shown == 1 else "s"
        lines = _title(f"Slowest {self.top} exchanges" if shown == self.top
                       else f"All {shown} answered exchange{plural}, slowest first"
                            f" (fewer than --top {self.top})")
        lines += [slow_line(item.message) for item in sorted(self.slowest, reverse=True)]
        return lines if self.slowest else [*lines, "(no answered requests among the messages shown)"]

    # -- JSON ----------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        """Every table as plain JSON-ready values."""
        return {
            "apis": [
                {"api_name": name, "api_version": version, "requests": api.requests,
                 "responses": api.responses, "unanswered": api.unanswered,
                 "bytes": api.request_bytes + api.response_bytes,
                 "latency_ms": api.latency.summary(),
                 "errors": dict(api.errors.most_common()) if api.decoded else None}
                for (name, version), api in sorted(self.apis.items(), key=_api_order)
            ],
            "clients": [
                {"client_id": client_id, "exchanges": c.exchanges, "errors": c.errors,
                 "latency_ms": c.latency.summary()}
                for client_id, c in sorted(self.clients.items(), key=lambda i: -i[1].exchanges)
            ],
            "topics": self.topics.as_dicts(),
            "connections": [
                {"stream": index, "client": c.client, "server": c.server, "requests": c.requests,
                 "responses": c.responses, "client_ids": dict(c.client_ids.most_common()),
                 **({"file": c.file} if len(self.captures) > 1 else {})}
                for (_capture, index), c in sorted(self.connections.items())
            ],
            "intervals": self.interval_rows(),
            "slowest": [slow_record(item.message) for item in sorted(self.slowest, reverse=True)],
        }


# What a worker reads of a message for the statistics (`message_facts`), for the merge to count
# it (`Statistics.add_light`) as `add` counts the message: its API's name ("" for none),
# version and key; the client id (a request's own, a response's request's); a response's
# latency in seconds (None unanswered); its error counts by name, in wire order (None: not
# decoded); what its body adds to the topics (`topic_stats.body_facts`).
MessageFacts = tuple[str, int | None, int | None, str | None, float | None,
                     tuple[tuple[str, int], ...] | None, Facts | None]


def message_facts(message: Message, *, bodies: bool, topics: bool) -> MessageFacts:
    """What `Statistics(bodies=..., topics=...).add` reads of a message, as plain values."""
    name, version, key = message.api_name or "", message.api_version, message.api_key
    if message.is_request:
        body = message.values(keep=False) if key == PRODUCE and bodies and topics else None
        return (name, version, key, message.client_id, None, None,
                None if body is None else body_facts(key, True, body))
    request = message.pair
    body = None if request is None or not bodies else message.values(keep=False)
    plan = None if body is None else body_plan(message)
    errors = None if body is None or plan is None else tuple(error_counts(body, plan).items())
    facts = body_facts(key, False, body) if body is not None and topics else None
    return name, version, key, None if request is None else request.client_id, message.latency, errors, facts


class _Answered:
    """A response counted from its worker's facts, as --top's lines read a message."""

    __slots__ = ("api_name", "api_version", "errors", "frame", "latency", "number", "pair")
    is_request = False

    def __init__(self, light: Light, facts: MessageFacts) -> None:
        name, self.api_version, _key, client_id, self.latency, errors, _topic = facts
        self.api_name = name or None
        self.number, self.frame = light.number, light
        self.errors = None if errors is None else Counter(dict(errors))
        self.pair = _Asked(client_id, light._asked)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What --top's lines read of a counted response's request: its client id and number."""

    client_id: str | None
    number: int | None


def response_errors(message: Message) -> Counter[str] | None:
    """Non-zero error codes of a response by name; None when its body is not decoded."""
    if type(message) is _Answered:
        return message.errors
    if message.is_request or message.pair is None:
        return None
    body = message.values(keep=False)
    plan = body_plan(message)
    return None if body is None or plan is None else Counter(error_counts(body, plan))


def slow_record(response: Message) -> dict[str, Any]:
    request = response.pair
    errors = response_errors(response)
    latency = response.latency
    return {
        "latency_ms": None if latency is None else round(latency * 1000.0, 6),
        "client_id": None if request is None else request.client_id,
        "client": format_address(response.frame.connection.client),
        "api": response.api_name, "version": response.api_version,
        "request": None if request is None else request.number, "response": response.number,
        "errors": None if errors is None else dict(errors),
    }


def slow_line(response: Message) -> str:
    """`  812.345 ms  DescribeQuorum v1  client "admin-1" 10.0.0.5:52110  #8<-#7  errors ...`."""
    row = slow_record(response)
    if row["errors"] is None:
        errors = f"errors {NOT_DECODED}"
    else:
        errors = ",".join(f"{n}x{c}" if c > 1 else n for n, c in row["errors"].items()) or "no error"
    api = f"{row['api']} v{row['version']}"
    return (f"{row['latency_ms']:>11.3f} ms  {api:<28} client {_client_label(row['client_id'])} "
            f"{row['client']}  #{row['response']}<-#{row['request']}  {errors}")


def _client_label(client_id: str | None) -> str:
    """A client id as text: quoted, so that the empty one shows as ""; null as (none)."""
    return "(none)" if client_id is None else f'"{printable(client_id)}"'


def _title(text: str, *header: str) -> list[str]:
    return [text, "=" * len(text), *header]


def _latency_head() -> str:
    return " ".join(f"{name:>9}" for name, _ in _PERCENTILES)


def _latency_cells(latency: Latencies) -> str:
    found = latency.summary()
    if found is None:
        return " ".join(f"{'-':>9}" for _ in _PERCENTILES)
    return " ".join(f"{found[name]:>9.3f}" for name, _ in _PERCENTILES)


def _api_order(item: tuple[tuple[str, int | None], Any]) -> tuple[str, int]:
    (name, version), _ = item
    return name, -1 if version is None else version
