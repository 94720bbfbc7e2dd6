"""`-i`'s change marks: a leader change or an epoch bump against the previous response.

For each connection and API, the previous response's leader and leader epoch of
every partition, and epoch of every producer, are remembered; a response that
differs says so on its summary line: `changed since #8: leader 1->2 epoch 7->8
(__cluster_metadata:0)`. Only bodies already decoded for `-i` are read.
"""

from __future__ import annotations

from typing import Any

from kdissect.decode.tree import printable
from kdissect.pair.message import Message
from kdissect.present.fields import body_fields, scoped_structs

_TOPIC = ("TopicName", "Name")
_PARTITION = ("PartitionIndex", "PartitionId")
SHOWN = 3  # changes named on one line; the rest are counted

State = dict[tuple[Any, ...], dict[str, Any]]


class ChangeMarker:
    def __init__(self) -> None:
        self._previous: dict[tuple[int, int | None], tuple[int, State]] = {}

    def marks(self, message: Message) -> str:
        """` changed since #N: ...` for a response that differs from the previous one, else ""."""
        if message.is_request:
            return ""
        body = body_fields(message, keep=True, into_records=False)  # `-i` reads the same body next
        if body is None:
            return ""
        state = _state(scoped_structs(body))
        if not state:
            return ""
        key = (message.frame.connection.index, message.api_key)
        previous = self._previous.get(key)
        self._previous[key] = (message.number, state)
        if previous is None:
            return ""
        number, before = previous
        changes = [_change(where, before[where], now) for where, now in state.items()
                   if where in before and before[where] != now]
        if not changes:
            return ""
        more = f" (+{len(changes) - SHOWN} more)" if len(changes) > SHOWN else ""
        return f" changed since #{number}: " + "; ".join(changes[:SHOWN]) + more


def _state(structs: Any) -> State:
    """What each partition and producer looked like: (topic, partition[, producer]) -> values."""
    state: State = {}
    for scope in structs:
        where = (_first(scope, _TOPIC), _first(scope, _PARTITION))
        if "LeaderId" in scope or "LeaderEpoch" in scope:
            state[where] = {"leader": scope.get("LeaderId"), "epoch": scope.get("LeaderEpoch")}
        if "ProducerId" in scope and "ProducerEpoch" in scope:
            state[(*where, scope["ProducerId"])] = {"producer epoch": scope["ProducerEpoch"]}
    return state


def _first(scope: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in scope:
            return scope[name]
    return None


def _change(where: tuple[Any, ...], before: dict[str, Any], now: dict[str, Any]) -> str:
    parts = [f"{name} {before[name]}->{value}" for name, value in now.items() if before.get(name) != value]
    topic, partition, *producer = where
    place = f"{printable(str(topic))}:{partition}" if topic is not None else f"partition {partition}"
    if producer:
        place += f" producer {producer[0]}"
    return " ".join(parts) + f" ({place})"
