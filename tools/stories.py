"""What the scripted peer says over time: a producers story (API 61) and a quorum story (API 55).

Each story answers ApiVersions and Metadata like a one-broker cluster (node 1 on
the peer's own port) and moves one step forward on every DescribeProducers or
DescribeQuorum request. Values are plain dictionaries keyed by kio's field names;
``tools.kio_codec`` keeps the fields the requested version has and encodes them.
Times are the real wall clock in epoch milliseconds; everything else is fixed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tools.kio_codec import Request

API_VERSIONS = 18
METADATA = 3
DESCRIBE_QUORUM = 55
DESCRIBE_PRODUCERS = 61
NODE_ID = 1
NOT_AUTHORIZED_OPERATIONS = -(2**31)
Values = dict[str, Any]


def now_ms() -> int:
    return int(time.time() * 1000)


class PeerStory:
    """ApiVersions and Metadata of a one-broker cluster; subclasses add their API."""

    served_api: int = -1
    cluster_id = "kdissect-scripted"

    def __init__(self, topics: Mapping[str, int], max_version: int) -> None:
        self.port = 0
        self.topics = dict(topics)
        self.max_version = max_version
        self.step = -1
        self.events: list[dict[str, Any]] = []

    def answer(self, request: Request) -> Values | None:
        if request.api_key == API_VERSIONS:
            return self.api_versions()
        if request.api_key == METADATA:
            return self.metadata(request)
        if request.api_key == self.served_api:
            self.step += 1
            return self.next_response(request, now_ms())
        return None

    def next_response(self, request: Request, now: int) -> Values:
        raise NotImplementedError

    def api_versions(self) -> Values:
        ranges = [(API_VERSIONS, 0, 4), (METADATA, 0, 12), (self.served_api, 0, self.max_version)]
        return {
            "error_code": 0,
            "api_keys": [{"api_key": key, "min_version": low, "max_version": high}
                         for key, low, high in ranges],
            "throttle_time": 0,
        }

    def metadata(self, request: Request) -> Values:
        asked = request.body.topics
        names = list(self.topics) if asked is None else [topic.name for topic in asked]
        return {
            "throttle_time": 0,
            "brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port,
                         "rack": None}],
            "cluster_id": self.cluster_id,
            "controller_id": NODE_ID,
            "topics": [self._metadata_topic(name) for name in names],
            "cluster_authorized_operations": NOT_AUTHORIZED_OPERATIONS,
        }

    def _metadata_topic(self, name: str) -> Values:
        count = self.topics.get(name)
        return {
            "error_code": 0 if count is not None else 3,
            "name": name,
            "topic_id": topic_id(name) if count is not None else ZERO_UUID,
            "is_internal": False,
            "partitions": [_metadata_partition(index) for index in range(count or 0)],
            "topic_authorized_operations": NOT_AUTHORIZED_OPERATIONS,
        }

    def note(self, event: str, **details: Any) -> None:
        self.events.append({"step": self.step, "event": event, **details})


ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def topic_id(name: str) -> str:
    """A fixed topic id per name, so captures differ only in times and ports."""
    digits = sum(ord(char) * 31**position for position, char in enumerate(name)) % 16**12
    return f"6b646973-7365-4374-8000-{digits:012x}"


def _metadata_partition(index: int) -> Values:
    return {"error_code": 0, "partition_index": index, "leader_id": NODE_ID,
            "leader_epoch": 0, "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID],
            "offline_replicas": []}


# -- DescribeProducers -------------------------------------------------------------

TopicPartition = tuple[str, int]


@dataclass
class ScriptedProducer:
    """One producer's script: where it writes, how much per step, and what happens to it."""

    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    records_per_step: int
    first_step: int = 0
    last_step: int = 10**6
    epoch_bump_step: int | None = None
    coordinator_epoch: int = -1
    open_transaction_step: int | None = None
    transaction_start_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    last_sequence: dict[TopicPartition, int] = field(default_factory=dict)
    last_timestamp: dict[TopicPartition, int] = field(default_factory=dict)

    def advance(self, step: int, now: int) -> None:
        if step == self.epoch_bump_step:
            self.producer_epoch += 1
            self.last_sequence.clear()
        if not self.first_step <= step <= self.last_step:
            return
        for rank, partition in enumerate(self.partitions):
            written = self.records_per_step + (step + rank) % 4
            self.last_sequence[partition] = self.last_sequence.get(partition, -1) + written
            self.last_timestamp[partition] = now - 7 * (rank + 1)

    def state(self, partition: TopicPartition, step: int) -> Values | None:
        if partition not in self.partitions or step < self.first_step:
            return None
        open_transaction = (self.open_transaction_step is not None
                            and step >= self.open_transaction_step)
        return {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "last_sequence": self.last_sequence.get(partition, -1),
            "last_timestamp": self.last_timestamp.get(partition, -1),
            "coordinator_epoch": self.coordinator_epoch,
            "current_txn_start_offset": (self.transaction_start_offsets[partition]
                                         if open_transaction else -1),
        }


