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
from tools.recording import LOOPBACK

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
    sequence_rewind_step: int | None = None  # sequences jump back, epoch unchanged (a bug)
    coordinator_epoch: int = -1
    open_transaction_step: int | None = None
    transaction_start_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    last_sequence: dict[TopicPartition, int] = field(default_factory=dict)
    last_timestamp: dict[TopicPartition, int] = field(default_factory=dict)

    def advance(self, step: int, now: int) -> None:
        if step == self.epoch_bump_step:
            self.producer_epoch += 1
            self.last_sequence.clear()
        if step == self.sequence_rewind_step:
            for partition, sequence in self.last_sequence.items():
                self.last_sequence[partition] = sequence // 4
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


# -- An incident: quorum, producers and partitions going wrong together ---------------

DESCRIBE_TOPIC_PARTITIONS = 75
BROKERS = (1, 2, 3)
INCIDENT_TOPICS = {"orders": 3, "payments": 2}
# One round = one DescribeQuorum, one DescribeProducers, one DescribeTopicPartitions call.
INCIDENT_ROUNDS = 32
VOTER_LAG_ROUNDS = range(5, 13)  # voter 3 fetches but gains only 6 offsets a round
OBSERVER_JOIN_ROUND = 8  # observer 102
LEADERLESS_QUORUM_ROUND = 14  # election: no leader, epoch 7 -> 8
NEW_LEADER_ROUND = 15  # voter 2 leads epoch 8
HW_STALL_ROUNDS = range(20, 24)  # the high watermark stops while the leader appends
STALE_OBSERVER_ROUND = 25  # observer 101 stops fetching
BROKER_DOWN_ROUNDS = range(6, 19)  # broker 3 offline: out of every ISR
ELR_ROUNDS = range(12, 19)  # payments-1 below min ISR: broker 2 eligible, not in ISR
LEADERLESS_ROUNDS = range(14, 17)  # orders-2 has no leader
NOT_LEADER_ROUNDS = range(15, 18)  # DescribeProducers on orders-2 answers NOT_LEADER
SLOW_ROUND, SLOW_SECONDS = 20, 1.5  # DescribeTopicPartitions answered late
HANG_UP_ROUND = INCIDENT_ROUNDS - 1  # the last DescribeTopicPartitions is never answered
FIND_COORDINATOR, DESCRIBE_GROUPS = 10, 15
COORDINATOR_GROUP = "billing"  # a consumer group whose coordinator sits on broker 3 ...
COORDINATOR_ROUNDS = {2: 3, BROKER_DOWN_ROUNDS.start: None, BROKER_DOWN_ROUNDS.start + 1: 2}
COORDINATOR_NOT_AVAILABLE = 15  # ... unavailable once broker 3 is down, then on broker 2


def incident_producers() -> list[ScriptedProducer]:
    return [
        ScriptedProducer(3001, 0, (("orders", 0), ("orders", 1)), records_per_step=5),
        ScriptedProducer(3002, 0, (("orders", 2), ("payments", 0)), records_per_step=3,
                         epoch_bump_step=10),
        ScriptedProducer(7001, 4, (("payments", 0), ("payments", 1)), records_per_step=2,
                         last_step=5, coordinator_epoch=12, open_transaction_step=3,
                         transaction_start_offsets={("payments", 0): 1520,
                                                    ("payments", 1): 860}),
        ScriptedProducer(3004, 2, (("orders", 1),), records_per_step=6, sequence_rewind_step=18),
    ]


