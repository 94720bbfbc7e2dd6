"""One line per Kafka message, like tshark's packet list."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kdissect.apis import api_name
from kdissect.decode.tree import printable
from kdissect.error_codes import error_name
from kdissect.ingest.net import format_address
from kdissect.notes import Note
from kdissect.pair.message import Message

if TYPE_CHECKING:
    from kdissect.decode.schema.plan import MessagePlan, StructPlan
    from kdissect.decode.values import Values
    from kdissect.decode.walks import ErrorCodeWalk, PathWalk

# The definitions, walks and per-API meaning are imported when a body is first read: the
# plain summary line never reads one.

_TOPIC_FIELDS = ("Name", "TopicName")
# What a response whose request was never seen is called in the listing, the statistics,
# the summary and the report: its API is not on the wire, only in the missing request.
REQUEST_MISSING = "(request missing)"
_MAX_TOPICS = 3


def summary_line(message: Message, base_time: float | None = None, *, body_info: bool = False,
                 when: str | None = None, frame_number: bool = False) -> str:
    """`No. time src -> dst API vN Request corr=N info [notes]`.

    Time is `when` when given, else relative to `base_time` (nanoseconds since the
    epoch) when given, else absolute UTC; `frame_number` adds the number of the
    message's last packet after its own. Only the header, pairing and frame are used unless
    `body_info` asks for what the bodies of the dissected APIs say (which decodes them).
    """
    frame = message.frame
    if when is None:
        when = _clock(frame.last_ns) if base_time is None else f"{(frame.last_ns - base_time) / 1e9:.6f}"
    correlation = "?" if message.correlation_id is None else message.correlation_id
    # str.rjust rather than format specs: this runs for every line, and is faster so
    number = str(message.number).rjust(6)
    if frame_number:
        number += " " + str(frame.last_packet).rjust(7)
    when = when.rjust(12)
    if body_info:
        route = _ROUTES.get((id(frame.connection), message.is_request, message.api_key, message.api_version, None))
        text = f"{number} {when} {(route or _route_parts(message, None))[1]} corr={correlation}"
        if frame.connection.tls:
            text += " [tls]"
        details = info(message, body_info=True)
        if details:
            text += " " + details
    else:  # the common case: the client id (a response's request's) and a response's latency
        request = message if message.is_request else message._pair
        client_id = None if request is None else request.client_id
        route = _ROUTES.get((id(frame.connection), message.is_request, message.api_key,
                             message.api_version, client_id)) or _route_parts(message, client_id)
        text = f"{number} {when} {route[1]} corr={correlation}{route[2]}"
        if request is not None and request is not message:
            text += f" {(frame.last_ns - request.frame.last_ns) / 1e6:.3f} ms"
    if message.notes or frame.notes or message._tree is not None:
        text += notes_text(message.all_notes())
    return text


def notes_text(found: Sequence[Note]) -> str:
    """What ends a summary line that has notes (` [first; second]`); nothing without."""
    return " [" + "; ".join(printable(n.message) for n in found) + "]" if found else ""


def _clock(nanoseconds: int) -> str:
    """The UTC time of day to the microsecond (truncated, never rounded up into the next
    second); epoch seconds when a corrupt timestamp lies beyond the calendar."""
    seconds, fraction = divmod(nanoseconds, 1_000_000_000)
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S") + f".{fraction // 1000:06d}"
    except (ValueError, OverflowError, OSError):
        return f"{seconds}.{fraction // 1000:06d}"


# The same few strings for every message of a connection. Keyed by the connection's
# identity (its object is kept in the value, so the id cannot be reused meanwhile).
_ROUTES: dict[tuple[int, bool, int | None, int | None, str | None], tuple[object, str, str]] = {}
_ENDPOINTS: dict[tuple[int, bool], tuple[object, str]] = {}  # `src -> dst ` per connection, direction
_MAX_ROUTES = 65536


def _route_parts(message: Message, client_id: str | None) -> tuple[object, str, str]:
    """(the connection, `src -> dst API vN Request`, what follows the correlation id: ` [tls]`
    and ` client=ID`), cached per connection, direction, API version and client id; built
    from the endpoints (cached per connection and direction) and the API label (cached per
    API, version and direction), as a connection that speaks many APIs misses often."""
    connection = message.frame.connection
    is_request = message.is_request
    endpoints = _ENDPOINTS.get((id(connection), is_request))
    if endpoints is None:
        client, server = format_address(connection.client), format_address(connection.server)
        src, dst = (client, server) if is_request else (server, client)
        if len(_ENDPOINTS) > _MAX_ROUTES:
            _ENDPOINTS.clear()
        endpoints = _ENDPOINTS[(id(connection), is_request)] = (connection, f"{src:>21} -> {dst:<21} ")
    tail = " [tls]" if connection.tls else ""
    if client_id:
        tail += f" client={_printable_client(client_id)}"
    if len(_ROUTES) > _MAX_ROUTES:
        _ROUTES.clear()
    key = (id(connection), is_request, message.api_key, message.api_version, client_id)
    cached = _ROUTES[key] = (connection, endpoints[1] + _api_label(message.api_key, message.api_version,
                                                                    is_request), tail)
    return cached


@functools.lru_cache(maxsize=4096)
def _printable_client(client_id: str) -> str:
    return printable(client_id)


@functools.lru_cache(maxsize=4096)
def _api_label(api_key: int | None, api_version: int | None, is_request: bool) -> str:
    """`Produce v9 Request`, `(request missing) Response`."""
    kind = "Request" if is_request else "Response"
    if api_key is None:
        return f"{REQUEST_MISSING} {kind}"
    return f"{api_name(api_key)} v{api_version} {kind}"


def info(message: Message, *, body_info: bool = False) -> str:
    """Short facts: a request's client id, a response's latency, and with `body_info`
    what a decoded body says (read from its flat values): the topics, groups and
    transactional ids its definition names, the API's own summary, and its errors."""
    parts = []
    body = message.values() if body_info else None
    if body is not None:
        parts = _version_reader(message).read(body)
    request = message if message.is_request else message._pair
    client_id = None if request is None else request.client_id
    if client_id:
        parts.append(f"client={printable(client_id)}")
    if request is not None and request is not message:  # a response's latency
        latency = (message.frame.last_ns - request.frame.last_ns) / 1e9  # as `Message.latency`
        parts.append(f"{latency * 1000.0:.3f} ms")
    return " ".join(parts)


