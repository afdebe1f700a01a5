"""The data-plane requests and responses the broker reads and writes (ApiVersions, Metadata, FindCoordinator,
CreateTopics, Produce, ListOffsets, Fetch, InitProducerId) as frozen values with Kafka's field names.

They are to the data plane what `zkcoord.group.messages` is to the group APIs: `kafka_protocol` decodes frames
into them and encodes them back, so no other module sees kafka-python's classes. Version differences are
resolved by the adapter (a field a version lacks arrives with Kafka's default), so handlers read plain values.
Error codes are `zkcoord.group.errors.ErrorCode` members (ints on the wire).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

NO_OPERATIONS_FIELD = -(2**31)  # an "authorized operations" field not asked for (Kafka's INT32_MIN default)

# -- Metadata ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    index: int
    leader: int
    replicas: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMeta:
    name: str
    error_code: int
    partitions: tuple[PartitionMeta, ...]
    internal: bool = False
    authorized_operations: int = NO_OPERATIONS_FIELD  # v8+, when asked (KIP-430)
    topic_id: uuid.UUID | None = None  # v10+ (KIP-516); None: the zero uuid


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    api_version: int
    topics: tuple[str, ...] | None  # None: every topic (a null list v1+, an empty list v0)
    allow_auto_topic_creation: bool  # always true before v4, which has no such field
    include_cluster_authorized_operations: bool = False  # v8-10
    include_topic_authorized_operations: bool = False  # v8+
    topic_ids: tuple[
        uuid.UUID, ...
    ] = ()  # v10+ topics asked by id (name null), as librdkafka does for KIP-848


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    brokers: tuple[BrokerEndpoint, ...]
    cluster_id: str
    controller_id: int
    topics: tuple[TopicMeta, ...]
    cluster_authorized_operations: int = NO_OPERATIONS_FIELD  # v8-10, when asked


# -- FindCoordinator --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    api_version: int
    key_type: int  # 0 group, 1 transaction (v0 has no field: group)
    keys: tuple[str, ...]  # v0-3 carry one key, v4+ a batch (KIP-699)


@dataclass(frozen=True, slots=True)
class Coordinator:
    key: str
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    coordinators: tuple[Coordinator, ...]  # one per key, in request order (v0-3: exactly one)


# -- CreateTopics -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str | None
    num_partitions: int  # -1: the broker's default
    replication_factor: int  # -1: the broker's default
    assignment_count: int  # partitions given by a manual replica assignment (0: none)
    configs: tuple[tuple[str, str | None], ...] = ()  # topic configs (retention.ms, segment.bytes, ...)


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    api_version: int
    topics: tuple[CreatableTopic, ...]
    validate_only: bool  # false before v1


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str | None
    error_code: int
    error_message: str | None
    num_partitions: int
    topic_config_error_code: int = 0  # v5+: TOPIC_AUTHORIZATION_FAILED without DescribeConfigs on the topic
    topic_id: uuid.UUID | None = None  # v7+ (KIP-516): the created topic's id; None: the zero uuid


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    api_version: int
    topic_names: tuple[str, ...]
    timeout_ms: int  # how long to wait for the deletions to complete (<= 0: start them and answer at once)


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str
    error_code: int
    error_message: str | None = None  # v5+


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    topics: tuple[DeletableTopicResult, ...]


# -- Produce ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducePartition:
    index: int
    records: bytes | None


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str
    partitions: tuple[ProducePartition, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    api_version: int
    acks: int
    topics: tuple[ProduceTopic, ...]


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    index: int
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None


@dataclass(frozen=True, slots=True)
class ProduceTopicResult:
    name: str
    partitions: tuple[ProducePartitionResult, ...]


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    topics: tuple[ProduceTopicResult, ...]


# -- ListOffsets ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition_index: int
    timestamp: int  # -1 latest, -2 earliest, -3 max timestamp (KIP-734), else a time in ms


@dataclass(frozen=True, slots=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    api_version: int
    topics: tuple[ListOffsetsTopic, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResult:
    partition_index: int
    error_code: int
    timestamp: int
    offset: int


@dataclass(frozen=True, slots=True)
class ListOffsetsTopicResult:
    name: str
    partitions: tuple[ListOffsetsPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResult, ...]


# -- Fetch ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    api_version: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # the response's byte budget; unbounded (2^31-1) before v3, which has no such field
    topics: tuple[FetchTopic, ...]
    replica_id: int = -1  # >= 0: a follower broker's fetch (Kafka then needs ClusterAction, not Read)


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


@dataclass(frozen=True, slots=True)
class FetchTopicResult:
    topic: str
    partitions: tuple[FetchPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    topics: tuple[FetchTopicResult, ...]  # no fetch sessions: every partition asked is answered


# -- InitProducerId ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    api_version: int
    transactional_id: str | None


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error_code: int
    producer_id: int
    producer_epoch: int
