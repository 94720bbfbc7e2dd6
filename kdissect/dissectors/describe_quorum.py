"""DescribeQuorum (API 55): the KRaft quorum's leader, voters and observers per partition.

Besides naming error codes and sentinels, each voter and observer gets a
generated `lag`, as Kafka's own `kafka-metadata-quorum describe --replication`
reports it: the leader's log end offset minus the replica's, when both are
known (the leader is found among the voters by its id).
"""

from __future__ import annotations

from typing import Any

from kdissect.decode.tree import Node, elements, generated
from kdissect.dissectors import (
    Dissector,
    GeneratedValue,
    Values,
    items,
    known,
    sentinel,
    timestamp,
)

API_KEY = 55
LAG_ABOUT = "leader's log end offset minus this replica's"
REPLICA_GROUPS = (("CurrentVoters", "voter"), ("Observers", "observer"))

# Error codes, broker ids and timestamps read as the schema says (`SCHEMA_DISPLAYS`);
# these are the fields whose -1 or bits mean something only this API knows.
RESPONSE_DISPLAYS = {
    "LeaderId": sentinel("unknown"),
    "LogEndOffset": sentinel("unknown"),
    "LastFetchTimestamp": timestamp("unknown"),
    "LastCaughtUpTimestamp": timestamp("unknown"),
}


def replica_lag(leader_log_end: int | None, log_end: Any) -> int | None:
    """The leader's log end offset minus a replica's; None when either is unknown (negative).

    Both are non-negative int64 values, so the difference is exact and fits an int64.
    """
    if leader_log_end is None or not isinstance(log_end, int) or log_end < 0:
        return None
    return leader_log_end - log_end


def leader_log_end(partition: Values) -> int | None:
    """The log end offset of the voter that is the partition's leader, when known."""
    leader = partition.get("LeaderId")
    if not isinstance(leader, int) or leader < 0:
        return None
    for voter in items(partition, "CurrentVoters"):
        if voter.get("ReplicaId") == leader:
            offset = voter.get("LogEndOffset")
            return offset if isinstance(offset, int) and offset >= 0 else None
    return None


def add_lags(body: Node, version: int) -> None:
    """Insert a generated `lag` after each replica's LogEndOffset, where it is known."""
    for topic in elements(body.child("Topics")):
        for partition in elements(topic.child("Partitions")):
            _add_partition_lags(partition)


def _add_partition_lags(partition: Node) -> None:
    leader_id = partition.child("LeaderId")
    leader_end = leader_log_end({
        "LeaderId": None if leader_id is None else leader_id.value,
        "CurrentVoters": [{"ReplicaId": _value(voter, "ReplicaId"), "LogEndOffset": _value(voter, "LogEndOffset")}
                          for voter in elements(partition.child("CurrentVoters"))],
    })
    for group, _ in REPLICA_GROUPS:
        for replica in elements(partition.child(group)):
            log_end = replica.child("LogEndOffset")
            lag = None if log_end is None else replica_lag(leader_end, log_end.value)
            if log_end is not None and lag is not None:
                node = generated("lag", "int64", lag, log_end.offset, LAG_ABOUT)
                replica.children.insert(replica.children.index(log_end) + 1, node)


def _value(node: Node, name: str) -> Any:
    child = node.child(name)
    return None if child is None else child.value


def lag_values(body: Values) -> dict[int, list[GeneratedValue]]:
    """Each replica's generated `lag`, by the id() of the replica's values."""
    found: dict[int, list[GeneratedValue]] = {}
    for topic in items(body, "Topics"):
        for partition in items(topic, "Partitions"):
            leader_end = leader_log_end(partition)
            if leader_end is None:
                continue
            for group, _ in REPLICA_GROUPS:
                for replica in items(partition, group):
                    lag = replica_lag(leader_end, replica.get("LogEndOffset"))
                    if lag is not None:
                        found[id(replica)] = [GeneratedValue("LogEndOffset", "lag", "int64", lag, LAG_ABOUT)]
    return found


def summarize_response(body: Values) -> str:
    """`leader=1 epoch=7 hw=5037 voters=3 observers=1`, plus the laggiest voter if any lags."""
    parts = []
    for topic in items(body, "Topics"):
        for partition in items(topic, "Partitions"):
            voters = items(partition, "CurrentVoters")
            text = (f"leader={partition.get('LeaderId')} epoch={partition.get('LeaderEpoch')} "
                    f"hw={partition.get('HighWatermark')} voters={len(voters)} "
                    f"observers={len(items(partition, 'Observers'))}")
            leader_end = leader_log_end(partition)
            lags = [(lag, voter.get("ReplicaId")) for voter in voters
                    if (lag := replica_lag(leader_end, voter.get("LogEndOffset"))) is not None]
            worst = max(lags, key=lambda item: item[0], default=None)
            if worst is not None and worst[0] > 0 and worst[1] is not None:
                text += f" max_voter_lag={worst[0]}@{worst[1]}"
            parts.append(text)
    return "; ".join(parts)


DISSECTOR = Dissector(API_KEY, RESPONSE_DISPLAYS, add_lags, lag_values, summarize_response)

__all__ = ["API_KEY", "DISSECTOR", "LAG_ABOUT", "REPLICA_GROUPS", "known", "leader_log_end", "replica_lag"]