class IncidentStory(PeerStory):
    """A three-broker cluster's bad minute and a half, told through APIs 55, 61 and 75.

    The quorum loses a voter to lag, then its leader, then its high watermark; broker 3
    drops out of every ISR; a partition goes leaderless; a transaction is left open; a
    producer's sequence numbers go backwards. The round advances with each
    DescribeQuorum call; the other two APIs answer for the current round.
    """

    served_apis = (DESCRIBE_QUORUM, DESCRIBE_PRODUCERS, DESCRIBE_TOPIC_PARTITIONS)

    def __init__(self) -> None:
        super().__init__(INCIDENT_TOPICS, max_version=2)
        self.quorum = QuorumStory()
        self.producers = incident_producers()
        self.producers_round = -1
        self.partitions_round = -1
        self.leader_end = self.quorum.high_watermark + 4

    def api_versions(self) -> Values:
        ranges = [(API_VERSIONS, 0, 4), (METADATA, 0, 12), (DESCRIBE_QUORUM, 0, 2),
                  (DESCRIBE_PRODUCERS, 0, 0), (DESCRIBE_TOPIC_PARTITIONS, 0, 0),
                  (FIND_COORDINATOR, 0, 4), (DESCRIBE_GROUPS, 0, 5)]
        return {"error_code": 0, "throttle_time": 0,
                "api_keys": [{"api_key": key, "min_version": low, "max_version": high}
                             for key, low, high in ranges]}

    def answer(self, request: Request) -> Values | None:
        now = now_ms()
        if request.api_key == DESCRIBE_QUORUM:
            self.step += 1
            return self._quorum(now)
        if request.api_key == DESCRIBE_PRODUCERS:
            return self._producers(request, now)
        if request.api_key == DESCRIBE_TOPIC_PARTITIONS:
            return self._partitions(request)
        if request.api_key == FIND_COORDINATOR:
            return self._coordinator(request)
        if request.api_key == DESCRIBE_GROUPS:
            return self._groups(request)
        return super().answer(request)

    # group coordinator

    def _coordinator(self, request: Request) -> Values:
        """The coordinator of every key asked: broker 3, none while it is down, then broker 2."""
        node = COORDINATOR_ROUNDS.get(self.step)
        keys = request.body.coordinator_keys if request.api_version >= 4 else (request.body.key,)
        answers = [{"key": key, "node_id": -1 if node is None else node, "host": "" if node is None else LOOPBACK,
                    "port": -1 if node is None else self.port,
                    "error_code": COORDINATOR_NOT_AVAILABLE if node is None else 0,
                    "error_message": None if node is not None else "broker 3 is down"} for key in keys]
        event = "group coordinator not available" if node is None else f"group coordinator on broker {node}"
        self.note(event, api="FindCoordinator", group=COORDINATOR_GROUP, node_id=node)
        return {"throttle_time": 0, "coordinators": answers, **answers[0]}

    def _groups(self, request: Request) -> Values:
        return {"throttle_time": 0, "groups": [
            {"error_code": 0, "group_id": group, "group_state": "Stable", "protocol_type": "consumer",
             "protocol_data": "range", "members": [], "authorized_operations": NOT_AUTHORIZED_OPERATIONS}
            for group in request.body.groups]}

    # quorum

    def _quorum(self, now: int) -> Values:
        quorum, step = self.quorum, self.step
        quorum.step = step
        if step == LEADERLESS_QUORUM_ROUND:
            quorum.leader_id, quorum.leader_epoch = -1, quorum.leader_epoch + 1
        if step == NEW_LEADER_ROUND:
            quorum.leader_id = 2
        if step in HW_STALL_ROUNDS:  # the leader appends, no majority follows
            self.leader_end += 45
        else:
            quorum.high_watermark = (max(quorum.high_watermark, self.leader_end - 4)
                                     + 37 + 11 * (step % 3))
            self.leader_end = quorum.high_watermark + 4
        for replica in (*VOTERS, *OBSERVERS):
            self._follow(replica, now - 3 * (replica % 10))
        if quorum.leader_id > 0:
            quorum.replicas[quorum.leader_id] = ReplicaProgress(self.leader_end, -1, now)
        self._note_quorum_events()
        partition = {"partition_index": 0, "error_code": 0, "error_message": None,
                     "leader_id": quorum.leader_id, "leader_epoch": quorum.leader_epoch,
                     "high_watermark": quorum.high_watermark,
                     "current_voters": [quorum._replica(voter) for voter in VOTERS],
                     "observers": [quorum._replica(observer) for observer in OBSERVERS
                                   if observer in quorum.replicas]}
        return {"error_code": 0, "error_message": None,
                "topics": [{"topic_name": "__cluster_metadata", "partitions": [partition]}],
                "nodes": [_node(voter) for voter in VOTERS]}

    def _follow(self, replica: int, fetched_at: int) -> None:
        quorum, step = self.quorum, self.step
        known = quorum.replicas.get(replica)
        if replica == LATE_OBSERVER and step < OBSERVER_JOIN_ROUND:
            return
        if replica == STALE_OBSERVER and step >= STALE_OBSERVER_ROUND:
            return
        if replica == quorum.leader_id:
            return
        if replica == LAGGING_VOTER and step in VOTER_LAG_ROUNDS and known is not None:
            quorum.replicas[replica] = ReplicaProgress(known.log_end_offset + 6, fetched_at,
                                                       known.last_caught_up_timestamp)
            return
        behind = 0 if replica in VOTERS else 5 + replica % 7
        quorum.replicas[replica] = ReplicaProgress(quorum.high_watermark - behind, fetched_at,
                                                   fetched_at)

    def _note_quorum_events(self) -> None:
        events = {VOTER_LAG_ROUNDS.start: ("voter falls behind", LAGGING_VOTER),
                  VOTER_LAG_ROUNDS.stop: ("voter caught up", LAGGING_VOTER),
                  OBSERVER_JOIN_ROUND: ("observer joined", LATE_OBSERVER),
                  LEADERLESS_QUORUM_ROUND: ("quorum leader lost, election", -1),
                  NEW_LEADER_ROUND: ("leader change", 2),
                  HW_STALL_ROUNDS.start: ("high watermark stops advancing", 2),
                  HW_STALL_ROUNDS.stop: ("high watermark advances again", 2),
                  STALE_OBSERVER_ROUND: ("observer stopped fetching", STALE_OBSERVER)}
        if self.step in events:
            event, replica = events[self.step]
            self.note(event, api="DescribeQuorum", replica_id=replica,
                      leader_epoch=self.quorum.leader_epoch)

    # producers

    def _producers(self, request: Request, now: int) -> Values:
        if self.producers_round < self.step:
            self.producers_round = self.step
            for producer in self.producers:
                producer.advance(self.step, now)
            self._note_producer_events()
        return {"throttle_time": 0,
                "topics": [{"name": topic.name,
                            "partitions": [self._producer_partition((topic.name, index))
                                           for index in topic.partition_indexes]}
                           for topic in request.body.topics]}

    def _producer_partition(self, partition: TopicPartition) -> Values:
        if partition == ("orders", 2) and self.step in NOT_LEADER_ROUNDS:
            return {"partition_index": partition[1], "error_code": NOT_LEADER_OR_FOLLOWER,
                    "error_message": "orders-2 has no leader", "active_producers": []}
        states = [producer.state(partition, self.step) for producer in self.producers]
        return {"partition_index": partition[1], "error_code": 0, "error_message": None,
                "active_producers": [state for state in states if state is not None]}

    def _note_producer_events(self) -> None:
        for producer in self.producers:
            facts = {"api": "DescribeProducers", "producer_id": producer.producer_id}
            if self.step == producer.epoch_bump_step:
                self.note("epoch bump", producer_epoch=producer.producer_epoch, **facts)
            if self.step == producer.open_transaction_step:
                self.note("transaction opened and never closed", **facts)
            if self.step == producer.sequence_rewind_step:
                self.note("sequence numbers go backwards", **facts)
        if self.step in (NOT_LEADER_ROUNDS.start, NOT_LEADER_ROUNDS.stop):
            self.note("partition error" if self.step in NOT_LEADER_ROUNDS else "partition recovered",
                      api="DescribeProducers", topic="orders", partition=2)

    # partitions

    def _partitions(self, request: Request) -> Values | None:
        if self.partitions_round < self.step:
            self.partitions_round = self.step
            self._note_partition_events()
        if self.step == SLOW_ROUND:
            time.sleep(SLOW_SECONDS)
        if self.step == HANG_UP_ROUND:
            return None
        asked = [topic.name for topic in request.body.topics]
        return {"throttle_time": 0, "next_cursor": None,
                "topics": [self._topic(name) for name in asked]}

    def _topic(self, name: str) -> Values:
        count = self.topics.get(name, 0)
        return {"error_code": 0 if name in self.topics else 3, "name": name,
                "topic_id": topic_id(name) if name in self.topics else ZERO_UUID,
                "is_internal": False, "topic_authorized_operations": NOT_AUTHORIZED_OPERATIONS,
                "partitions": [self._topic_partition(name, index) for index in range(count)]}

    def _topic_partition(self, topic: str, index: int) -> Values:
        rank = sum(map(ord, topic)) + index
        replicas = [BROKERS[(rank + shift) % 3] for shift in range(3)]
        down = [3] if self.step in BROKER_DOWN_ROUNDS else []
        isr = [broker for broker in replicas if broker not in down]
        elr: list[int] = []
        leader = isr[0]
        if (topic, index) == ("payments", 1) and self.step in ELR_ROUNDS:
            isr, elr = isr[:1], isr[1:]
            leader = isr[0]
        if (topic, index) == ("orders", 2) and self.step in LEADERLESS_ROUNDS:
            leader, elr, isr = -1, isr, []
        return {"error_code": 0, "partition_index": index, "leader_id": leader,
                "leader_epoch": 3 + (self.step >= BROKER_DOWN_ROUNDS.start)
                + (self.step >= LEADERLESS_ROUNDS.stop),
                "replica_nodes": replicas, "isr_nodes": isr,
                "eligible_leader_replicas": elr, "last_known_elr": [],
                "offline_replicas": down}

    def _note_partition_events(self) -> None:
        events = {BROKER_DOWN_ROUNDS.start: "broker 3 offline: ISR shrinks",
                  BROKER_DOWN_ROUNDS.stop: "broker 3 back: ISR expands",
                  ELR_ROUNDS.start: "payments-1 below min ISR: ELR in use",
                  LEADERLESS_ROUNDS.start: "orders-2 leaderless",
                  LEADERLESS_ROUNDS.stop: "orders-2 has a leader again",
                  SLOW_ROUND: "DescribeTopicPartitions answered 1.5 s late",
                  HANG_UP_ROUND: "DescribeTopicPartitions never answered: peer hangs up"}
        if self.step in events:
            self.note(events[self.step], api="DescribeTopicPartitions")