def scripted_producers() -> list[ScriptedProducer]:
    return [
        ScriptedProducer(3001, 0, (("orders", 0), ("orders", 1)), records_per_step=5),
        ScriptedProducer(3002, 0, (("orders", 2), ("payments", 0)), records_per_step=3,
                         epoch_bump_step=6),
        ScriptedProducer(7001, 4, (("payments", 0), ("payments", 1)), records_per_step=2,
                         last_step=3, coordinator_epoch=12, open_transaction_step=2,
                         transaction_start_offsets={("payments", 0): 1520,
                                                    ("payments", 1): 860}),
        ScriptedProducer(3003, 0, (("orders", 1), ("payments", 1)), records_per_step=4,
                         first_step=4),
    ]


NOT_LEADER_OR_FOLLOWER = 6
MOVED_PARTITION: TopicPartition = ("orders", 2)
MOVED_STEPS = range(8, 10)


class ProducersStory(PeerStory):
    """Producers writing to orders (3 partitions) and payments (2 partitions)."""

    served_api = DESCRIBE_PRODUCERS

    def __init__(self) -> None:
        super().__init__({"orders": 3, "payments": 2}, max_version=0)
        self.producers = scripted_producers()

    def next_response(self, request: Request, now: int) -> Values:
        for producer in self.producers:
            producer.advance(self.step, now)
        self._note_events()
        return {"throttle_time": 0,
                "topics": [{"name": topic.name,
                            "partitions": [self._partition((topic.name, index))
                                           for index in topic.partition_indexes]}
                           for topic in request.body.topics]}

    def _partition(self, partition: TopicPartition) -> Values:
        if partition == MOVED_PARTITION and self.step in MOVED_STEPS:
            return {"partition_index": partition[1], "error_code": NOT_LEADER_OR_FOLLOWER,
                    "error_message": f"{partition[0]}-{partition[1]} is led by broker 2 now",
                    "active_producers": []}
        states = [producer.state(partition, self.step) for producer in self.producers]
        return {"partition_index": partition[1], "error_code": 0, "error_message": None,
                "active_producers": [state for state in states if state is not None]}

    def _note_events(self) -> None:
        for producer in self.producers:
            if self.step == producer.epoch_bump_step:
                self.note("epoch bump", producer_id=producer.producer_id,
                          producer_epoch=producer.producer_epoch)
            if self.step == producer.open_transaction_step:
                self.note("transaction opened and never closed",
                          producer_id=producer.producer_id)
            if self.step == producer.last_step + 1:
                self.note("producer stopped writing", producer_id=producer.producer_id)
            if self.step == producer.first_step and producer.first_step > 0:
                self.note("producer joined", producer_id=producer.producer_id)
        if self.step in (MOVED_STEPS.start, MOVED_STEPS.stop):
            self.note("partition error" if self.step in MOVED_STEPS else "partition recovered",
                      topic=MOVED_PARTITION[0], partition=MOVED_PARTITION[1])


# -- DescribeQuorum ----------------------------------------------------------------

