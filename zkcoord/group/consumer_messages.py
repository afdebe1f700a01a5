"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) as zkcoord values: what the wire codec decodes into
and encodes from (`zkcoord.server.consumer_protocol`), and what the consumer-group handlers take and return.

Topic partitions are keyed by topic id, a 32-digit lowercase hex string (Kafka's Uuid), as on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]  # ((topic id hex, partitions), ...)


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    """Fields are None (numbers -1) where the client sends "unchanged since the last heartbeat"."""

    api_version: int
    group_id: str
    member_id: str
    member_epoch: int  # 0 join, -1 leave, -2 static member leaving temporarily, > 0 heartbeat
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None  # v1
    server_assignor: str | None = None
    topic_partitions: TopicPartitions | None = None  # owned, by topic id
    client_id: str = ""  # from the request header
    client_host: str = ""  # from the connection


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0  # Kafka's error answers leave it at the schema's default, 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged, not sent


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeRequest:
    api_version: int
    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    subscribed_topic_regex: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error_code: int
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    authorized_operations: int = -(2**31)  # the field's default: not asked for


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]
