"""`-i`'s change marks: a leader change or an epoch bump against the previous response.

For each connection and API, the previous response's leader and leader epoch of
every partition, and epoch of every producer, are remembered; a response that
differs says so on its summary line: `changed since #8: leader 1->2 epoch 7->8
(__cluster_metadata:0)`. Only bodies already decoded for `-i` are read.
"""

from __future__ import annotations

from typing import Any

from kdissect.decode.schema import message_plan
from kdissect.decode.tree import printable
from kdissect.decode.walks import scope_walk
from kdissect.pair.message import Message
from kdissect.present.fields import body_api_keys, body_fields, scoped_structs

_TOPIC = ("TopicName", "Name")
_PARTITION = ("PartitionIndex", "PartitionId")
SHOWN = 3  # changes named on one line; the rest are counted
# What a struct's scope is read for, in this order, and the fields without which it adds nothing.
SCOPE_NAMES = ("TopicName", "Name", "PartitionIndex", "PartitionId", "LeaderId", "LeaderEpoch",
               "ProducerId", "ProducerEpoch")
SCOPE_WANTED = frozenset({"LeaderId", "LeaderEpoch", "ProducerEpoch"})

State = dict[tuple[Any, ...], dict[str, Any]]


class ChangeMarker:
    def __init__(self) -> None:
        self._previous: dict[tuple[int, int | None], tuple[int, State]] = {}

    def marks(self, message: Message) -> str:
        """` changed since #N: ...` for a response that differs from the previous one, else ""."""
        if message.is_request:
            return ""
        state = body_state(message)
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


def body_state(message: Message) -> State:
    """The leaders and epochs a response names, read from its flat values by the plan's scope
    walk (no body decoded when its definition has none of them); from the tree when only the
    interpreter can read the body."""
    key, version = message.api_key, message.api_version
    plan = None if key is None or version is None else message_plan(key, version, message.kind)
    if plan is not None and key in body_api_keys() and message.pair is not None:
        walk = scope_walk(plan.body, SCOPE_NAMES, SCOPE_WANTED)
        if walk is None:  # the plan has none of the fields: nothing to decode
            return {}
        values = message.fast_values(keep=True)  # `-i` reads the same body next
        if values is not None:
            return _rows_state(walk(values))
    body = body_fields(message, keep=True, into_records=False)
    return {} if body is None else _state(scoped_structs(body))


def _rows_state(rows: list[tuple[Any, ...]]) -> State:
    """`_state` of the scopes a scope walk lists (`SCOPE_NAMES`, None where not in scope)."""
    state: State = {}
    for topic_name, name, index, partition_id, leader, epoch, producer, producer_epoch in rows:
        where = (topic_name if topic_name is not None else name, index if index is not None else partition_id)
        if leader is not None or epoch is not None:
            state[where] = {"leader": leader, "epoch": epoch}
        if producer is not None and producer_epoch is not None:
            state[(*where, producer)] = {"producer epoch": producer_epoch}
    return state


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