VOTERS = (1, 2, 3)
LAGGING_VOTER = 3
LAGGING_STEPS = range(4, 9)
LEADER_CHANGE_STEP = 11
STALE_OBSERVER = 101
STALE_STEPS = range(13, 10**6)
LATE_OBSERVER = 102
LATE_OBSERVER_STEP = 6
OBSERVERS = (STALE_OBSERVER, LATE_OBSERVER)


def directory_id(replica_id: int) -> str:
    return f"d1ec7081-0000-4000-8000-{replica_id:012d}"


@dataclass
class ReplicaProgress:
    """What the leader knows of one replica."""

    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


class QuorumStory(PeerStory):
    """A KRaft quorum of three voters and two observers, on ``__cluster_metadata``."""

    served_api = DESCRIBE_QUORUM

    def __init__(self) -> None:
        super().__init__({}, max_version=2)
        self.leader_id = 1
        self.leader_epoch = 7
        self.high_watermark = 5000
        self.replicas: dict[int, ReplicaProgress] = {}

    def next_response(self, request: Request, now: int) -> Values:
        self._advance(now)
        partition = {"partition_index": 0, "error_code": 0, "error_message": None,
                     "leader_id": self.leader_id, "leader_epoch": self.leader_epoch,
                     "high_watermark": self.high_watermark,
                     "current_voters": [self._replica(voter) for voter in VOTERS],
                     "observers": [self._replica(observer) for observer in OBSERVERS
                                   if observer in self.replicas]}
        return {"error_code": 0, "error_message": None,
                "topics": [{"topic_name": "__cluster_metadata", "partitions": [partition]}],
                "nodes": [_node(voter) for voter in VOTERS]}

    def _advance(self, now: int) -> None:
        if self.step == LEADER_CHANGE_STEP:
            self.leader_id, self.leader_epoch = 2, self.leader_epoch + 1
        self.high_watermark += 37 + 11 * (self.step % 3)
        for replica in VOTERS + OBSERVERS:
            self._follow(replica, now - 3 * (replica % 10))
        self.replicas[self.leader_id] = ReplicaProgress(self.high_watermark + 4, -1, now)
        self._note_quorum_events()

    def _follow(self, replica: int, fetched_at: int) -> None:
        """Move one follower: caught up, lagging behind, stale, or not there yet."""
        if replica == LATE_OBSERVER and self.step < LATE_OBSERVER_STEP:
            return
        if replica == STALE_OBSERVER and self.step in STALE_STEPS:
            return
        behind = 0 if replica in VOTERS else 5 + replica % 7
        known = self.replicas.get(replica)
        if replica == LAGGING_VOTER and self.step in LAGGING_STEPS and known is not None:
            self.replicas[replica] = ReplicaProgress(known.log_end_offset + 6, fetched_at,
                                                     known.last_caught_up_timestamp)
            return
        self.replicas[replica] = ReplicaProgress(self.high_watermark - behind, fetched_at,
                                                 fetched_at)

    def _note_quorum_events(self) -> None:
        events = {LEADER_CHANGE_STEP: ("leader change", self.leader_id),
                  LAGGING_STEPS.start: ("voter falls behind", LAGGING_VOTER),
                  LAGGING_STEPS.stop: ("voter caught up", LAGGING_VOTER),
                  LATE_OBSERVER_STEP: ("observer joined", LATE_OBSERVER),
                  STALE_STEPS.start: ("observer stopped fetching", STALE_OBSERVER)}
        if self.step in events:
            event, replica = events[self.step]
            self.note(event, replica_id=replica, leader_epoch=self.leader_epoch)

    def _replica(self, replica: int) -> Values:
        progress = self.replicas[replica]
        return {
            "replica_id": replica,
            "replica_directory_id": directory_id(replica),
            "log_end_offset": progress.log_end_offset,
            "last_fetch_timestamp": progress.last_fetch_timestamp,
            "last_caught_up_timestamp": progress.last_caught_up_timestamp,
        }


def _node(voter: int) -> Values:
    return {"node_id": voter,
            "listeners": [{"name": "CONTROLLER", "host": f"controller-{voter}", "port": 9093}]}
