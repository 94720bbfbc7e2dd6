"""Every Kafka API key: name, the versions ever published, and where flexible begins.

Facts from Apache Kafka's message definitions (clients/src/main/resources/
common/message/*.json), widened to the oldest version each API ever had so
that captures of old clients still decode: Kafka 4.0 dropped Produce v0-2,
Fetch v0-3 and the ZooKeeper-era inter-broker APIs (keys 4-7), but traffic
from older clusters still carries them.

The header version of a message follows from this table alone:
request header v2 from the first flexible version on, v1 before it (v0 only
for ControlledShutdown v0); response header v1 from the first flexible version
on, v0 before it, and v0 always for ApiVersions (a client must be able to read
the broker's answer before it knows which versions the broker speaks).
"""

from __future__ import annotations

from dataclasses import dataclass

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7


@dataclass(frozen=True, slots=True)
class ApiInfo:
    key: int
    name: str
    min_version: int
    max_version: int
    first_flexible: int | None  # None: no version is flexible

    def valid(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


_TABLE = (
    ApiInfo(0, 'Produce', 0, 13, 9),
    ApiInfo(1, 'Fetch', 0, 18, 12),
    ApiInfo(2, 'ListOffsets', 0, 11, 6),
    ApiInfo(3, 'Metadata', 0, 13, 9),
    ApiInfo(4, 'LeaderAndIsr', 0, 7, 4),
    ApiInfo(5, 'StopReplica', 0, 4, 2),
    ApiInfo(6, 'UpdateMetadata', 0, 8, 6),
    ApiInfo(7, 'ControlledShutdown', 0, 3, 3),
    ApiInfo(8, 'OffsetCommit', 0, 10, 8),
    ApiInfo(9, 'OffsetFetch', 0, 10, 6),
    ApiInfo(10, 'FindCoordinator', 0, 6, 3),
    ApiInfo(11, 'JoinGroup', 0, 9, 6),
    ApiInfo(12, 'Heartbeat', 0, 4, 4),
    ApiInfo(13, 'LeaveGroup', 0, 5, 4),
    ApiInfo(14, 'SyncGroup', 0, 5, 4),
    ApiInfo(15, 'DescribeGroups', 0, 6, 5),
    ApiInfo(16, 'ListGroups', 0, 5, 3),
    ApiInfo(17, 'SaslHandshake', 0, 1, None),
    ApiInfo(18, 'ApiVersions', 0, 4, 3),
    ApiInfo(19, 'CreateTopics', 0, 7, 5),
    ApiInfo(20, 'DeleteTopics', 0, 6, 4),
    ApiInfo(21, 'DeleteRecords', 0, 2, 2),
    ApiInfo(22, 'InitProducerId', 0, 6, 2),
    ApiInfo(23, 'OffsetForLeaderEpoch', 0, 4, 4),
    ApiInfo(24, 'AddPartitionsToTxn', 0, 5, 3),
    ApiInfo(25, 'AddOffsetsToTxn', 0, 4, 3),
    ApiInfo(26, 'EndTxn', 0, 5, 3),
    ApiInfo(27, 'WriteTxnMarkers', 0, 2, 1),
    ApiInfo(28, 'TxnOffsetCommit', 0, 5, 3),
    ApiInfo(29, 'DescribeAcls', 0, 3, 2),
    ApiInfo(30, 'CreateAcls', 0, 3, 2),
    ApiInfo(31, 'DeleteAcls', 0, 3, 2),
    ApiInfo(32, 'DescribeConfigs', 0, 4, 4),
    ApiInfo(33, 'AlterConfigs', 0, 2, 2),
    ApiInfo(34, 'AlterReplicaLogDirs', 0, 2, 2),
    ApiInfo(35, 'DescribeLogDirs', 0, 5, 2),
    ApiInfo(36, 'SaslAuthenticate', 0, 2, 2),
    ApiInfo(37, 'CreatePartitions', 0, 3, 2),
    ApiInfo(38, 'CreateDelegationToken', 0, 3, 2),
    ApiInfo(39, 'RenewDelegationToken', 0, 2, 2),
    ApiInfo(40, 'ExpireDelegationToken', 0, 2, 2),
    ApiInfo(41, 'DescribeDelegationToken', 0, 3, 2),
    ApiInfo(42, 'DeleteGroups', 0, 2, 2),
    ApiInfo(43, 'ElectLeaders', 0, 2, 2),
    ApiInfo(44, 'IncrementalAlterConfigs', 0, 1, 1),
    ApiInfo(45, 'AlterPartitionReassignments', 0, 1, 0),
    ApiInfo(46, 'ListPartitionReassignments', 0, 0, 0),
    ApiInfo(47, 'OffsetDelete', 0, 0, None),
    ApiInfo(48, 'DescribeClientQuotas', 0, 1, 1),
    ApiInfo(49, 'AlterClientQuotas', 0, 1, 1),
    ApiInfo(50, 'DescribeUserScramCredentials', 0, 0, 0),
    ApiInfo(51, 'AlterUserScramCredentials', 0, 0, 0),
    ApiInfo(52, 'Vote', 0, 2, 0),
    ApiInfo(53, 'BeginQuorumEpoch', 0, 1, 1),
    ApiInfo(54, 'EndQuorumEpoch', 0, 1, 1),
    ApiInfo(55, 'DescribeQuorum', 0, 2, 0),
    ApiInfo(56, 'AlterPartition', 0, 3, 2),
    ApiInfo(57, 'UpdateFeatures', 0, 2, 0),
    ApiInfo(58, 'Envelope', 0, 0, 0),
    ApiInfo(59, 'FetchSnapshot', 0, 1, 0),
    ApiInfo(60, 'DescribeCluster', 0, 2, 0),
    ApiInfo(61, 'DescribeProducers', 0, 0, 0),
    ApiInfo(62, 'BrokerRegistration', 0, 4, 0),
    ApiInfo(63, 'BrokerHeartbeat', 0, 2, 0),
    ApiInfo(64, 'UnregisterBroker', 0, 0, 0),
    ApiInfo(65, 'DescribeTransactions', 0, 0, 0),
    ApiInfo(66, 'ListTransactions', 0, 2, 0),
    ApiInfo(67, 'AllocateProducerIds', 0, 0, 0),
    ApiInfo(68, 'ConsumerGroupHeartbeat', 0, 1, 0),
    ApiInfo(69, 'ConsumerGroupDescribe', 0, 1, 0),
    ApiInfo(70, 'ControllerRegistration', 0, 0, 0),
    ApiInfo(71, 'GetTelemetrySubscriptions', 0, 0, 0),
    ApiInfo(72, 'PushTelemetry', 0, 0, 0),
    ApiInfo(73, 'AssignReplicasToDirs', 0, 0, 0),
    ApiInfo(74, 'ListConfigResources', 0, 1, 0),
    ApiInfo(75, 'DescribeTopicPartitions', 0, 0, 0),
    ApiInfo(76, 'ShareGroupHeartbeat', 0, 1, 1),
    ApiInfo(77, 'ShareGroupDescribe', 0, 1, 1),
    ApiInfo(78, 'ShareFetch', 0, 2, 1),
    ApiInfo(79, 'ShareAcknowledge', 0, 2, 1),
    ApiInfo(80, 'AddRaftVoter', 0, 1, 0),
    ApiInfo(81, 'RemoveRaftVoter', 0, 0, 0),
    ApiInfo(82, 'UpdateRaftVoter', 0, 0, 0),
    ApiInfo(83, 'InitializeShareGroupState', 0, 0, 0),
    ApiInfo(84, 'ReadShareGroupState', 0, 0, 0),
    ApiInfo(85, 'WriteShareGroupState', 0, 1, 0),
    ApiInfo(86, 'DeleteShareGroupState', 0, 0, 0),
    ApiInfo(87, 'ReadShareGroupStateSummary', 0, 1, 0),
    ApiInfo(88, 'StreamsGroupHeartbeat', 0, 0, 0),
    ApiInfo(89, 'StreamsGroupDescribe', 0, 0, 0),
    ApiInfo(90, 'DescribeShareGroupOffsets', 0, 1, 0),
    ApiInfo(91, 'AlterShareGroupOffsets', 0, 0, 0),
    ApiInfo(92, 'DeleteShareGroupOffsets', 0, 0, 0),
)

APIS: dict[int, ApiInfo] = {api.key: api for api in _TABLE}


def api_name(key: int) -> str:
    api = APIS.get(key)
    return api.name if api else f"Unknown({key})"


def request_header_version(key: int, version: int) -> int:
    if key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    api = APIS.get(key)
    return 2 if api is not None and api.flexible(version) else 1


def response_header_version(key: int, version: int) -> int:
    if key == API_VERSIONS:
        return 0
    api = APIS.get(key)
    return 1 if api is not None and api.flexible(version) else 0
