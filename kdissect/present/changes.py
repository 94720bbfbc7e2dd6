"""`-i`'s change marks: a leader change or an epoch bump against the previous response.

For each connection and API, the previous response's leader and leader epoch of
every partition, and epoch of every producer, are remembered; a response that
differs says so on its summary line: `changed since #8: leader 1->2 epoch 7->8
(__cluster_metadata:0)`. Only bodies already decoded for `-i` are read.
"""

from __future__ import annotations

from typing import Any

from kdissect.decode.schema import message_plan, shipped_api_keys
from kdissect.decode.tree import printable
from kdissect.decode.walks import ScopeWalk, scope_walk
from kdissect.pair.message import Message

_TOPIC = ("TopicName", "Name")
_PARTITION = ("PartitionIndex", "PartitionId")
SHOWN = 3  # changes named on one line; the rest are counted
MARK_HEAD = " changed since #"  # what starts a mark, before the number of the response it names
# What a struct's scope is read for, in this order, and the fields without which it adds nothing.
SCOPE_NAMES = ("TopicName", "Name", "PartitionIndex", "PartitionId", "LeaderId", "LeaderEpoch",
               "ProducerId", "ProducerEpoch")
SCOPE_WANTED = frozenset({"LeaderId", "LeaderEpoch", "ProducerEpoch"})

# What each partition and producer looked like: (topic, partition[, producer]) -> its values,
# in the order `_change` names them (`PARTITION_VALUES` or `PRODUCER_VALUES`).
State = dict[tuple[Any, ...], tuple[Any, ...]]
PARTITION_VALUES = ("leader", "epoch")
PRODUCER_VALUES = ("producer epoch",)
Rows = list[tuple[Any, ...]]  # what a scope walk lists: the values of `SCOPE_NAMES` per scope


class ChangeMarker:
    def __init__(self) -> None:
        # per (connection, API): the previous response's number, state, and the scope walk's
        # rows it was read from (None when read from the tree)
        self._previous: dict[tuple[int, int | None], tuple[int, State, Rows | None]] = {}
        self._readings: dict[tuple[int | None, int | None], ScopeWalk | None] = {}
        self.named = 0  # the number of the response the last mark named
        # of the last message `marks` was given: its number when it became the previous response
        # a later mark may name (else 0), and the number of the one it took that place from (else 0)
        self.kept = self.dropped = 0

    def marks(self, message: Message) -> str:
        """` changed since #N: ...` for a response that differs from the previous one, else ""."""
        self.kept = self.dropped = 0
        if message.is_request:
            return ""
        key = (message.api_key, message.api_version)
        reading = self._readings.get(key, _UNSET)
        if reading is _UNSET:  # worked out once per API and version
            reading = self._readings[key] = _reading(message)
        if reading is None:  # the plan has none of the fields: nothing to decode
            return ""
        rows = _read_rows(message, reading)
        where = (message.frame.connection.index, message.api_key)
        previous = self._previous.get(where)
        if rows is not None and previous is not None and rows == previous[2]:  # the same rows:
            self._keep(where, (message.number, previous[1], rows), previous)  # the same state
            return ""
        state = _tree_state(message) if rows is None else _rows_state(rows)
        if not state:
            return ""
        self._keep(where, (message.number, state, rows), previous)
        if previous is None:
            return ""
        number, before, _ = previous
        if state == before:  # nothing moved
            return ""
        moved = [place for place, now in state.items() if before.get(place, now) != now]
        if not moved:
            return ""
        named = "; ".join(_change(place, before[place], state[place]) for place in moved[:SHOWN])
        more = f" (+{len(moved) - SHOWN} more)" if len(moved) > SHOWN else ""
        self.named = number
        return f"{MARK_HEAD}{number}: {named}{more}"

    def _keep(self, where: tuple[int, int | None], entry: tuple[int, State, Rows | None],
              previous: tuple[int, State, Rows | None] | None) -> None:
        """`entry` the previous response of its connection and API from now on."""
        self._previous[where] = entry
        self.kept, self.dropped = entry[0], 0 if previous is None else previous[0]


_UNSET: Any = object()


def _from_tree(values: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The reading of bodies only their tree can say anything about (never called)."""
    raise AssertionError("read from the tree")


def _reading(message: Message) -> ScopeWalk | None:
    """How the bodies of a message's API and version are read: by the plan's scope walk over
    flat values, not at all (None: the definition has none of the fields), or `_from_tree`."""
    key, version = message.api_key, message.api_version
    plan = None if key is None or version is None else message_plan(key, version, message.kind)
    if plan is None or key not in shipped_api_keys():  # as `present.fields.body_api_keys`
        return _from_tree
    return scope_walk(plan.body, SCOPE_NAMES, SCOPE_WANTED)


def body_state(message: Message) -> State:
    """The leaders and epochs a response names, read from its flat values by the plan's scope
    walk (no body decoded when its definition has none of them); from the tree when only the
    interpreter can read the body."""
    return _read_state(message, _reading(message))


def _read_state(message: Message, reading: ScopeWalk | None) -> State:
    if reading is None:  # the plan has none of the fields: nothing to decode
        return {}
    rows = _read_rows(message, reading)
    return _tree_state(message) if rows is None else _rows_state(rows)


def _read_rows(message: Message, reading: ScopeWalk) -> Rows | None:
    """The scope walk's rows of a body its generated decoder takes; None when only the tree can
    say what it holds."""
    if reading is not _from_tree and message.pair is not None:
        values = message.fast_values(keep=True)  # `-i` reads the same body next
        if values is not None:
            return reading(values)
    return None


def _tree_state(message: Message) -> State:
    # the filter fields, and the interpreter they read trees with, load only for such a body
    from kdissect.present.fields import BodyReading, body_fields, scoped_structs

    body = body_fields(message, BodyReading(into_records=False), keep=True)
    return {} if body is None else _state(scoped_structs(body))


def _rows_state(rows: Rows) -> State:
    """`_state` of the scopes a scope walk lists (`SCOPE_NAMES`, None where not in scope)."""
    state: State = {}
    for topic_name, name, index, partition_id, leader, epoch, producer, producer_epoch in rows:
        where = (topic_name if topic_name is not None else name, index if index is not None else partition_id)
        if leader is not None or epoch is not None:
            state[where] = (leader, epoch)
        if producer is not None and producer_epoch is not None:
            state[(*where, producer)] = (producer_epoch,)
    return state


def _state(structs: Any) -> State:
    """What each partition and producer looked like: (topic, partition[, producer]) -> values."""
    state: State = {}
    for scope in structs:
        where = (_first(scope, _TOPIC), _first(scope, _PARTITION))
        if "LeaderId" in scope or "LeaderEpoch" in scope:
            state[where] = (scope.get("LeaderId"), scope.get("LeaderEpoch"))
        if "ProducerId" in scope and "ProducerEpoch" in scope:
            state[(*where, scope["ProducerId"])] = (scope["ProducerEpoch"],)
    return state


def _first(scope: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in scope:
            return scope[name]
    return None


def _change(where: tuple[Any, ...], before: tuple[Any, ...], now: tuple[Any, ...]) -> str:
    names = PARTITION_VALUES if len(where) == 2 else PRODUCER_VALUES
    parts = [f"{name} {old}->{new}" for name, old, new in zip(names, before, now, strict=True) if old != new]
    topic, partition = where[0], where[1]
    place = f"{printable(str(topic))}:{partition}" if topic is not None else f"partition {partition}"
    if len(where) > 2:
        place += f" producer {where[2]}"
    return f"{' '.join(parts)} ({place})"
