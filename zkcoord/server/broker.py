"""Request handlers of the wire server: data plane (Metadata, Produce, Fetch, ...) here, groups via GroupService.

A partition whose log is damaged on disk (`zkcoord.server.log.CorruptLog`) answers KAFKA_STORAGE_ERROR to
Produce, ListOffsets and Fetch; every other partition keeps serving.

`Broker.dispatch(req)` returns the encoded response frame, None (Produce acks=0), or an awaitable of either
(Fetch waiting for data, group calls parked by the coordinator). The wire layer keeps responses in request order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from zkcoord.errors import ConfigError
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import GroupRequest, GroupResponse, OffsetCommitRequest, OffsetFetchRequest
from zkcoord.records.batch import AppendRules, CorruptBatch, validate_for_append
from zkcoord.security.acl import CLUSTER, Operation, Resource, ResourceType, all_operations
from zkcoord.server import kafka_protocol as kp
from zkcoord.server import messages as dm
from zkcoord.server import old_formats
from zkcoord.server.authorization import RequestAuthorizer, authorized_group_call
from zkcoord.server.groups import GroupDispatch
from zkcoord.server.limits import ConnectionLimits, LogLimits
from zkcoord.server.log import (
    INT64_MAX,
    LEGAL_TOPIC,
    InvalidConfig,
    InvalidTopic,
    LogManager,
    OffsetsTopicLog,
    PartitionLog,
    TopicConfig,
)
from zkcoord.server.seams import ClusterSide, GroupCoordinator, OffsetsV0
from zkcoord.server.topic_ids import new_topic_id
from zkcoord.storage.file_store import FSYNC_POLICIES

log = logging.getLogger(__name__)

Response = bytes | None

# Short names for the per-partition results the handlers build by the dozen.
Created = dm.CreatableTopicResult
Produced = dm.ProducePartitionResult
Listed = dm.ListOffsetsPartitionResult
Fetched = dm.FetchPartitionResult

# The group coordinator's internal topic (Kafka's Topic.GROUP_METADATA_TOPIC_NAME). In cluster mode it is served
# read-only from the coordinator's ZooKeeper record stores; clients may never produce to it.
OFFSETS_TOPIC = "__consumer_offsets"

_V0_OFFSET_APIS = frozenset({kp.OFFSET_COMMIT, kp.OFFSET_FETCH})


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Wire-server settings, with Kafka's names where Kafka has one."""

    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    data_dir: Path = Path("zkcoord-data")
    num_partitions: int = 1  # num.partitions: for auto-created topics
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 100 * 1024 * 1024
    cluster_id: str = "zkcoord"  # a single node's: Node.start reads (or creates) DATA_DIR/meta.properties
    fetch_max_wait_cap_ms: int = 1000  # bound on a Fetch's wait for new data, whatever the client asks
    log_segment_bytes: int = 64 * 1024 * 1024
    # message.max.bytes and the timestamp bounds a produced batch obeys
    append_rules: AppendRules = field(default_factory=AppendRules)
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    log_limits: LogLimits = field(default_factory=LogLimits)
    # A standalone node's group-records log: when an acknowledged commit reaches the disk (FileRecordStore's
    # policies: "always" fsyncs before any answer, "interval" at most every interval, "never" leaves it to the OS)
    group_records_fsync: str = "always"
    group_records_fsync_interval_ms: int = 1000
    # ... and its compaction (FileRecordStore): after this many bytes written since the last one (0: never), and
    # how long a tombstone is kept (Kafka's log.cleaner.delete.retention.ms)
    group_records_compact_min_bytes: int = 4 * 1024 * 1024
    group_records_delete_retention_ms: int = 86_400_000
    delete_topic_enable: bool = True  # delete.topic.enable (Kafka's default since 1.0)
    # Partition log retention and flushing, Kafka's broker-level names (topic-level overrides: TopicConfig)
    log_retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms (Kafka: log.retention.hours=168)
    log_retention_bytes: int = -1  # log.retention.bytes
    log_retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    log_flush_interval_messages: int = INT64_MAX  # log.flush.interval.messages
    log_flush_interval_ms: int = INT64_MAX  # log.flush.interval.ms

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be 0..65535, got {self.port}")
        if self.node_id < 0:
            raise ConfigError(f"node.id must be >= 0, got {self.node_id}")
        if self.num_partitions < 1:
            raise ConfigError(f"num.partitions must be >= 1, got {self.num_partitions}")
        if self.socket_request_max_bytes < 1024:
            raise ConfigError(
                f"socket.request.max.bytes must be >= 1024, got {self.socket_request_max_bytes}"
            )
        if self.log_segment_bytes < 1024:
            raise ConfigError(f"log.segment.bytes must be >= 1024, got {self.log_segment_bytes}")
        if self.log_retention_check_interval_ms < 1:
            raise ConfigError(
                f"log.retention.check.interval.ms must be >= 1, got {self.log_retention_check_interval_ms}"
            )
        try:
            self.topic_defaults  # noqa: B018  (validates the log.* settings)
        except InvalidConfig as exc:
            raise ConfigError(f"log.* settings: {exc}") from exc
        if self.group_records_fsync not in FSYNC_POLICIES:
            raise ConfigError(
                f"group.records.fsync must be one of {', '.join(FSYNC_POLICIES)}, got {self.group_records_fsync!r}"
            )
        if self.group_records_compact_min_bytes < 0:
            raise ConfigError(
                f"group.records.compact.min.bytes must be >= 0, got {self.group_records_compact_min_bytes}"
            )
        if self.group_records_delete_retention_ms < 0:
            raise ConfigError(
                f"log.cleaner.delete.retention.ms must be >= 0, got {self.group_records_delete_retention_ms}"
            )
        if self.group_records_fsync_interval_ms < 1:
            raise ConfigError(
                f"group.records.fsync.interval.ms must be >= 1, got {self.group_records_fsync_interval_ms}"
            )

    @property
    def topic_defaults(self) -> TopicConfig:
        """Every topic's log settings unless it overrides them (Kafka's topic-level names)."""
        return TopicConfig(
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            segment_bytes=self.log_segment_bytes,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
        )


