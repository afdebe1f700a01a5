"""Request handlers of the wire server: data plane (Metadata, Produce, Fetch, ...) here, groups via GroupService.

`Broker.dispatch(req)` returns the encoded response frame, None (Produce acks=0), or an awaitable of either
(Fetch waiting for data, group calls parked by the coordinator). The wire layer keeps responses in request order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkcoord.errors import ConfigError
from zkcoord.records.batch import AppendRules, CorruptBatch, validate_for_append
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.limits import ConnectionLimits, LogLimits
from zkcoord.server.log import LEGAL_TOPIC, InvalidTopic, LogManager, OffsetsTopicLog, PartitionLog

log = logging.getLogger(__name__)

NONE = 0
CORRUPT_MESSAGE = 2
LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
COORDINATOR_NOT_AVAILABLE = 15
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_SERVER_ERROR = -1
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43

Response = bytes | None

# The group coordinator's internal topic (Kafka's Topic.GROUP_METADATA_TOPIC_NAME). In cluster mode it is served
# read-only from the coordinator's ZooKeeper record stores; clients may never produce to it.
OFFSETS_TOPIC = "__consumer_offsets"


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
    cluster_id: str = "zkcoord"
    fetch_max_wait_cap_ms: int = 1000  # bound on a Fetch's wait for new data, whatever the client asks
    log_segment_bytes: int = 64 * 1024 * 1024
    # message.max.bytes and the timestamp bounds a produced batch obeys
    append_rules: AppendRules = field(default_factory=AppendRules)
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    log_limits: LogLimits = field(default_factory=LogLimits)

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


class Broker:
    """One node's request handlers. `groups` is the GroupService (None: group APIs answer COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, config: ServerConfig, logs: LogManager, groups: Any = None) -> None:
        self.config = config
        self.logs = logs
        self.groups = groups
        self.producer_ids = ProducerIds(config.data_dir / "producer_ids")
        self._new_data = asyncio.Event()
        self.on_topic_created: list[Any] = []  # callbacks(topic, partitions), e.g. ZooKeeper registration
        # zkcoord.server.cluster_routing.ClusterRouting with `serve --zk`: brokers, leaders, coordinators
        self.cluster: Any = None
        self._handlers = {
            kp.API_VERSIONS: self.api_versions,
            kp.METADATA: self.metadata,
            kp.FIND_COORDINATOR: self.find_coordinator,
            kp.CREATE_TOPICS: self.create_topics,
            kp.PRODUCE: self.produce,
            kp.LIST_OFFSETS: self.list_offsets,
            kp.FETCH: self.fetch,
            kp.INIT_PRODUCER_ID: self.init_producer_id,
        }

    @property
    def brokers(self) -> list[tuple[int, str, int]]:
        if self.cluster is not None:
            brokers: list[tuple[int, str, int]] = self.cluster.brokers()
            return brokers
        return [(self.config.node_id, self.config.host, self.config.port)]

    def dispatch(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        handler = self._handlers.get(req.api_key)
        if handler is None:
            group_handler = self.groups_dispatch
            if group_handler is not None:
                result: Response | Awaitable[Response] = group_handler(req)
                return result
            return kp.error_response(req, COORDINATOR_NOT_AVAILABLE)
        return handler(req)

    groups_dispatch: Any = None  # set by zkcoord.server.groups when a GroupService is attached

    def _leads(self, topic: str, partition: int) -> bool:
        return self.cluster is None or bool(self.cluster.leads(topic, partition))

    def notify_new_data(self) -> None:
        """Wake every Fetch waiting for data (on the loop thread)."""
        self._new_data.set()
        self._new_data = asyncio.Event()

    def _readable(self, topic: str, partition: int) -> tuple[PartitionLog | OffsetsTopicLog | None, int]:
        """The log a ListOffsets/Fetch reads, or None and the error: UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER (led elsewhere, or an offsets partition still loading here)."""
        if topic == OFFSETS_TOPIC:
            if self.cluster is None or not 0 <= partition < self.cluster.offsets_partition_count():
                return None, UNKNOWN_TOPIC_OR_PARTITION
            view: OffsetsTopicLog | None = self.cluster.offsets_log(partition)
            return (view, NONE) if view is not None else (None, NOT_LEADER_OR_FOLLOWER)
        plog = self.logs.get(topic, partition)
        if plog is None:
            return None, UNKNOWN_TOPIC_OR_PARTITION
        if not self._leads(topic, partition):
            return None, NOT_LEADER_OR_FOLLOWER
        return plog, NONE

    # -- topics ---------------------------------------------------------------------------------------------

    def _create(self, name: str, partitions: int) -> list[PartitionLog]:
        logs = self.logs.create_topic(name, partitions)
        for callback in self.on_topic_created:
            try:
                callback(name, len(logs))
            except Exception:
                log.exception("topic %s: creation callback failed", name)
        return logs

    def _topic_meta(self, name: str, logs: list[PartitionLog]) -> kp.TopicMeta:
        node = self.config.node_id
        if self.cluster is not None:
            meta = self.cluster.partition_meta(name, len(logs))
            return kp.TopicMeta(name, NONE, tuple(kp.PartitionMeta(p, ld, r, e) for p, ld, r, e in meta))
        parts = tuple(kp.PartitionMeta(p.partition, node, (node,)) for p in logs)
        return kp.TopicMeta(name, NONE, parts)

    # -- handlers -------------------------------------------------------------------------------------------

    def api_versions(self, req: kp.RequestFrame) -> Response:
        if not kp.valid_client_software(req):
            log.info(
                "ApiVersions v%d from %s: invalid client software name/version",
                req.api_version,
                req.client_id,
            )
            return kp.api_versions_response(req, kp.INVALID_REQUEST)
        return kp.api_versions_response(req)

    def metadata(self, req: kp.RequestFrame) -> Response:
        wanted = kp.metadata_request_topics(req)
        allow_auto = self.config.auto_create_topics_enable and (
            req.api_version < 4 or bool(req.body.allow_auto_topic_creation)
        )
        topics: list[kp.TopicMeta] = []
        if wanted is None:
            for name in sorted(self.logs.topics):
                if name != OFFSETS_TOPIC:
                    topics.append(self._topic_meta(name, self.logs.topics[name]))
            if self.cluster is not None:
                topics.append(self.cluster.offsets_topic_meta())
                topics.sort(key=lambda t: t.name)
        else:
            for name in wanted:
                if name == OFFSETS_TOPIC:
                    # Never a data topic: the controller creates it (cluster); a single node does not serve it.
                    if self.cluster is not None:
                        topics.append(self.cluster.offsets_topic_meta())
                    else:
                        topics.append(kp.TopicMeta(name, UNKNOWN_TOPIC_OR_PARTITION, (), internal=True))
                    continue
                logs = self.logs.topics.get(name)
                if logs is None:
                    if not LEGAL_TOPIC.match(name):
                        topics.append(kp.TopicMeta(name, INVALID_TOPIC_EXCEPTION, ()))
                        continue
                    if not allow_auto:
                        topics.append(kp.TopicMeta(name, UNKNOWN_TOPIC_OR_PARTITION, ()))
                        continue
                    if self.cluster is not None:
                        # As a Kafka broker whose metadata cache lacks the topic: publish it to ZooKeeper
                        # (unless another node did) and answer LEADER_NOT_AVAILABLE; local logs follow
                        # ZooKeeper's partition count on the next refresh, so nodes never disagree on it.
                        self.cluster.topic_created(name, self.config.num_partitions)
                        topics.append(kp.TopicMeta(name, LEADER_NOT_AVAILABLE, ()))
                        continue
                    try:
                        logs = self._create(name, self.config.num_partitions)
                    except InvalidTopic as exc:  # a partition limit: the topic's error, as for CreateTopics
                        topics.append(kp.TopicMeta(name, exc.code, ()))
                        continue
                topics.append(self._topic_meta(name, logs))
        controller = self.cluster.controller_id() if self.cluster is not None else self.config.node_id
        return kp.metadata_response(req, self.brokers, self.config.cluster_id, controller, topics)

    def find_coordinator(self, req: kp.RequestFrame) -> Response:
        key_type, keys = kp.find_coordinator_keys(req)
        c = self.config
        results: list[tuple[str, int, str | None, int, str, int]] = []
        for key in keys:
            if key_type == 0 and self.cluster is not None:
                results.append((key, *self.cluster.find_coordinator(key)))
            elif key_type == 0 and self.groups is not None:
                results.append((key, NONE, None, c.node_id, c.host, c.port))
            else:
                what = "transactions are not supported" if key_type != 0 else "no group coordinator"
                results.append((key, COORDINATOR_NOT_AVAILABLE, what, -1, "", -1))
        return kp.find_coordinator_response(req, results)

    def create_topics(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        validate_only = bool(getattr(req.body, "validate_only", False)) if req.api_version >= 1 else False
        results: list[tuple[str, int, str | None, int]] = []
        to_create: list[int] = []  # indexes into results of topics to create
        for t in req.body.topics:
            n = t.num_partitions
            if t.assignments:
                n = len(t.assignments)
            elif n == -1:
                n = self.config.num_partitions
            if t.name == OFFSETS_TOPIC:
                results.append(
                    (t.name, INVALID_TOPIC_EXCEPTION, f"{OFFSETS_TOPIC} is the group coordinator's topic", n)
                    if self.cluster is None
                    else (t.name, TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.", n)
                )
            elif t.name in self.logs.topics:
                results.append((t.name, TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.", n))
            elif not LEGAL_TOPIC.match(t.name or ""):
                results.append((t.name, INVALID_TOPIC_EXCEPTION, f"illegal topic name {t.name!r}", n))
            elif n < 1:
                results.append((t.name, INVALID_PARTITIONS, f"num_partitions must be >= 1, got {n}", n))
            elif (refused := self.logs.partition_limit_error(t.name, n)) is not None:
                results.append((t.name, INVALID_PARTITIONS, refused, n))
            elif t.replication_factor not in (-1, 1):
                results.append(
                    (
                        t.name,
                        INVALID_REPLICATION_FACTOR,
                        f"replication factor {t.replication_factor} > 1 broker",
                        n,
                    )
                )
            else:
                if not validate_only:
                    to_create.append(len(results))
                results.append((t.name, NONE, None, n))
        if self.cluster is not None and to_create:
            return self._create_topics_in_cluster(req, results, to_create)
        for i in to_create:
            name, _e, _m, n = results[i]
            try:
                self._create(name, n)
            except InvalidTopic as exc:
                results[i] = (name, exc.code, str(exc), n)
        return kp.create_topics_response(req, results)

    async def _create_topics_in_cluster(
        self, req: kp.RequestFrame, results: list[tuple[str, int, str | None, int]], to_create: list[int]
    ) -> Response:
        """Kafka writes `/brokers/topics/T` before answering CreateTopics; a topic another node published
        first is TOPIC_ALREADY_EXISTS, and the local logs follow the partition count in ZooKeeper."""
        for i in to_create:
            name, _e, _m, n = results[i]
            try:
                created, count = await self.cluster.publish_topic(name, n)
            except Exception as exc:
                log.warning("CreateTopics %s: cannot write the topic to ZooKeeper: %r", name, exc)
                results[i] = (name, UNKNOWN_SERVER_ERROR, f"cannot write the topic to ZooKeeper: {exc}", n)
                continue
            try:
                self.logs.ensure_partitions(name, count)
            except InvalidTopic as exc:
                results[i] = (name, INVALID_TOPIC_EXCEPTION, str(exc), n)
                continue
            if not created:
                results[i] = (name, TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", n)
        return kp.create_topics_response(req, results)

    def produce(self, req: kp.RequestFrame) -> Response:
        body = req.body
        acks = body.acks
        out = []
        appended = False
        for topic in body.topic_data:
            parts: list[tuple[int, int, int, int, str | None]] = []
            for pd in topic.partition_data:
                if acks not in (0, 1, -1):
                    parts.append((pd.index, INVALID_REQUIRED_ACKS, -1, -1, f"acks={acks}"))
                    continue
                if topic.name == OFFSETS_TOPIC:  # Kafka: "Cannot append to internal topic"
                    msg = f"Cannot append to internal topic {OFFSETS_TOPIC}"
                    parts.append((pd.index, INVALID_TOPIC_EXCEPTION, -1, -1, msg))
                    continue
                plog = self.logs.get(topic.name, pd.index)
                if plog is None:
                    parts.append((pd.index, UNKNOWN_TOPIC_OR_PARTITION, -1, -1, None))
                    continue
                if not self._leads(topic.name, pd.index):
                    parts.append((pd.index, NOT_LEADER_OR_FOLLOWER, -1, -1, None))
                    continue
                records = pd.records
                if not records:
                    parts.append((pd.index, CORRUPT_MESSAGE, -1, plog.log_start_offset, "no records"))
                    continue
                mv = memoryview(records)
                try:
                    headers = validate_for_append(mv, int(time.time() * 1000), self.config.append_rules)
                except CorruptBatch as exc:
                    log.warning(
                        "produce %s-%d from %s: rejected: %s", topic.name, pd.index, req.client_id, exc
                    )
                    parts.append((pd.index, exc.code, -1, plog.log_start_offset, str(exc)))
                    continue
                error, dup_offset = NONE, None
                for h in headers:
                    error, dup_offset = plog.check_sequence(h)
                    if error != NONE or dup_offset is not None:
                        break
                if error != NONE:
                    parts.append((pd.index, error, -1, plog.log_start_offset, "sequence check failed"))
                    continue
                if dup_offset is not None:
                    parts.append((pd.index, NONE, dup_offset, plog.log_start_offset, None))
                    continue
                batches = [(h, mv[h.position : h.position + h.size]) for h in headers]
                base = plog.append(batches)
                appended = True
                parts.append((pd.index, NONE, base, plog.log_start_offset, None))
            out.append((topic.name, parts))
        if appended:
            self.notify_new_data()
        if acks == 0:
            return None
        return kp.produce_response(req, out)

    def list_offsets(self, req: kp.RequestFrame) -> Response:
        out = []
        for topic in req.body.topics:
            parts = []
            for p in topic.partitions:
                plog, error = self._readable(topic.name, p.partition_index)
                if plog is None:
                    parts.append((p.partition_index, error, -1, -1))
                    continue
                ts = p.timestamp
                if ts == -1:
                    parts.append((p.partition_index, NONE, -1, plog.next_offset))
                elif ts == -2:
                    parts.append((p.partition_index, NONE, -1, plog.log_start_offset))
                elif ts < 0:
                    # -3 (max timestamp, KIP-734) and other specials: the last offset is the honest answer we have
                    parts.append((p.partition_index, NONE, -1, max(plog.next_offset - 1, -1)))
                else:
                    offset, found_ts = plog.offset_for_timestamp(ts)
                    parts.append((p.partition_index, NONE, found_ts, offset))
            out.append((topic.name, parts))
        return kp.list_offsets_response(req, out)

    def _collect_fetch(self, req: kp.RequestFrame) -> tuple[int, list[tuple[str, list[Any]]]]:
        body = req.body
        budget = body.max_bytes if req.api_version >= 3 else 2**31 - 1
        total = 0
        out = []
        for topic in body.topics:
            parts = []
            for p in topic.partitions:
                plog, error = self._readable(topic.topic, p.partition)
                if plog is None:
                    parts.append((p.partition, error, -1, -1, b""))
                    continue
                offset = p.fetch_offset
                if offset < plog.log_start_offset or offset > plog.next_offset:
                    parts.append(
                        (p.partition, 1, plog.next_offset, plog.log_start_offset, b"")
                    )  # OFFSET_OUT_OF_RANGE
                    continue
                limit = min(p.partition_max_bytes, max(budget - total, 0))
                data = plog.read(offset, limit) if limit > 0 or total == 0 else b""
                total += len(data)
                parts.append((p.partition, NONE, plog.next_offset, plog.log_start_offset, data))
            out.append((topic.topic, parts))
        return total, out

    def fetch(self, req: kp.RequestFrame) -> Response | Awaitable[Response]:
        if req.api_version < 4:
            return kp.fetch_response(req, UNSUPPORTED_FOR_MESSAGE_FORMAT, [])
        total, out = self._collect_fetch(req)
        min_bytes = max(req.body.min_bytes, 1)
        wait_ms = min(req.body.max_wait_ms, self.config.fetch_max_wait_cap_ms)
        if total >= min_bytes or wait_ms <= 0:
            return kp.fetch_response(req, NONE, out)
        return self._fetch_wait(req, wait_ms / 1000.0)

    async def _fetch_wait(self, req: kp.RequestFrame, wait_s: float) -> Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        min_bytes = max(req.body.min_bytes, 1)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._new_data.wait(), remaining)
            except TimeoutError:
                break
            total, out = self._collect_fetch(req)
            if total >= min_bytes:
                return kp.fetch_response(req, NONE, out)
        _total, out = self._collect_fetch(req)
        return kp.fetch_response(req, NONE, out)

    def init_producer_id(self, req: kp.RequestFrame) -> Response:
        if req.body.transactional_id is not None:
            return kp.init_producer_id_response(req, COORDINATOR_NOT_AVAILABLE, -1, -1)
        return kp.init_producer_id_response(req, NONE, self.producer_ids.allocate(), 0)