Summarize = Callable[["Values"], str]


@dataclass(frozen=True, slots=True)
class _BodyReader:
    """What `-i` reads of the bodies of one plan (or of one API's bodies without a plan),
    worked out once: the entity walks by label, the API's summary and the error-code walk."""

    plan: StructPlan | None
    entities: tuple[tuple[str, tuple[PathWalk, ...]], ...]
    summary: Summarize | None
    errors: ErrorCodeWalk | None

    def read(self, body: Values) -> list[str]:
        """The `label=...` parts a body's values say, in the line's order."""
        if self.plan is None:
            parts = [_shown(label, names) for label, names in self.named(body)]
        else:
            parts = []
            for label, walks in self.entities:
                items = walks[0](body) if len(walks) == 1 else [item for walk in walks for item in walk(body)]
                if items:
                    shown = _entity_part(label, items)
                    if shown is not None:
                        parts.append(shown)
        if self.summary is not None:
            extra = printable(self.summary(body))  # it may quote strings from the wire
            if extra:
                parts.append(extra)
        if self.errors is not None:
            codes: list[int] = []
            self.errors(body, codes)
            if codes:
                counts = _counted(codes)
                parts.append("errors=" + ",".join(f"{name}x{count}" if count > 1 else name
                                                  for name, count in counts.items()))
        return parts

    def named(self, body: Values) -> list[tuple[str, list[str]]]:
        """(label, distinct values) of the entities a body names (topics by field name without a plan)."""
        if self.plan is None:
            topics = topic_names(body)
            return [("topics", topics)] if topics else []
        found = []
        for label, walks in self.entities:
            items = walks[0](body) if len(walks) == 1 else [item for walk in walks for item in walk(body)]
            if items:
                names = list(dict.fromkeys(v for v in items if isinstance(v, str)))
                if names:
                    found.append((label, names))
        return found


# `label=...` of the entity values a body holds, by (label, values): most bodies of a capture
# name the same few topics and groups. Bounded; long lists are not kept.
_ENTITY_PARTS: dict[tuple[str, tuple[Any, ...]], str | None] = {}
_MAX_ENTITY_PARTS = 4096
_MAX_KEPT_VALUES = 64


def _entity_part(label: str, items: list[Any]) -> str | None:
    """`_shown` of the distinct strings among `items`, None when there are none."""
    key = (label, tuple(items))
    kept = len(items) <= _MAX_KEPT_VALUES
    try:
        return _ENTITY_PARTS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable value: nothing to keep
        kept = False
    names = list(dict.fromkeys(v for v in items if isinstance(v, str)))
    shown = _shown(label, names) if names else None
    if kept:
        if len(_ENTITY_PARTS) >= _MAX_ENTITY_PARTS:
            _ENTITY_PARTS.clear()
        _ENTITY_PARTS[key] = shown
    return shown


def _shown(label: str, names: list[str]) -> str:
    shown = ",".join(printable(str(name)) for name in names[:_MAX_TOPICS])
    more = len(names) - _MAX_TOPICS
    return f"{label}={shown}" + (f" (+{more})" if more > 0 else "")