class ProducerIds:
    """Hands out producer ids, persisted so a restarted server never reuses one."""

    BLOCK = 1000

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.next_id = int(path.read_text().strip() or 0)
        except FileNotFoundError:
            self.next_id = 0
        self.reserved = self.next_id

    def allocate(self) -> int:
        if self.next_id >= self.reserved:
            self.reserved = self.next_id + self.BLOCK
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(str(self.reserved))
            os.replace(tmp, self.path)
        pid = self.next_id
        self.next_id += 1
        return pid


class NewData:
    """Wakes every Fetch waiting for data. `notify()` runs on the loop thread; shared by the broker (Produce)
    and, in cluster mode, the cluster routing (an offsets partition's store grew)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    def current(self) -> asyncio.Event:
        """The event the next `notify()` sets; take it before waiting so no notify in between is missed."""
        return self._event


class Broker:
    """One node's request handlers, given their collaborators at construction: `groups` (None: the group APIs
    answer COORDINATOR_NOT_AVAILABLE) and, on a cluster node, `cluster` (None: this node leads everything)."""

    def __init__(
        self,
        config: ServerConfig,
        logs: LogManager,
        groups: GroupCoordinator | None = None,
        cluster: ClusterSide | None = None,
        new_data: NewData | None = None,
        observe_group: Callable[[int, GroupResponse], None] | None = None,
        zk_offsets_v0: OffsetsV0 | None = None,
        producer_ids: ProducerIds | None = None,  # shared by the broker views of one node's listeners
        authorizer: RequestAuthorizer | None = None,  # None: every principal may do everything
    ) -> None:
        self.config = config
        self.logs = logs
        self.groups = groups
        self.cluster = cluster
        self.new_data = new_data if new_data is not None else NewData()
        self.producer_ids = producer_ids or ProducerIds(config.data_dir / "producer_ids")
        self.authorizer = authorizer
        self._group_dispatch = (
            GroupDispatch(groups, observe_group, authorizer, self._partition_count)
            if groups is not None
            else None
        )
        self.zk_offsets_v0 = zk_offsets_v0  # cluster mode: OffsetCommit/OffsetFetch v0 go to ZooKeeper
        self._handlers = {
            kp.API_VERSIONS: self.api_versions,
            kp.METADATA: self.metadata,
            kp.FIND_COORDINATOR: self.find_coordinator,
            kp.CREATE_TOPICS: self.create_topics,
            kp.DELETE_TOPICS: self.delete_topics,
            kp.PRODUCE: self.produce,
            kp.LIST_OFFSETS: self.list_offsets,
            kp.FETCH: self.fetch,
            kp.INIT_PRODUCER_ID: self.init_producer_id,
        }

    @property
    def brokers(self) -> list[dm.BrokerEndpoint]:
        if self.cluster is not None:
            return [dm.BrokerEndpoint(n, h, p) for n, h, p in self.cluster.brokers()]
        return [dm.BrokerEndpoint(self.config.node_id, self.config.host, self.config.port)]

    def dispatch(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        handler = self._handlers.get(req.api_key)
        if handler is not None:
            return handler(req)
        if self.zk_offsets_v0 is not None and req.api_version == 0 and req.api_key in _V0_OFFSET_APIS:
            return self._offsets_v0(req, self.zk_offsets_v0)
        if self._group_dispatch is not None:
            return self._group_dispatch.dispatch(req)
        return kp.error_response(req, E.COORDINATOR_NOT_AVAILABLE)

    async def _offsets_v0(self, req: kp.RequestFrame, store: OffsetsV0) -> Response:
        """Kafka 0.8.2-2.x: version 0 reads and writes `/consumers/G/offsets/T/P`, never the coordinator; the
        authorizer judges it as it judges every other version (Read on the group and topics to commit...)."""

        async def call(r: GroupRequest) -> GroupResponse:
            if isinstance(r, OffsetCommitRequest):
                return await store.offset_commit(r)
            assert isinstance(r, OffsetFetchRequest)
            return await store.offset_fetch(r)

        r = kp.group_requests(req)[0]
        if self.authorizer is not None:
            return kp.group_response(req, [await authorized_group_call(self.authorizer, req, r, call)])
        return kp.group_response(req, [await call(r)])

    def _denied(self, req: kp.RequestFrame, operation: Operation, topics: Iterable[str]) -> frozenset[str]:
        """The topics of `req` its principal may not `operation` (zkcoord.server.authorization)."""
        if self.authorizer is None:
            return frozenset()
        return self.authorizer.denied_topics(req, operation, topics)

    def _cluster_id(self) -> str:
        """Metadata's cluster id: `/cluster/id` on a cluster node, `meta.properties` on a single one."""
        return self.cluster.cluster_id() if self.cluster is not None else self.config.cluster_id

    def _leads(self, topic: str, partition: int) -> bool:
        return self.cluster is None or self.cluster.leads(topic, partition)

    def notify_new_data(self) -> None:
        """Wake every Fetch waiting for data (on the loop thread)."""
        self.new_data.notify()

    def _partition_count(self, topic: str) -> int | None:
        """How many partitions `topic` has here (None: no such topic), as Metadata answers it: `__consumer_offsets`
        on a cluster node only, any other topic once this node has its logs (a cluster node creates them for every
        topic it learns from ZooKeeper, within a refresh)."""
        if topic == OFFSETS_TOPIC:
            return self.cluster.offsets_partition_count() if self.cluster is not None else None
        logs = self.logs.topics.get(topic)
        return len(logs) if logs is not None else None

    def _readable(self, topic: str, partition: int) -> tuple[PartitionLog | OffsetsTopicLog | None, E]:
        """The log a ListOffsets/Fetch reads, or None and the error: UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER (led elsewhere, or an offsets partition still loading here)."""
        if topic == OFFSETS_TOPIC:
            if self.cluster is None or not 0 <= partition < self.cluster.offsets_partition_count():
                return None, E.UNKNOWN_TOPIC_OR_PARTITION
            view = self.cluster.offsets_log(partition)
            return (view, E.NONE) if view is not None else (None, E.NOT_LEADER_OR_FOLLOWER)
        plog = self.logs.get(topic, partition)
        if plog is None:
            return None, E.UNKNOWN_TOPIC_OR_PARTITION
        if not self._leads(topic, partition):
            return None, E.NOT_LEADER_OR_FOLLOWER
        if plog.open_error() is not None:  # damaged on disk: Kafka's answer for an offline log directory
            return None, E.KAFKA_STORAGE_ERROR
        return plog, E.NONE

    # -- topics ---------------------------------------------------------------------------------------------

    def _create(self, name: str, partitions: int) -> list[PartitionLog]:
        """A local topic; only a single node creates one here (a cluster node publishes to ZooKeeper first)."""
        return self.logs.create_topic(name, partitions, topic_id=new_topic_id())

    def _topic_meta(self, name: str, logs: list[PartitionLog]) -> dm.TopicMeta:
        node = self.config.node_id
        if self.cluster is not None:
            meta = self.cluster.partition_meta(name, len(logs))
            parts = tuple(dm.PartitionMeta(p, ld, r, e) for p, ld, r, e in meta)
        else:
            parts = tuple(dm.PartitionMeta(p.partition, node, (node,)) for p in logs)
        return dm.TopicMeta(name, E.NONE, parts, topic_id=self.logs.topic_ids.get(name))

    # -- handlers -------------------------------------------------------------------------------------------

    def api_versions(self, req: kp.RequestFrame) -> Response:
        if not kp.valid_client_software(req):
            log.info(
                "ApiVersions v%d from %s: invalid client software name/version",
                req.api_version,
                req.client_id,
            )
            return kp.api_versions_response(req, E.INVALID_REQUEST)
        return kp.api_versions_response(req)

    def metadata(self, req: kp.RequestFrame) -> Response:
        r = kp.metadata_request(req)
        allow_auto = self.config.auto_create_topics_enable and r.allow_auto_topic_creation
        topics: list[dm.TopicMeta] = []
        if r.topics is None:
            for name in sorted(self.logs.topics):
                if name != OFFSETS_TOPIC:
                    topics.append(self._topic_meta(name, self.logs.topics[name]))
            if self.cluster is not None:
                topics.append(self.cluster.offsets_topic_meta())
                topics.sort(key=lambda t: t.name)
        else:
            for name in r.topics:
                if self.authorizer is not None and not self.authorizer.topic(req, Operation.DESCRIBE, name):
                    topics.append(dm.TopicMeta(name, E.TOPIC_AUTHORIZATION_FAILED, ()))
                    continue
                if name == OFFSETS_TOPIC:
                    # Never a data topic: the controller creates it (cluster); a single node does not serve it.
                    if self.cluster is not None:
                        topics.append(self.cluster.offsets_topic_meta())
                    else:
                        topics.append(dm.TopicMeta(name, E.UNKNOWN_TOPIC_OR_PARTITION, (), internal=True))
                    continue
                logs = self.logs.topics.get(name)
                if logs is None:
                    # Kafka decides Create (for auto-creation) before it looks at the name: an illegal name the
                    # principal may not create is TOPIC_AUTHORIZATION_FAILED, not INVALID_TOPIC_EXCEPTION.
                    if (
                        allow_auto
                        and self.authorizer is not None
                        and not self.authorizer.may_create_topic(req, name)
                    ):
                        topics.append(dm.TopicMeta(name, E.TOPIC_AUTHORIZATION_FAILED, ()))
                        continue
                    if not LEGAL_TOPIC.match(name):
                        topics.append(dm.TopicMeta(name, E.INVALID_TOPIC_EXCEPTION, ()))
                        continue
                    if not allow_auto:
                        topics.append(dm.TopicMeta(name, E.UNKNOWN_TOPIC_OR_PARTITION, ()))
                        continue
                    if self.cluster is not None:
                        # As a Kafka broker whose metadata cache lacks the topic: publish it to ZooKeeper
                        # (unless another node did) and answer LEADER_NOT_AVAILABLE; local logs follow
                        # ZooKeeper's partition count on the next refresh, so nodes never disagree on it.
                        self.cluster.topic_created(name, self.config.num_partitions)
                        topics.append(dm.TopicMeta(name, E.LEADER_NOT_AVAILABLE, ()))
                        continue
                    try:
                        logs = self._create(name, self.config.num_partitions)
                    except InvalidTopic as exc:  # a partition limit: the topic's error, as for CreateTopics
                        topics.append(dm.TopicMeta(name, exc.code, ()))
                        continue
                topics.append(self._topic_meta(name, logs))
        topics += self._topics_by_id(req, r.topic_ids)
        if r.topics is None and self.authorizer is not None:  # Kafka lists only the topics one may describe
            hidden = self.authorizer.denied_topics(req, Operation.DESCRIBE, (t.name for t in topics))
            topics = [t for t in topics if t.name not in hidden]
        cluster_ops = dm.NO_OPERATIONS_FIELD
        if r.include_cluster_authorized_operations:
            cluster_ops = self._operations(req, CLUSTER) if self._may_describe_cluster(req) else 0
        if r.include_topic_authorized_operations:  # refused topics keep the field's default, as in Kafka
            topics = [
                t
                if t.error_code == E.TOPIC_AUTHORIZATION_FAILED
                else replace(t, authorized_operations=self._operations(req, Resource(ResourceType.TOPIC, t.name)))
                for t in topics
            ]  # fmt: skip
        controller = self.cluster.controller_id() if self.cluster is not None else self.config.node_id
        resp = dm.MetadataResponse(
            tuple(self.brokers), self._cluster_id(), controller, tuple(topics), cluster_ops
        )
        return kp.metadata_response(req, resp)

    def _topics_by_id(self, req: kp.RequestFrame, ids: Iterable[uuid.UUID]) -> list[dm.TopicMeta]:
        """Metadata v10+ topics asked by id (KIP-516): the topic, or UNKNOWN_TOPIC_ID; never auto-created."""
        out: list[dm.TopicMeta] = []
        for tid in ids:
            name = self.logs.topic_by_id(tid)
            if name is None or name == OFFSETS_TOPIC:
                out.append(dm.TopicMeta("", E.UNKNOWN_TOPIC_ID, (), topic_id=tid))
            elif self.authorizer is not None and not self.authorizer.topic(req, Operation.DESCRIBE, name):
                out.append(dm.TopicMeta("", E.TOPIC_AUTHORIZATION_FAILED, (), topic_id=tid))
            else:
                out.append(self._topic_meta(name, self.logs.topics[name]))
        return out

    def _may_describe_cluster(self, req: kp.RequestFrame) -> bool:
        return self.authorizer is None or self.authorizer.cluster(req, Operation.DESCRIBE)

    def _operations(self, req: kp.RequestFrame, resource: Resource) -> int:
        """KIP-430's bit field; without an authorizer, every operation of the type (as Kafka)."""
        if self.authorizer is None:
            return all_operations(resource.type)
        return self.authorizer.operations(req, resource)

    def find_coordinator(self, req: kp.RequestFrame) -> Response:
        r = kp.find_coordinator_request(req)
        c = self.config
        results: list[dm.Coordinator] = []
        for key in r.keys:
            if (
                r.key_type == 0
                and self.authorizer
                and not self.authorizer.group(req, Operation.DESCRIBE, key)
            ):
                results.append(dm.Coordinator(key, E.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1))
            elif (
                r.key_type == 1
                and self.authorizer
                and not self.authorizer.transactional_id(req, Operation.DESCRIBE, key)
            ):
                refused = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                results.append(dm.Coordinator(key, refused, None, -1, "", -1))
            elif r.key_type == 0 and self.cluster is not None:
                results.append(self.cluster.find_coordinator(key))
            elif r.key_type == 0 and self.groups is not None:
                results.append(dm.Coordinator(key, E.NONE, None, c.node_id, c.host, c.port))
            else:
                what = "transactions are not supported" if r.key_type != 0 else "no group coordinator"
                results.append(dm.Coordinator(key, E.COORDINATOR_NOT_AVAILABLE, what, -1, "", -1))
        return kp.find_coordinator_response(req, dm.FindCoordinatorResponse(tuple(results)))

    def create_topics(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        r = kp.create_topics_request(req)
        results: list[dm.CreatableTopicResult] = []
        to_create: list[int] = []  # indexes into results of topics to create
        counts = Counter(t.name for t in r.topics)
        for t in r.topics:
            n = t.num_partitions
            if t.assignment_count:
                n = t.assignment_count
            elif n == -1:
                n = self.config.num_partitions
            exists = f"Topic '{t.name}' already exists."
            if counts[t.name] > 1:  # Kafka refuses every entry of a repeated name, before it authorizes
                results.append(
                    Created(t.name, E.INVALID_REQUEST, "Found multiple entries for this topic.", n)
                )
            elif self.authorizer is not None and not self.authorizer.may_create_topic(req, t.name or ""):
                results.append(Created(t.name, E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", n))
            elif t.name == OFFSETS_TOPIC:
                results.append(
                    Created(
                        t.name,
                        E.INVALID_TOPIC_EXCEPTION,
                        f"{OFFSETS_TOPIC} is the group coordinator's topic",
                        n,
                    )
                    if self.cluster is None
                    else Created(t.name, E.TOPIC_ALREADY_EXISTS, exists, n)
                )
            elif t.name in self.logs.topics:
                results.append(Created(t.name, E.TOPIC_ALREADY_EXISTS, exists, n))
            elif not LEGAL_TOPIC.match(t.name or ""):
                results.append(
                    Created(t.name, E.INVALID_TOPIC_EXCEPTION, f"illegal topic name {t.name!r}", n)
                )
            elif n < 1:
                results.append(
                    Created(t.name, E.INVALID_PARTITIONS, f"num_partitions must be >= 1, got {n}", n)
                )
            elif (refused := self.logs.partition_limit_error(t.name or "", n)) is not None:
                results.append(Created(t.name, E.INVALID_PARTITIONS, refused, n))
            elif t.replication_factor not in (-1, 1):
                why = f"replication factor {t.replication_factor} > 1 broker"
                results.append(Created(t.name, E.INVALID_REPLICATION_FACTOR, why, n))
            elif (bad_config := self._config_error(t.configs)) is not None:
                results.append(Created(t.name, E.INVALID_CONFIG, bad_config, n))
            else:
                if not r.validate_only:
                    to_create.append(len(results))
                # Kafka 2.x: a created topic's configs are shown only with DescribeConfigs on it
                hidden = self.authorizer is not None and not self.authorizer.topic(
                    req, Operation.DESCRIBE_CONFIGS, t.name or ""
                )
                config_error = E.TOPIC_AUTHORIZATION_FAILED if hidden else E.NONE
                results.append(Created(t.name, E.NONE, None, n, config_error))
        if self.cluster is not None and to_create:
            configs_by_name = {t.name: {k: v for k, v in t.configs if v is not None} for t in r.topics}
            return self._create_topics_in_cluster(req, self.cluster, results, to_create, configs_by_name)
        configs = {t.name: dict(t.configs) for t in r.topics}
        for i in to_create:
            name, n = results[i].name, results[i].num_partitions
            assert name is not None  # LEGAL_TOPIC matched it
            try:
                self.logs.create_topic(name, n, configs.get(name), topic_id=new_topic_id())
            except InvalidTopic as exc:
                results[i] = Created(name, exc.code, str(exc), n)
                continue
            results[i] = replace(results[i], topic_id=self.logs.topic_ids.get(name))
        return kp.create_topics_response(req, dm.CreateTopicsResponse(tuple(results)))

    def _config_error(self, configs: tuple[tuple[str, str | None], ...]) -> str | None:
        """Why a CreateTopics entry's configs are refused (INVALID_CONFIG), or None."""
        try:
            self.logs.defaults.with_overrides(dict(configs))
        except InvalidConfig as exc:
            return str(exc)
        return None

    async def _create_topics_in_cluster(
        self,
        req: kp.RequestFrame,
        cluster: ClusterSide,
        results: list[dm.CreatableTopicResult],
        to_create: list[int],
        configs_by_name: dict[str | None, dict[str, str]],
    ) -> Response:
        """Kafka writes `/config/topics/T` and `/brokers/topics/T` before answering CreateTopics; a topic another
        node published first is TOPIC_ALREADY_EXISTS, and the local logs follow ZooKeeper's partition count and
        configs."""
        for i in to_create:
            name, n = results[i].name, results[i].num_partitions
            assert name is not None  # LEGAL_TOPIC matched it
            try:
                created, count, stored, topic_id = await cluster.publish_topic(
                    name, n, configs_by_name.get(name)
                )
            except Exception as exc:
                log.warning("CreateTopics %s: cannot write the topic to ZooKeeper: %r", name, exc)
                why = f"cannot write the topic to ZooKeeper: {exc}"
                results[i] = Created(name, E.UNKNOWN_SERVER_ERROR, why, n)
                continue
            try:
                self.logs.ensure_partitions(name, count, stored)
                if topic_id is not None and name not in self.logs.topic_ids:
                    self.logs.set_topic_id(name, topic_id)  # served at once, not from the next refresh
            except (InvalidTopic, InvalidConfig) as exc:
                results[i] = Created(name, E.INVALID_TOPIC_EXCEPTION, str(exc), n)
                continue
            except ValueError as exc:  # an unreadable stored id: the refresh logs it; the topic is created
                log.warning("CreateTopics %s: local logs keep no id: %s", name, exc)
            if not created:
                results[i] = Created(name, E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", n)
            else:
                results[i] = replace(results[i], topic_id=topic_id)
        return kp.create_topics_response(req, dm.CreateTopicsResponse(tuple(results)))

    def delete_topics(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        """Kafka 2.x's KafkaApis.handleDeleteTopicsRequest: NOT_CONTROLLER off the controller; with
        delete.topic.enable=false INVALID_REQUEST (v0-2) or TOPIC_DELETION_DISABLED; per topic Delete on it
        (TOPIC_AUTHORIZATION_FAILED), then existence (UNKNOWN_TOPIC_OR_PARTITION). A deleted topic's group
        offsets go first, then its partition logs, so a crash between them leaves a topic to delete again, never
        old offsets pointing into a re-created topic."""
        r = kp.delete_topics_request(req)
        names = r.topic_names
        results: dict[str, tuple[int, str | None]] = {}
        if self.cluster is not None and self.cluster.controller_id() != self.config.node_id:
            results = {n: (E.NOT_CONTROLLER, "this node is not the controller") for n in names}
        elif not self.config.delete_topic_enable:
            error = E.INVALID_REQUEST if r.api_version < 3 else E.TOPIC_DELETION_DISABLED
            results = {n: (error, "topic deletion is disabled (delete.topic.enable=false)") for n in names}
        else:
            denied = self._denied(req, Operation.DELETE, names)
            for name in names:
                if name in denied:
                    results[name] = (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                elif name == OFFSETS_TOPIC and self.cluster is not None:
                    why = f"{OFFSETS_TOPIC} holds the group coordinator's records and cannot be deleted"
                    results[name] = (E.INVALID_TOPIC_EXCEPTION, why)
                elif name not in self.logs.topics or name == OFFSETS_TOPIC:
                    results[name] = (E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic.")
        to_delete = sorted(n for n in dict.fromkeys(names) if n not in results)
        if not to_delete:
            return self._deleted_response(req, names, results)
        return self._delete_topics(req, r, results, to_delete)

    def _deleted_response(
        self, req: kp.RequestFrame, names: Iterable[str], results: dict[str, tuple[int, str | None]]
    ) -> Response:
        topics = tuple(dm.DeletableTopicResult(n, *results.get(n, (E.NONE, None))) for n in names)
        return kp.delete_topics_response(req, dm.DeleteTopicsResponse(topics))

    async def _delete_topics(
        self,
        req: kp.RequestFrame,
        r: dm.DeleteTopicsRequest,
        results: dict[str, tuple[int, str | None]],
        to_delete: list[str],
    ) -> Response:
        for name in to_delete:
            try:
                if self.cluster is not None:
                    done = await self.cluster.delete_topic(name, r.timeout_ms)
                    if not done and r.timeout_ms > 0:
                        results[name] = (
                            E.REQUEST_TIMED_OUT,
                            f"deletion not complete after {r.timeout_ms} ms",
                        )
                    continue
                partitions = len(self.logs.topics.get(name, ()))
                if self.groups is not None:
                    await self.groups.partitions_deleted([(name, p) for p in range(partitions)])
                self.logs.delete_topic(name)
            except Exception as exc:
                log.warning("DeleteTopics %s: %r", name, exc)
                results[name] = (getattr(exc, "code", E.UNKNOWN_SERVER_ERROR), f"deletion failed: {exc}")
        self.notify_new_data()  # waiting Fetches of a deleted partition answer UNKNOWN_TOPIC_OR_PARTITION now
        return self._deleted_response(req, r.topic_names, results)

    def produce(self, req: kp.RequestFrame) -> Response:
        r = kp.produce_request(req)
        acks = r.acks
        out: list[dm.ProduceTopicResult] = []
        appended = False
        denied = self._denied(req, Operation.WRITE, (t.name for t in r.topics))
        for topic in r.topics:
            parts: list[dm.ProducePartitionResult] = []
            for pd in topic.partitions:
                if acks not in (0, 1, -1):
                    parts.append(Produced(pd.index, E.INVALID_REQUIRED_ACKS, -1, -1, f"acks={acks}"))
                    continue
                if topic.name in denied:
                    parts.append(Produced(pd.index, E.TOPIC_AUTHORIZATION_FAILED, -1, -1, None))
                    continue
                if topic.name == OFFSETS_TOPIC:  # Kafka: "Cannot append to internal topic"
                    msg = f"Cannot append to internal topic {OFFSETS_TOPIC}"
                    parts.append(Produced(pd.index, E.INVALID_TOPIC_EXCEPTION, -1, -1, msg))
                    continue
                plog = self.logs.get(topic.name, pd.index)
                if plog is None:
                    parts.append(Produced(pd.index, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, None))
                    continue
                if not self._leads(topic.name, pd.index):
                    parts.append(Produced(pd.index, E.NOT_LEADER_OR_FOLLOWER, -1, -1, None))
                    continue
                if plog.open_error() is not None:
                    why = "the partition's log is damaged on disk (the node's log names file and byte)"
                    parts.append(Produced(pd.index, E.KAFKA_STORAGE_ERROR, -1, -1, why))
                    continue
                records = pd.records
                if not records:
                    parts.append(
                        Produced(pd.index, E.CORRUPT_MESSAGE, -1, plog.log_start_offset, "no records")
                    )
                    continue
                mv = memoryview(records)
                now_ms = int(time.time() * 1000)
                try:
                    mv = old_formats.produce_to_batch(
                        r.api_version,
                        mv,
                        now_ms,
                        self.config.append_rules,
                        self.config.socket_request_max_bytes,
                    )
                    headers = validate_for_append(mv, now_ms, self.config.append_rules)
                except CorruptBatch as exc:
                    log.warning(
                        "produce %s-%d from %s: rejected: %s", topic.name, pd.index, req.client_id, exc
                    )
                    parts.append(Produced(pd.index, exc.code, -1, plog.log_start_offset, str(exc)))
                    continue
                error, dup_offset = int(E.NONE), None
                for h in headers:
                    error, dup_offset = plog.check_sequence(h)
                    if error != E.NONE or dup_offset is not None:
                        break
                if error != E.NONE:
                    parts.append(
                        Produced(pd.index, error, -1, plog.log_start_offset, "sequence check failed")
                    )
                    continue
                if dup_offset is not None:
                    parts.append(Produced(pd.index, E.NONE, dup_offset, plog.log_start_offset, None))
                    continue
                batches = [(h, mv[h.position : h.position + h.size]) for h in headers]
                base = plog.append(batches, now_ms)
                appended = True
                parts.append(Produced(pd.index, E.NONE, base, plog.log_start_offset, None))
            out.append(dm.ProduceTopicResult(topic.name, tuple(parts)))
        if appended:
            self.notify_new_data()
        if acks == 0:
            return None
        return kp.produce_response(req, dm.ProduceResponse(tuple(out)))

    def list_offsets(self, req: kp.RequestFrame) -> Response:
        r = kp.list_offsets_request(req)
        out: list[dm.ListOffsetsTopicResult] = []
        denied = self._denied(req, Operation.DESCRIBE, (t.name for t in r.topics))
        for topic in r.topics:
            parts: list[dm.ListOffsetsPartitionResult] = []
            for p in topic.partitions:
                index = p.partition_index
                if topic.name in denied:
                    parts.append(Listed(index, E.TOPIC_AUTHORIZATION_FAILED, -1, -1))
                    continue
                plog, error = self._readable(topic.name, index)
                if plog is None:
                    parts.append(Listed(index, error, -1, -1))
                    continue
                ts = p.timestamp
                if ts == -1:
                    parts.append(Listed(index, E.NONE, -1, plog.next_offset))
                elif ts == -2:
                    parts.append(Listed(index, E.NONE, -1, plog.log_start_offset))
                elif ts < 0:
                    # -3 (max timestamp, KIP-734) and other specials: the last offset is the honest answer we have
                    parts.append(Listed(index, E.NONE, -1, max(plog.next_offset - 1, -1)))
                else:
                    offset, found_ts = plog.offset_for_timestamp(ts)
                    parts.append(Listed(index, E.NONE, found_ts, offset))
            out.append(dm.ListOffsetsTopicResult(topic.name, tuple(parts)))
        return kp.list_offsets_response(req, dm.ListOffsetsResponse(tuple(out)))

    def _collect_fetch(
        self, r: dm.FetchRequest, denied: frozenset[str] = frozenset()
    ) -> tuple[int, dm.FetchResponse]:
        total = 0
        out: list[dm.FetchTopicResult] = []
        for topic in r.topics:
            parts: list[dm.FetchPartitionResult] = []
            for p in topic.partitions:
                plog, error = self._readable(topic.topic, p.partition)
                if topic.topic in denied:
                    plog, error = None, E.TOPIC_AUTHORIZATION_FAILED
                if plog is None:
                    parts.append(Fetched(p.partition, error, -1, -1, b""))
                    continue
                offset = p.fetch_offset
                if offset < plog.log_start_offset or offset > plog.next_offset:
                    parts.append(
                        Fetched(
                            p.partition, E.OFFSET_OUT_OF_RANGE, plog.next_offset, plog.log_start_offset, b""
                        )
                    )
                    continue
                limit = min(p.partition_max_bytes, max(r.max_bytes - total, 0))
                data = plog.read(offset, limit) if limit > 0 or total == 0 else b""
                if r.api_version < old_formats.FIRST_RECORD_BATCH_FETCH:
                    where, inflate = (
                        f"{topic.topic}-{p.partition}",
                        self.config.append_rules.max_decompressed_bytes,
                    )
                    data, error = old_formats.fetch_records(
                        r.api_version, where, data, offset, limit, inflate
                    )
                    if error != E.NONE:
                        parts.append(
                            Fetched(p.partition, error, plog.next_offset, plog.log_start_offset, b"")
                        )
                        continue
                total += len(data)
                parts.append(Fetched(p.partition, E.NONE, plog.next_offset, plog.log_start_offset, data))
            out.append(dm.FetchTopicResult(topic.topic, tuple(parts)))
        return total, dm.FetchResponse(E.NONE, tuple(out))

    def fetch(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        r = kp.fetch_request(req)
        if r.replica_id >= 0:
            # A follower's fetch (Kafka: ClusterAction on the cluster, else every partition refused).
            follower_ok = self.authorizer is None or self.authorizer.cluster(req, Operation.CLUSTER_ACTION)
            everything = frozenset(t.topic for t in r.topics)
            denied = frozenset() if follower_ok else everything
        else:
            denied = self._denied(req, Operation.READ, (t.topic for t in r.topics))
        total, resp = self._collect_fetch(r, denied)
        min_bytes = max(r.min_bytes, 1)
        wait_ms = min(r.max_wait_ms, self.config.fetch_max_wait_cap_ms)
        # As Kafka: only refused partitions leaves nothing to wait for.
        if total >= min_bytes or wait_ms <= 0 or (denied and all(t.topic in denied for t in r.topics)):
            return kp.fetch_response(req, resp)
        return self._fetch_wait(req, r, wait_ms / 1000.0, denied)

    async def _fetch_wait(
        self, req: kp.RequestFrame, r: dm.FetchRequest, wait_s: float, denied: frozenset[str] = frozenset()
    ) -> Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        min_bytes = max(r.min_bytes, 1)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self.new_data.current().wait(), remaining)
            except TimeoutError:
                break
            total, resp = self._collect_fetch(r, denied)
            if total >= min_bytes:
                return kp.fetch_response(req, resp)
        _total, resp = self._collect_fetch(r, denied)
        return kp.fetch_response(req, resp)

    def init_producer_id(self, req: kp.RequestFrame) -> Response:
        r = kp.init_producer_id_request(req)
        if r.transactional_id is not None:
            allowed = self.authorizer is None or self.authorizer.transactional_id(
                req, Operation.WRITE, r.transactional_id
            )
            error = E.COORDINATOR_NOT_AVAILABLE if allowed else E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            resp = dm.InitProducerIdResponse(error, -1, -1)
        elif self.authorizer is not None and not self.authorizer.may_write_idempotently(req):
            resp = dm.InitProducerIdResponse(E.CLUSTER_AUTHORIZATION_FAILED, -1, -1)
        else:
            resp = dm.InitProducerIdResponse(E.NONE, self.producer_ids.allocate(), 0)
        return kp.init_producer_id_response(req, resp)
