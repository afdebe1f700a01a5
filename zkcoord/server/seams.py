"""What the server needs of its collaborators, as Protocols: the broker's group coordinator (one node's
`GroupService` or a cluster node's `ClusterRouting`) and the cluster side of a ZooKeeper-era node; the group
service's offset mirror and mixed-group bridge (both implemented in `zkcoord.bridge`, which the server does not
import); mypy checks every implementation.

Why Protocols and not base classes: the broker and the wire server are written against these few methods only,
so a reader (and mypy) sees the whole contract here, and tests pass small fakes without inheriting anything.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Protocol

from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from zkcoord.group.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.server.log import OffsetsTopicLog
from zkcoord.server.messages import Coordinator, TopicMeta
from zkcoord.topic_partition import TopicPartition

# The topics of a list the requesting principal may Describe (Kafka's `filterTopicDescribeAuthorizedTopics`):
# a consumer group's regular expressions resolved during that principal's heartbeat match only those.
Describable = Callable[[Sequence[str]], Iterable[str]]


class GroupCoordinator(Protocol):
    """The nine group APIs and the two of the consumer protocol, one zkcoord request in, its response out (parked until the coordinator answers)."""

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse: ...

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse: ...

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse: ...

    def heartbeat_now(self, req: HeartbeatRequest) -> HeartbeatResponse | Awaitable[HeartbeatResponse]:
        """The same heartbeat, answered without a task or a future when nothing has to wait (no write pending
        ahead of it): the hottest request, so the wire layer writes its answer at once."""
        ...

    async def leave_group(self, req: LeaveGroupRequest) -> LeaveGroupResponse: ...

    async def offset_commit(self, req: OffsetCommitRequest) -> OffsetCommitResponse: ...

    async def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse: ...

    async def describe_groups(self, req: DescribeGroupsRequest) -> DescribeGroupsResponse: ...

    async def list_groups(self, req: ListGroupsRequest) -> ListGroupsResponse: ...

    async def delete_groups(self, req: DeleteGroupsRequest) -> DeleteGroupsResponse: ...

    async def partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Topic deletion's hook (Kafka's `handleDeletedPartitions`): every group's committed offsets of these
        partitions are dropped, durably, before it returns; raises when that cannot be done now."""

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        """`describable`: the requester's Describe filter for the regular expressions this heartbeat may resolve
        (None: no authorizer, every topic)."""
        ...

    def consumer_group_heartbeat_now(
        self, req: ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> ConsumerGroupHeartbeatResponse | Awaitable[ConsumerGroupHeartbeatResponse]:
        """The same heartbeat, answered without a task or a future when nothing has to wait (no record to write,
        no write pending ahead of it): a steady member's heartbeat, the protocol's hottest request."""
        ...

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse: ...


class ClusterSide(Protocol):
    """What the broker asks a cluster node: who is alive, who leads what, where a group's coordinator is, and
    the `__consumer_offsets` partitions it serves. Absent (None) on a single node, which leads everything."""

    def brokers(self) -> list[tuple[int, str, int]]:
        """Live nodes with a PLAINTEXT endpoint, by id: (node id, host, port)."""
        ...

    def cluster_id(self) -> str:
        """`/cluster/id` (Kafka's getOrGenerateClusterId), what Metadata v2+ answers."""
        ...

    def controller_id(self) -> int: ...

    def leads(self, topic: str, partition: int) -> bool: ...

    def partition_meta(self, topic: str, count: int) -> list[tuple[int, int, tuple[int, ...], int]]:
        """(partition, leader, replicas, error) of a data topic's partitions (ZooKeeper's count wins while
        local logs catch up)."""
        ...

    def topic_created(self, topic: str, partitions: int) -> None:
        """Auto-create: publish the topic to ZooKeeper in the background (answered LEADER_NOT_AVAILABLE)."""
        ...

    async def publish_topic(
        self, topic: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> tuple[bool, int, dict[str, str], uuid.UUID | None]:
        """CreateTopics: (created by this call, partition count in ZooKeeper, the topic's stored configs, from
        `/config/topics/T`, its KIP-516 id in ZooKeeper: None until the controller gives a znode written without
        one an id); raises when ZooKeeper is away."""

    async def delete_topic(self, topic: str, timeout_ms: int) -> bool:
        """DeleteTopics on the controller: mark the topic for deletion (`/admin/delete_topics/T`) and wait up to
        `timeout_ms` for the deletion to complete; whether it completed. Raises when ZooKeeper is away."""
        ...

    def find_coordinator(self, group_id: str) -> Coordinator: ...

    def offsets_partition_count(self) -> int: ...

    def offsets_log(self, partition: int) -> OffsetsTopicLog | None:
        """The readable `__consumer_offsets` partition, or None unless this node leads and has loaded it."""
        ...

    def offsets_topic_meta(self) -> TopicMeta: ...


class OffsetsV0(Protocol):
    """Where OffsetCommit/OffsetFetch version 0 go on a cluster node: ZooKeeper, as in Kafka 0.8.2-2.x
    (`zkcoord.server.offsets_v0`). Absent on a single node, whose coordinator answers every version."""

    async def offset_commit(self, req: OffsetCommitRequest) -> OffsetCommitResponse: ...

    async def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse: ...


class OffsetMirror(Protocol):
    """What a group service needs of an offset mirror (zkcoord.bridge.ZkOffsetBridge, `serve --bridge-zk-offsets`):
    re-mirror loaded offsets, mirror an acknowledged commit, merge a fetch with the other store."""

    def submit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> asyncio.Future[bool]:
        """Queue `offsets` (keyed as the coordinator's own offsets map is: plain (topic, partition) pairs, equal to
        TopicPartition) for the other store; the future says whether they landed (or were already met)."""
        ...

    async def mirror_commit(self, req: OffsetCommitRequest, resp: OffsetCommitResponse) -> None: ...

    async def fetch_merged(
        self, req: OffsetFetchRequest, resp: OffsetFetchResponse
    ) -> OffsetFetchResponse: ...


class MembershipBridge(Protocol):
    """What a group service needs of the mixed-group bridge (zkcoord.bridge.membership.MixedGroupBridge,
    `serve --bridge-zk-groups`). Members are passed as (member id, client id, subscribed topics)."""

    def bridges(self, group_id: str) -> bool: ...

    def usable_protocols(self, protocol_type: str, protocols: Iterable[tuple[str, bytes]]) -> tuple[str, ...]:
        """The names of the offered protocols a mixed group hosts (any ConsumerProtocol assignor name); raises
        (with `code` INCONSISTENT_GROUP_PROTOCOL), saying why, for a member that offers none."""
        ...

    async def check_join(self, group: str, topics: Sequence[str], protocol: str) -> None: ...

    def watch(self, group: str, topics: Sequence[str], on_change: Callable[[], None]) -> None:
        """Call `on_change()` on the loop when the group's legacy members or its topics change; a later call
        replaces the callback."""
        ...

    async def assign(
        self,
        group: str,
        protocol: str,
        members: Sequence[tuple[str, str, tuple[str, ...]]],
        timeout_ms: int,
        metadata: Mapping[str, bytes] | None = None,
        owned: Mapping[str, Sequence[TopicPartition]] | None = None,
    ) -> dict[str, bytes]:
        """`owned`: member id -> partitions it may still consume (a consumer-protocol member): kept fenced."""
        ...

    def hand_over_incomplete(self, group: str, holding: Iterable[str] = ()) -> bool:
        """Whether the group's last hand-over left a partition unheld (a previous owner did not let go in time),
        leaving out those going to the members in `holding` (whose answers the service holds for a `hand_on`)."""
        ...

    def withheld(self, group: str) -> Mapping[TopicPartition, tuple[str, str]]:
        """Partition -> (member id that still owns it, member id it goes to), both KIP-429 classic members: what
        the group's last hand-over withheld and `hand_on` can still move."""
        ...

    async def hand_on(
        self, group: str, giver: str, still_owned: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[str, bytes]:
        """`giver` rejoined without the partitions withheld from others for it (none of them in `still_owned`):
        their owner znodes go to the members they were withheld for (a new one is registered now and takes the
        rest of its share, waiting at most `timeout_ms`), and each such member's assignment
        (ConsumerProtocolAssignment bytes of what is held for it now) is returned by member id."""
        ...

    async def preregister(
        self, group: str, member: tuple[str, str, tuple[str, ...]], kind: str = "classic"
    ) -> None:
        """Register a joining member early; `kind`: "classic" or "consumer" (KIP-848), kept in its registration."""
        ...

    def offered(self, group: str, member_id: str, names: Sequence[str]) -> None:
        """A classic member's JoinGroup offered these protocol names (its order, all of them): written into its
        registration when the bridge writes it, for `migrate handoff`'s one-protocol check."""
        ...

    async def members_changed(self, group: str, present: Iterable[str]) -> None: ...

    async def adopted_members(
        self, group: str, adopt: bool = True
    ) -> dict[str, tuple[str, tuple[str, ...], tuple[TopicPartition, ...], str | None]]:
        """Adopt the group (unless `adopt` is False) and return its registered broker-protocol members by member
        id: (client id, topics, partitions their owner znodes hold, kind: "classic", "consumer" or None when the
        registration does not say)."""
        ...

    async def legacy_members(
        self, group: str
    ) -> dict[str, tuple[tuple[str, ...], tuple[TopicPartition, ...]]]:
        """The group's legacy members by consumer id: (topics, partitions their owner znodes hold)."""
        ...

    async def legacy_owns(self, group: str, tps: Sequence[TopicPartition]) -> bool: ...