_READERS: dict[tuple[int, int | None, bool], tuple[StructPlan | None, _BodyReader]] = {}
# The reader of each (API, version, direction) met; emptied when the definitions change.
_VERSION_READERS: dict[tuple[int | None, int | None, bool], _BodyReader] = {}
_MAX_VERSION_READERS = 4096  # the wire may name any API and version


def _version_reader(message: Message) -> _BodyReader:
    """`_body_reader` of the message's body plan, found by one lookup of its API and version."""
    key = (message.api_key, message.api_version, message.is_request)
    reader = _VERSION_READERS.get(key)
    if reader is None:
        reader = _body_reader(message, body_plan(message))
        if len(_VERSION_READERS) >= _MAX_VERSION_READERS:
            _VERSION_READERS.clear()
        _VERSION_READERS[key] = reader
    return reader


def _body_reader(message: Message, plan: StructPlan | None) -> _BodyReader:
    """The reader of a message's body, made on first use per plan, API and direction."""
    key = (id(plan), message.api_key, message.is_request)
    cached = _READERS.get(key)
    if cached is not None and cached[0] is plan:
        return cached[1]
    from kdissect.decode.walks import error_code_walk

    reader = _BodyReader(plan, () if plan is None else _entity_walks(plan),
                         _summarize(message, plan), None if plan is None else error_code_walk(plan))
    _READERS[key] = (plan, reader)
    return reader


def _summarize(message: Message, plan: StructPlan | None) -> Summarize | None:
    """The API's own summary of a body of this plan (its rule paths compiled for the plan)."""
    from kdissect.dissectors.registry import dissector
    from kdissect.dissectors.summaries import RuleSummary

    meaning = dissector(message.api_key)
    if meaning is None:
        return None
    summarize = meaning.request_summary if message.is_request else meaning.response_summary
    if plan is not None and isinstance(summarize, RuleSummary):
        return summarize.for_plan(plan)
    return summarize


# What the summary names by the definitions' entity types, in this order.
_ENTITIES = (("topics", "topicName"), ("group", "groupId"), ("transactional_id", "transactionalId"))


def body_plan(message: Message) -> StructPlan | None:
    """The plan of a message's body, None when no definition has its API and version."""
    if message.api_key is None or message.api_version is None:
        return None
    plan = _message_plan()(message.api_key, message.api_version, message.kind)
    return None if plan is None else plan.body


@functools.cache
def _message_plan() -> Callable[[int, int, str], MessagePlan | None]:
    from kdissect.decode.schema import message_plan, on_sources_change

    on_sources_change(_VERSION_READERS.clear)  # new definitions: new plans, new readers
    return message_plan


def body_entities(message: Message, body: Values, plan: StructPlan | None = None) -> list[tuple[str, list[str]]]:
    """(label, distinct values) of the topic names, group ids and transactional ids a body
    holds, as its definition types them; topics by field name when no plan is known."""
    if plan is None:
        plan = body_plan(message)
    return _body_reader(message, plan).named(body)


@functools.cache
def _entity_walks(plan: StructPlan) -> tuple[tuple[str, tuple[PathWalk, ...]], ...]:
    """Per label, the compiled walks to the fields of its entity type (labels with none left out)."""
    from kdissect.dissectors.summaries import entity_walks

    return tuple((label, walks) for label, entity_type in _ENTITIES if (walks := entity_walks(plan, entity_type)))


def topic_names(body: Values) -> list[str]:
    """Distinct topic names of a body's top-level `Topics` array, in order."""
    topics = body.get("Topics")
    seen: dict[str, None] = {}
    for element in topics if isinstance(topics, list) else []:
        if isinstance(element, dict):
            for name in _TOPIC_FIELDS:
                value = element.get(name)
                if isinstance(value, str):
                    seen.setdefault(value)
    return list(seen)


def error_counts(body: Values, plan: StructPlan) -> dict[str, int]:
    """Non-zero error codes anywhere in a body of this plan (every integer field named
    `ErrorCode` or `...ErrorCode`), by name, with how often each occurs, in wire order."""
    from kdissect.decode.walks import error_code_walk

    codes: list[int] = []
    error_code_walk(plan)(body, codes)
    return _counted(codes)


def _counted(codes: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for code in codes:
        label = error_name(code)
        counts[label] = counts.get(label, 0) + 1
    return counts


__all__ = ["REQUEST_MISSING", "body_entities", "body_plan", "error_counts", "info", "plural", "summary_line",
           "topic_names"]


def plural(number: int, noun: str) -> str:
    """`1 answer`, `3 answers`: a count with its noun, in the plural it needs."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
