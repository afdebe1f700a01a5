"""With `serve --zk`: this node as a member of a ZooKeeper cluster: one GroupService per led offsets partition,
group requests routed by `partition_for(group)`, FindCoordinator / Metadata / data-plane leadership from ZooKeeper.

Guarantees:
* a group request is served only by the GroupService of the offsets partition this node leads and has loaded;
  otherwise it gets NOT_COORDINATOR (partition led elsewhere), COORDINATOR_LOAD_IN_PROGRESS (still loading) or
  COORDINATOR_NOT_AVAILABLE (no leader), with Kafka's per-API mapping (`zkcoord.group.handlers.error_response`);
* partition leaders come from the controller's partition states only (the node never writes a partition state);
  Produce/Fetch/ListOffsets for a partition not led here get NOT_LEADER_OR_FOLLOWER;
* `__consumer_offsets` is a real, read-only internal topic: Metadata lists it (is_internal, one partition per
  offsets partition, leader = the offsets-partition leader), and the node leading a partition serves ListOffsets
  and Fetch from that partition's ZooKeeper record store (`zkcoord.server.log.OffsetsTopicLog`) once loaded;
* a topic created through this node gets `/brokers/topics/T` (replication factor 1, round-robin over live
  nodes) when absent, with its configs in `/config/topics/T` in the same transaction; the controller then assigns
  leaders, and every node creates local logs for the topics it learns about;
* a topic marked for deletion (`/admin/delete_topics/T`) loses this node's group offsets of its partitions, then
  its local logs, before the node acknowledges (`/zkcoord/topic-deletions/T/<id>`), which the controller waits
  for; a learned topic gone from ZooKeeper without that acknowledgement has its logs set aside, never served;
* Metadata's cluster id is `/cluster/id`, created at start as Kafka does when absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar, cast

from zkcoord.cluster.node import ClusterConfig, ClusterNode
from zkcoord.errors import MalformedZnode
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer import TopicLookup
from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    GroupResponse,
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
from zkcoord.legacy import paths
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.placement.leadership import NO_LEADER, single_replica_assignment
from zkcoord.ratelog import RateLimitedLog
from zkcoord.server.group_service import GroupService
from zkcoord.server.log import LEGAL_TOPIC, InvalidConfig, LogManager, OffsetsTopicLog
from zkcoord.server.messages import Coordinator, PartitionMeta, TopicMeta
from zkcoord.server.meta import new_cluster_id
from zkcoord.server.seams import ClusterSide, Describable, GroupCoordinator, MembershipBridge, OffsetMirror
from zkcoord.server.topic_ids import topic_lookup, topics_version
from zkcoord.zk import registry
from zkcoord.zk.controller import (
    ZooKeeperError,
    ack_topic_deletion,
    create_topic_if_absent,
    read_deletion_marks,
    read_topic_configs,
    read_topic_states,
    request_topic_deletion,
)
from zkcoord.zk.record_store import StoreFenced, ZkRecordStore

log = logging.getLogger(__name__)
_say = RateLimitedLog(log)

REFRESH_INTERVAL_S = 0.5
CALLBACK_TIMEOUT_S = 60.0

# topic -> partition -> (leader, replicas); replaced whole by the refresher, read by handlers on the loop
TopicLeaders = dict[str, dict[int, tuple[int, tuple[int, ...]]]]

_Resp = TypeVar("_Resp", bound=GroupResponse)


class ClusterRouting(GroupCoordinator, ClusterSide):
    """Start with `await start(logs)` and stop with `await close()`. As a GroupCoordinator it routes each group
    to the GroupService of its offsets partition; as the broker's ClusterSide it answers who leads what.

    `on_new_data` is called on the loop when an offsets partition's store grows (it wakes waiting Fetches)."""

    def __init__(
        self,
        config: ClusterConfig,
        group_config: GroupConfig,
        logs: LogManager,
        on_new_data: Callable[[], None] | None = None,
        offset_mirror: OffsetMirror | None = None,
        membership_bridge: MembershipBridge | None = None,
        topics: TopicLookup | None = None,  # name -> (topic id hex, partitions); default: this node's logs
        topic_names: Callable[[], Sequence[str]]
        | None = None,  # what regexes resolve against; default: the logs'
    ) -> None:
        self.config = config
        self._topic_lookup = topics
        self._topic_names = topic_names
        self.group_config = group_config
        self.offset_mirror = offset_mirror  # shared by every service this node starts
        self.membership_bridge = membership_bridge  # likewise (mixed groups)
        self.node = ClusterNode(
            config, on_become_leader=self._become_leader, on_resign=self._resign, on_append=self._appended
        )
        self.services: dict[int, GroupService] = {}
        self.offsets_logs: dict[int, OffsetsTopicLog] = {}
        self.on_new_data = on_new_data
        self.topics: TopicLeaders = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._logs = logs
        self._refresher: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._refreshed = asyncio.Event()  # set (and replaced) after every refresh
        self._cluster_id = ""  # /cluster/id, read (or created) at start
        self._acked: set[str] = set()  # marked topics this node has deleted and acknowledged
        self._deletion_errors: dict[str, str] = {}  # marked topic -> the last error deleting it (logged once)
        self._closing = False
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        logs = self._logs
        await asyncio.to_thread(self.node.start)
        # Kafka's getOrGenerateClusterId: /cluster/id, created with a new id by the first node of a cluster.
        self._cluster_id = await asyncio.to_thread(
            registry.get_or_create_cluster_id, self.node.client, new_cluster_id()
        )
        log.info("node=%d cluster id %s", self.config.node_id, self._cluster_id)
        in_zk, _ids = await asyncio.to_thread(self._read_topics)
        for name in sorted(logs.topics):
            if (
                name not in in_zk
                and logs.is_cluster_topic(name)
                and not await asyncio.to_thread(self._topic_exists, name)  # absent, not merely malformed
            ):
                self._set_aside(name, "deleted while this node was away?")
                continue
            await asyncio.to_thread(
                self._publish_topic, name, len(logs.topics[name]), logs.topic_ids.get(name)
            )
        await self.refresh()
        self._refresher = self._loop.create_task(self._refresh_loop())

    async def close(self) -> None:
        self._closing = True
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        # ClusterNode.close resigns every partition through _resign, which hops back onto this loop.
        await asyncio.to_thread(self.node.close)
        for partition in sorted(self.services):
            await self.services.pop(partition).close()

    # -- ClusterNode callbacks (its worker thread) --------------------------------------------------------

    def _become_leader(self, partition: int, store: ZkRecordStore) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        fut = asyncio.run_coroutine_threadsafe(self._start_service(partition, store), loop)
        fut.result(CALLBACK_TIMEOUT_S)

    async def _start_service(self, partition: int, store: ZkRecordStore) -> None:
        old = self.services.pop(partition, None)
        if old is not None:
            await old.close()
        service = GroupService(
            self.group_config,
            store,
            owns_group=lambda g: self.node.partition_for(g) == partition,
            offset_mirror=self.offset_mirror,
            membership_bridge=self.membership_bridge,
            topics=self._topic_lookup or topic_lookup(self._logs),
            topic_names=self._topic_names or (lambda: tuple(self._logs.topics)),
            # the proxy's lookup of the cluster's topics has no version: look them up at every heartbeat
            topics_version=None if self._topic_lookup is not None else topics_version(self._logs),
        )
        await service.start()
        self.services[partition] = service
        self.offsets_logs[partition] = OffsetsTopicLog(store)
        log.info("node=%d serving groups of offsets partition %d", self.config.node_id, partition)

    def _resign(self, partition: int) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.current_thread() is threading.main_thread() and loop.is_running():
            return  # close() on the loop thread drains services itself
        fut = asyncio.run_coroutine_threadsafe(self._stop_service(partition), loop)
        with contextlib.suppress(TimeoutError, RuntimeError):
            fut.result(CALLBACK_TIMEOUT_S)

    def _appended(self, partition: int) -> None:
        """A partition store committed an append (on the appending thread): wake the loop's Fetch waiters."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._new_data)

    def _new_data(self) -> None:
        if self.on_new_data is not None:
            self.on_new_data()

    async def _stop_service(self, partition: int) -> None:
        self.offsets_logs.pop(partition, None)
        service = self.services.pop(partition, None)
        if service is not None:
            await service.close()

    # -- topics and leaders ---------------------------------------------------------------------------------

    def topic_created(self, topic: str, partitions: int) -> None:
        """Broker callback on the loop (auto-create): publish the topic's replica assignment; the refresher
        picks up leaders and follows ZooKeeper's partition count if another node published first."""
        if self._loop is not None:
            task = self._loop.create_task(asyncio.to_thread(self._publish_topic, topic, partitions))
            task.add_done_callback(lambda _t: self._kick.set())

    async def publish_topic(
        self, topic: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> tuple[bool, int, dict[str, str], uuid.UUID | None]:
        """CreateTopics: write `/brokers/topics/T` (with `/config/topics/T` when `configs`, and a new topic id)
        before answering, as Kafka does; (created here, partition count in ZooKeeper, the topic's stored configs,
        its id in ZooKeeper). ZooKeeperError when ZooKeeper cannot be reached, MalformedZnode when the existing
        topic's configs do not parse."""
        created, count, topic_id = await asyncio.to_thread(
            self._publish_topic_or_raise, topic, partitions, configs
        )
        stored = dict(configs or {}) if created else await asyncio.to_thread(self._topic_configs, topic)
        self._kick.set()
        return created, count, stored, topic_id

    def _topic_configs(self, topic: str) -> dict[str, str]:
        client = self.node.client
        assert client is not None
        return read_topic_configs(client, topic)

    def _publish_topic_or_raise(
        self,
        topic: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> tuple[bool, int, uuid.UUID | None]:
        """(created, partition count, topic id) of the topic in ZooKeeper; created with `topic_id` (the id of
        logs this node already has), else a new one."""
        live = [n for n, _h, _p in self.node.brokers()] or [self.config.node_id]
        created, assignment = create_topic_if_absent(
            self.node.client, topic, single_replica_assignment(partitions, live), configs, topic_id
        )
        if created:
            log.info("node=%d published topic %s (%d partitions, id %s)", self.config.node_id, topic, partitions,
                     assignment.topic_id)  # fmt: skip
        return created, len(assignment.partitions), assignment.topic_id

    def _publish_topic(self, topic: str, partitions: int, topic_id: uuid.UUID | None = None) -> None:
        if topic == OFFSETS_TOPIC or self.node.client is None:
            return
        try:
            self._publish_topic_or_raise(topic, partitions, None, topic_id)
        except (ZooKeeperError, MalformedZnode) as exc:
            log.warning("node=%d could not publish topic %s: %r", self.config.node_id, topic, exc)

    def _read_topics(self) -> tuple[TopicLeaders, dict[str, uuid.UUID]]:
        """Every topic's partitions (leader, replicas) and the ids of those whose znode has one."""
        client = self.node.client
        assert client is not None, "topics are read only once the node has started"
        out: TopicLeaders = {}
        ids: dict[str, uuid.UUID] = {}
        for topic in sorted(client.get_children(paths.BROKER_TOPICS)):
            if topic == OFFSETS_TOPIC:
                continue
            try:
                assignment, states = read_topic_states(client, topic)
            except MalformedZnode as exc:
                log.warning("node=%d ignoring topic %s: %s", self.config.node_id, topic, exc)
                continue
            if assignment is None:
                continue
            out[topic] = {
                p: (states[p][0].leader if p in states else NO_LEADER, tuple(replicas))
                for p, replicas in assignment.partitions
            }
            if assignment.topic_id is not None:
                ids[topic] = assignment.topic_id
        return out, ids

    async def refresh(self) -> None:
        try:
            marks = await asyncio.to_thread(read_deletion_marks, self.node.client)
            topics, ids = await asyncio.to_thread(self._read_topics)
        except (ZooKeeperError, MalformedZnode) as exc:
            log.warning("node=%d topic refresh failed: %r", self.config.node_id, exc)
            return
        self._acked &= set(marks)  # a finished deletion: the name may be created and deleted again
        for name in marks:
            if name != OFFSETS_TOPIC and LEGAL_TOPIC.match(name):
                await self._delete_marked(name)
        for name, parts in topics.items():
            if name in marks:
                continue
            topic_id = ids.get(name)
            known = self._logs.topic_ids.get(name)
            if topic_id is not None and known is not None and known != topic_id:
                # Logs of an earlier topic of this name (deleted and re-created while this node was away):
                # Kafka refuses them (InconsistentTopicIdException); here they are kept aside, never served.
                self._set_aside(name, f"their topic id {known} is not the topic's id {topic_id} in ZooKeeper")
            if len(self._logs.topics.get(name, ())) < len(parts):
                try:
                    configs = None
                    if name not in self._logs.topics:
                        configs = await asyncio.to_thread(self._configs_or_none, name)
                    self._logs.ensure_partitions(name, len(parts), configs)
                except Exception:
                    log.exception("node=%d cannot create local logs for %s", self.config.node_id, name)
            if topic_id is not None and name in self._logs.topics and known != topic_id:
                try:
                    self._logs.set_topic_id(name, topic_id)
                except (ValueError, OSError) as exc:  # an unreadable stored id: left for the operator
                    _say.log(logging.ERROR, "topic-id", "node=%d topic %s: cannot store id %s (%s)",
                             self.config.node_id, name, topic_id, exc)  # fmt: skip
            self._logs.note_cluster_topic(name)
        for name in sorted(set(self.topics) - set(topics) - set(marks) - self._acked):
            # Gone from ZooKeeper without this node seeing its deletion mark (its session was away): its logs
            # must not come back in a topic re-created under the name.
            if name in self._logs.topics and not await asyncio.to_thread(self._topic_exists, name):
                self._set_aside(name, "deleted without this node's acknowledgement")
        self.topics = {n: parts for n, parts in topics.items() if n not in marks}
        self._refreshed.set()
        self._refreshed = asyncio.Event()

    def _set_aside(self, topic: str, why: str) -> None:
        moved = self._logs.set_aside(topic)
        log.warning(
            "node=%d local logs of topic %s are not served: the topic was learned from ZooKeeper and is no longer "
            "there (%s); kept as %s until an operator removes them",
            self.config.node_id,
            topic,
            why,
            ", ".join(str(p) for p in moved) or "nothing",
        )

    def _configs_or_none(self, topic: str) -> dict[str, str] | None:
        """A new topic's `/config/topics/T`; one that does not parse (or asks for what this node cannot do)
        gives the topic no retention rather than a default that might delete what it meant to keep."""
        try:
            configs = self._topic_configs(topic)
            self._logs.defaults.with_overrides(configs)
            return configs
        except (MalformedZnode, InvalidConfig) as exc:
            log.error("node=%d topic %s: %s; retention is off for it", self.config.node_id, topic, exc)
            return {"retention.ms": "-1", "retention.bytes": "-1"}

    async def _delete_marked(self, topic: str) -> None:
        """A topic marked for deletion: this node's group offsets of its partitions, then its partition logs,
        then the acknowledgement the controller waits for (Kafka's StopReplica(delete) and
        handleDeletedPartitions on every broker). Retried on the next refresh until acknowledged."""
        if topic in self._acked:
            return
        count = max(len(self._logs.topics.get(topic, ())), len(self.topics.get(topic, {})))
        try:
            await self.partitions_deleted([(topic, p) for p in range(count)])
            self._logs.delete_topic(topic)
            await asyncio.to_thread(ack_topic_deletion, self.node.client, topic, self.config.node_id)
        except Exception as exc:
            if self._deletion_errors.get(topic) != repr(exc):  # once per distinct error, not every refresh
                log.warning("node=%d deleting topic %s: %r; retrying", self.config.node_id, topic, exc)
            self._deletion_errors[topic] = repr(exc)
            return
        self._deletion_errors.pop(topic, None)
        self._acked.add(topic)
        log.info("node=%d deleted its logs and group offsets of topic %s", self.config.node_id, topic)

    async def partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Every offsets partition this node serves drops its groups' offsets of `partitions`; the groups of
        partitions served elsewhere are their node's to clean (each node does it when it sees the mark)."""
        for _partition, service in sorted(self.services.items()):
            await service.partitions_deleted(partitions)

    async def delete_topic(self, topic: str, timeout_ms: int) -> bool:
        # The topic this request deletes is the znode there now (its creation zxid): a topic of the same name
        # created again right after (a producer's metadata refresh auto-creating it, as Kafka allows) is another
        # topic, and must not keep this deletion "in progress" until the timeout.
        created = await asyncio.to_thread(self._topic_created_zxid, topic)
        await asyncio.to_thread(request_topic_deletion, self.node.client, topic)
        self._acked.discard(topic)
        self._kick.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        while True:
            refreshed = self._refreshed
            now = await asyncio.to_thread(self._topic_created_zxid, topic)
            gone = now is None or now != created
            if gone or loop.time() >= deadline:
                return gone
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(refreshed.wait(), deadline - loop.time())

    def _topic_exists(self, topic: str) -> bool:
        return self._topic_created_zxid(topic) is not None

    def _topic_created_zxid(self, topic: str) -> int | None:
        """The creation zxid of `/brokers/topics/T` (which topic of that name it is), None without one."""
        client = self.node.client
        assert client is not None
        stat = client.exists(paths.topic_path(topic))
        return None if stat is None else int(stat.czxid)

    async def _refresh_loop(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), REFRESH_INTERVAL_S)
            self._kick.clear()
            await self.refresh()
            await self._restart_failed_services()

    async def _restart_failed_services(self) -> None:
        """A service whose append failed for a ZooKeeper reason (a connection loss during a leader election)
        stopped serving (fail-stop); while this node still leads the partition, reload it from its store, as
        a new leader would. A fenced store (leadership moved) is left to the resign that follows."""
        for partition, service in sorted(self.services.items()):
            failed = service.failed
            if failed is None or isinstance(failed, StoreFenced) or self._closing:
                continue
            log.warning("node=%d offsets partition %d: reloading after a failed append (%r)",
                        self.config.node_id, partition, failed)  # fmt: skip
            try:
                await self._start_service(partition, cast(ZkRecordStore, service.store))
            except (
                Exception
            ) as exc:  # retried every refresh (0.5 s): a malformed batch must not flood the log
                _say.log(logging.ERROR, "offsets-reload", "node=%d offsets partition %d: reload failed (%s: %s); retrying",
                         self.config.node_id, partition, type(exc).__name__, exc)  # fmt: skip

    def leader(self, topic: str, partition: int) -> int:
        return self.topics.get(topic, {}).get(partition, (NO_LEADER, ()))[0]

    def leads(self, topic: str, partition: int) -> bool:
        return self.leader(topic, partition) == self.config.node_id

    def partition_meta(self, topic: str, count: int) -> list[tuple[int, int, tuple[int, ...], int]]:
        """(partition, leader, replicas, error) for Metadata; LEADER_NOT_AVAILABLE until the controller acts."""
        parts = self.topics.get(topic, {})
        out: list[tuple[int, int, tuple[int, ...], int]] = []
        for p in range(max(count, len(parts))):  # ZooKeeper's count wins while local logs catch up
            leader, replicas = parts.get(p, (NO_LEADER, ()))
            alive = leader != NO_LEADER and any(n == leader for n, _h, _p in self.node.brokers())
            error = ErrorCode.NONE if alive else ErrorCode.LEADER_NOT_AVAILABLE
            out.append((p, leader if alive else -1, replicas or (-1,), error))
        return out

    def offsets_partition_count(self) -> int:
        return self.node.offsets_partition_count()

    def offsets_log(self, partition: int) -> OffsetsTopicLog | None:
        """The readable `__consumer_offsets` partition, when this node leads it and has loaded it."""
        if self.node.group_status_of_partition(partition) != ErrorCode.NONE:
            return None
        return self.offsets_logs.get(partition)

    def offsets_topic_meta(self) -> TopicMeta:
        """`__consumer_offsets` as Kafka lists it: internal, every offsets partition with its leader (replicas
        and ISR = the leader: the records live in ZooKeeper, not on a replica's disk)."""
        count = self.node.offsets_partition_count()
        leaders = self.node.offsets_leaders()
        live = {n for n, _h, _p in self.node.brokers()}
        parts = []
        for p in range(count):
            lead = leaders.get(p)
            leader = lead.leader if lead is not None and lead.leader in live else -1
            error = ErrorCode.NONE if leader != -1 else ErrorCode.LEADER_NOT_AVAILABLE
            parts.append(PartitionMeta(p, leader, (leader,), error))
        return TopicMeta(OFFSETS_TOPIC, ErrorCode.NONE, tuple(parts), internal=True)

    def brokers(self) -> list[tuple[int, str, int]]:
        return self.node.brokers()

    def cluster_id(self) -> str:
        return self._cluster_id

    def controller_id(self) -> int:
        info = None
        with contextlib.suppress(ZooKeeperError, MalformedZnode):
            info = registry.read_controller(self.node.client)
        return info.brokerid if info is not None else -1

    def find_coordinator(self, group_id: str) -> Coordinator:
        answer = self.node.find_coordinator(group_id)
        message = None if answer.error == ErrorCode.NONE else answer.error.name
        return Coordinator(group_id, answer.error, message, answer.node_id, answer.host, answer.port)

    # -- group APIs ----------------------------------------------------------------------------------------

    async def _route(
        self, req: GroupRequest, group_id: str, call: Callable[[GroupService], Awaitable[_Resp]]
    ) -> _Resp:
        status = self.node.group_status(group_id)
        service = self.services.get(self.node.partition_for(group_id))
        if status == ErrorCode.NONE and service is None:
            status = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if status != ErrorCode.NONE or service is None:
            # error_response answers each request type with its own response type
            return cast(_Resp, h.error_response(req, status))
        return await call(service)

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        return await self._route(req, req.group_id, lambda s: s.join_group(req))

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        return await self._route(req, req.group_id, lambda s: s.sync_group(req))

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        return await self._route(req, req.group_id, lambda s: s.heartbeat(req))

    def heartbeat_now(self, req: HeartbeatRequest) -> HeartbeatResponse | Awaitable[HeartbeatResponse]:
        status = self.node.group_status(req.group_id)
        service = self.services.get(self.node.partition_for(req.group_id))
        if status == ErrorCode.NONE and service is None:
            status = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if status != ErrorCode.NONE or service is None:
            return cast(HeartbeatResponse, h.error_response(req, status))
        return service.heartbeat_now(req)

    async def leave_group(self, req: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self._route(req, req.group_id, lambda s: s.leave_group(req))

    async def offset_commit(self, req: OffsetCommitRequest) -> OffsetCommitResponse:
        return await self._route(req, req.group_id, lambda s: s.offset_commit(req))

    async def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        return await self._route(req, req.group_id, lambda s: s.offset_fetch(req))

    async def _describe_one(self, req: DescribeGroupsRequest, group_id: str) -> DescribeGroupsResponse:
        one = replace(req, groups=(group_id,))
        return await self._route(one, group_id, lambda s: s.describe_groups(one))

    async def _delete_one(self, req: DeleteGroupsRequest, group_id: str) -> DeleteGroupsResponse:
        one = replace(req, groups_names=(group_id,))
        return await self._route(one, group_id, lambda s: s.delete_groups(one))

    async def describe_groups(self, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        parts = await asyncio.gather(*(self._describe_one(req, g) for g in req.groups))
        return DescribeGroupsResponse(tuple(g for r in parts for g in r.groups))

    async def delete_groups(self, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        parts = await asyncio.gather(*(self._delete_one(req, g) for g in req.groups_names))
        return DeleteGroupsResponse(tuple(r for p in parts for r in p.results))

    def _consumer_group_service(self, group_id: str) -> GroupService | ConsumerGroupHeartbeatResponse:
        """The service coordinating `group_id` here, or the heartbeat's answer when there is none to ask."""
        status = self.node.group_status(group_id)
        service = self.services.get(self.node.partition_for(group_id))
        if status == ErrorCode.NONE and service is None:
            status = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if status != ErrorCode.NONE or service is None:
            return ConsumerGroupHeartbeatResponse(int(status))
        return service

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        service = self._consumer_group_service(req.group_id)
        if isinstance(service, ConsumerGroupHeartbeatResponse):
            return service
        return await service.consumer_group_heartbeat(req, describable)

    def consumer_group_heartbeat_now(
        self, req: ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> ConsumerGroupHeartbeatResponse | Awaitable[ConsumerGroupHeartbeatResponse]:
        service = self._consumer_group_service(req.group_id)
        if isinstance(service, ConsumerGroupHeartbeatResponse):
            return service
        return service.consumer_group_heartbeat_now(req, describable)

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        async def one(group_id: str) -> ConsumerGroupDescribeResponse:
            status = self.node.group_status(group_id)
            service = self.services.get(self.node.partition_for(group_id))
            if status == ErrorCode.NONE and service is None:
                status = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            if status != ErrorCode.NONE or service is None:
                return ConsumerGroupDescribeResponse((DescribedConsumerGroup(int(status), group_id),))
            return await service.consumer_group_describe(replace(req, group_ids=(group_id,)))

        parts = await asyncio.gather(*(one(g) for g in req.group_ids))
        return ConsumerGroupDescribeResponse(tuple(g for p in parts for g in p.groups))

    async def list_groups(self, req: ListGroupsRequest) -> ListGroupsResponse:
        services = [self.services[p] for p in sorted(self.services)]
        parts = await asyncio.gather(*(s.list_groups(req) for s in services))
        error = next((p.error_code for p in parts if p.error_code), 0)
        groups = sorted((g for p in parts for g in p.groups), key=lambda g: g.group_id)
        return ListGroupsResponse(error, tuple(groups))
