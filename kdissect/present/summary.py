"""One line per Kafka message, like tshark's packet list."""

from __future__ import annotations

from datetime import UTC, datetime

from kdissect.decode.tree import Node, printable
from kdissect.error_codes import error_name
from kdissect.ingest.net import format_address
from kdissect.pair.message import Message

DISSECTED_APIS = frozenset({55, 61, 75})
_TOPIC_FIELDS = frozenset({"Name", "TopicName"})
_MAX_TOPICS = 3


def summary_line(message: Message, base_time: float | None = None, *, body_info: bool = False) -> str:
    """`No. time src -> dst API vN Request corr=N info [notes]`.

    Time is relative to `base_time` when given, else absolute UTC. Only the
    header, pairing and frame are used unless `body_info` asks for what the
    bodies of the dissected APIs say (which decodes them).
    """
    frame = message.frame
    when = _clock(frame.last_ns) if base_time is None else f"{(frame.last_ns - base_time) / 1e9:.6f}"
    correlation = "?" if message.correlation_id is None else message.correlation_id
    text = f"{message.number:>6} {when:>12} {_route(message)} corr={correlation}"
    if body_info:
        details = info(message, body_info=True)
        if details:
            text += " " + details
    elif message.is_request:  # the common case, inline: the client id
        if message.client_id:
            text += f" client={printable(message.client_id)}"
    elif message._pair is not None:  # a response's latency
        text += f" {(frame.last_ns - message._pair.frame.last_ns) / 1e6:.3f} ms"
    if message.notes or frame.notes or message._tree is not None:
        found = message.all_notes()
        if found:
            text += " [" + "; ".join(printable(n.message) for n in found) + "]"
    return text


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
_ROUTES: dict[tuple[int, bool, int | None, int | None], tuple[object, str]] = {}


def _route(message: Message) -> str:
    """`src -> dst API vN Request`, cached per connection, direction and API version."""
    connection = message.frame.connection
    key = (id(connection), message.is_request, message.api_key, message.api_version)
    cached = _ROUTES.get(key)
    if cached is None:
        client, server = format_address(connection.client), format_address(connection.server)
        if message.is_request:
            src, dst, kind = client, server, "Request"
        else:
            src, dst, kind = server, client, "Response"
        if len(_ROUTES) > 65536:
            _ROUTES.clear()
        cached = _ROUTES[key] = (connection, f"{src:>21} -> {dst:<21} {_api_label(message)} {kind}")
    return cached[1]


def _api_label(message: Message) -> str:
    if message.api_key is None:
        return "(unknown API)"
    return f"{message.api_name} v{message.api_version}"


def info(message: Message, *, body_info: bool = False) -> str:
    """Short facts: a request's client id, a response's latency, and with `body_info`
    the topics, errors and API summary of the dissected APIs."""
    parts = []
    if body_info and message.api_key in DISSECTED_APIS and (message.is_request or message.pair is not None):
        tree = message.tree()
        topics = topic_names(tree)
        if topics:
            shown = ",".join(printable(t) for t in topics[:_MAX_TOPICS])
            more = len(topics) - _MAX_TOPICS
            parts.append(f"topics={shown}" + (f" (+{more})" if more > 0 else ""))
        extra = _api_summary(message, tree)
        if extra:
            parts.append(extra)
        errors = error_counts(tree)
        if errors:
            parts.append("errors=" + ",".join(f"{name}x{count}" if count > 1 else name
                                              for name, count in errors.items()))
    if message.client_id and message.is_request:
        parts.append(f"client={printable(message.client_id)}")
    latency = message.latency
    if latency is not None:
        parts.append(f"{latency * 1000.0:.3f} ms")
    return " ".join(parts)


def _api_summary(message: Message, tree: Node) -> str:
    from kdissect.decode.dissect import DISSECTORS, message_body

    dissector = DISSECTORS.get(message.api_key or -1)
    body = message_body(tree)
    if message.is_request or dissector is None or dissector.response_summary is None or body is None:
        return ""
    return printable(dissector.response_summary(body))  # it may quote strings from the wire


def topic_names(tree: Node) -> list[str]:
    """Distinct topic names of a message's top-level `Topics` array, in order."""
    from kdissect.decode.dissect import message_body

    body = message_body(tree)
    topics = None if body is None else body.child("Topics")
    seen: dict[str, None] = {}
    for element in [] if topics is None else topics.children[1:]:
        for field in element.children:
            if field.name in _TOPIC_FIELDS and isinstance(field.value, str):
                seen.setdefault(field.value)
    return list(seen)


def error_counts(tree: Node) -> dict[str, int]:
    """Non-zero error codes anywhere in a message, by name, with how often each occurs."""
    counts: dict[str, int] = {}
    for node in tree.nodes():
        if node.name == "ErrorCode" and isinstance(node.value, int) and node.value != 0:
            name = error_name(node.value)
            counts[name] = counts.get(name, 0) + 1
    return counts
