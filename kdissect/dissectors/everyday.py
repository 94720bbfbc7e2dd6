"""Summary rules of the everyday APIs: what a request asks and a response answers, in a few words.

One table: API key -> (request rules, response rules), each rule a label, the
path(s) of its values and how they read (see `summaries`). Topic names, group
ids and transactional ids come from the definitions' entity types for every API,
and non-zero error codes are named for every API, so the rules leave them out
unless a field needs saying in its own words (`coordinator=`).
"""

from __future__ import annotations

from kdissect.dissectors.summaries import (
    Rule,
    committed,
    coordinators,
    count,
    distinct,
    known,
    milliseconds,
    named,
    nonzero,
    nonzero_milliseconds,
    records,
    size,
    value,
)

KEY_TYPES = {0: "group", 1: "transaction", 2: "share"}  # FindCoordinator's CoordinatorType
# ListOffsets' special timestamps: which offset is asked for instead of a time.
OFFSET_SPECS = {-1: "latest", -2: "earliest", -3: "max_timestamp", -4: "earliest_local", -5: "latest_tiered"}
THROTTLE: Rule = ("throttle", "ThrottleTimeMs", nonzero_milliseconds)
GROUP_MEMBER: tuple[Rule, ...] = (("generation", "GenerationId|GenerationIdOrMemberEpoch", value),
                                  ("member", "MemberId", value))

RULES: dict[int, tuple[tuple[Rule, ...], tuple[Rule, ...]]] = {
    0: (  # Produce
        (("acks", "Acks", value), ("partitions", "TopicData.PartitionData", count),
         ("records", "TopicData.PartitionData.Records", records),
         ("bytes", "TopicData.PartitionData.Records", size)),
        (("partitions", "Responses.PartitionResponses", count),
         ("base_offsets", "Responses.PartitionResponses.BaseOffset", distinct), THROTTLE),
    ),
    1: (  # Fetch: a follower's (a broker's) replica id, in the tagged ReplicaState from v15
        (("replica", "ReplicaId|ReplicaState.ReplicaId", known), ("max_wait", "MaxWaitMs", milliseconds), ("min_bytes", "MinBytes", value),
         ("session", "SessionId", nonzero), ("session_epoch", "SessionEpoch", known),
         ("partitions", "Topics.Partitions", count)),
        (("session", "SessionId", nonzero), ("partitions", "Responses.Partitions", count),
         ("records", "Responses.Partitions.Records", records),
         ("bytes", "Responses.Partitions.Records", size),
         ("high_watermarks", "Responses.Partitions.HighWatermark", distinct), THROTTLE),
    ),
    2: (  # ListOffsets
        (("partitions", "Topics.Partitions", count), ("timestamps", "Topics.Partitions.Timestamp", named(OFFSET_SPECS))),
        (("partitions", "Topics.Partitions", count),
         ("offsets", "Topics.Partitions.Offset|Topics.Partitions.OldStyleOffsets", distinct), THROTTLE),
    ),
    3: (  # Metadata: a request's topics are named; none named means all
        (),
        (("brokers", "Brokers", count), ("controller", "ControllerId", known),
         ("partitions", "Topics.Partitions", count), THROTTLE),
    ),
    8: (  # OffsetCommit
        (*GROUP_MEMBER, ("partitions", "Topics.Partitions", count),
         ("offsets", "Topics.Partitions.CommittedOffset", distinct)),
        (("partitions", "Topics.Partitions", count), THROTTLE),
    ),
    9: (  # OffsetFetch
        (("member", "MemberId|Groups.MemberId", value),
         ("partitions", "Topics.PartitionIndexes|Groups.Topics.PartitionIndexes", count)),
        (("partitions", "Topics.Partitions|Groups.Topics.Partitions", count),
         ("offsets", "Topics.Partitions.CommittedOffset|Groups.Topics.Partitions.CommittedOffset", distinct),
         THROTTLE),
    ),
    10: (  # FindCoordinator
        (("key", "Key|CoordinatorKeys", distinct), ("key_type", "KeyType", named(KEY_TYPES))),
        (("coordinator", "Coordinators|", coordinators), THROTTLE),
    ),
    11: (  # JoinGroup
        (("member", "MemberId", value), ("protocol_type", "ProtocolType", value),
         ("protocols", "Protocols.Name", distinct), ("session_timeout", "SessionTimeoutMs", milliseconds)),
        (*GROUP_MEMBER, ("protocol", "ProtocolName", value), ("leader", "Leader", value),
         ("members", "Members", count), THROTTLE),
    ),
    12: (GROUP_MEMBER, (THROTTLE,)),  # Heartbeat
    13: (  # LeaveGroup
        (("member", "MemberId|Members.MemberId", distinct),),
        (("members", "Members", count), THROTTLE),
    ),
    14: (  # SyncGroup
        (*GROUP_MEMBER, ("protocol", "ProtocolName", value), ("assignments", "Assignments", count)),
        (("protocol", "ProtocolName", value), THROTTLE),
    ),
    15: (  # DescribeGroups
        (),
        (("states", "Groups.GroupState", distinct), ("protocols", "Groups.ProtocolData", distinct),
         ("members", "Groups.Members", count), THROTTLE),
    ),
    16: (  # ListGroups
        (("states_filter", "StatesFilter", distinct), ("types_filter", "TypesFilter", distinct)),
        (("groups", "Groups", count), ("states", "Groups.GroupState", distinct), THROTTLE),
    ),
    17: (  # SaslHandshake
        (("mechanism", "Mechanism", value),),
        (("mechanisms", "Mechanisms", distinct),),
    ),
    18: (  # ApiVersions
        (("software", "ClientSoftwareName", value), ("software_version", "ClientSoftwareVersion", value)),
        (("apis", "ApiKeys", count), THROTTLE),
    ),
    19: (  # CreateTopics
        (("num_partitions", "Topics.NumPartitions", distinct),
         ("replication_factor", "Topics.ReplicationFactor", distinct)),
        (THROTTLE,),
    ),
    20: ((), (THROTTLE,)),  # DeleteTopics: the topics and their errors say it all
    22: (  # InitProducerId
        (("transaction_timeout", "TransactionTimeoutMs", milliseconds), ("producer", "ProducerId", known)),
        (("producer", "ProducerId", known), ("epoch", "ProducerEpoch", known), THROTTLE),
    ),
    24: (  # AddPartitionsToTxn
        (("producer", "V3AndBelowProducerId|Transactions.ProducerId", distinct),
         ("epoch", "V3AndBelowProducerEpoch|Transactions.ProducerEpoch", distinct),
         ("partitions", "V3AndBelowTopics.Partitions|Transactions.Topics.Partitions", count)),
        (("partitions", "ResultsByTopicV3AndBelow.ResultsByPartition"
          "|ResultsByTransaction.TopicResults.ResultsByPartition", count), THROTTLE),
    ),
    26: (  # EndTxn
        (("producer", "ProducerId", value), ("epoch", "ProducerEpoch", value),
         ("result", "Committed", committed)),
        (THROTTLE,),
    ),
    68: (  # ConsumerGroupHeartbeat
        (("member", "MemberId", value), ("member_epoch", "MemberEpoch", value),
         ("partitions_owned", "TopicPartitions.Partitions", count)),
        (("member", "MemberId", value), ("member_epoch", "MemberEpoch", value),
         ("heartbeat_interval", "HeartbeatIntervalMs", milliseconds),
         ("partitions_assigned", "Assignment.TopicPartitions.Partitions", count), THROTTLE),
    ),
}

__all__ = ["RULES"]
