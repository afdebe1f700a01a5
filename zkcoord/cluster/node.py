"""One zkcoord cluster node over ZooKeeper: broker registration, the controller, which offsets partitions this
node leads, coordinator lookup for groups, and a fenced per-partition record store for the coordinator.

Guarantees:
* a node starts only where every broker registered in `/brokers/ids` and the `/controller` holder are zkcoord
  nodes (each marks its registration with `/zkcoord/brokers/N` of the same session, zkcoord.zk.cluster_owners);
  beside brokers it did not start it refuses before writing anything (`ForeignBrokersRegistered`, pointing at
  `zkcoord proxy`);
* a node id is registered by one live process at a time (`/brokers/ids/N` ephemeral; another session's znode
  ⇒ `NodeIdInUse`, as 0.9+ `ZKCheckedEphemeral`), and re-registered after a session expiry;
* the node serves a group only while it leads the group's offsets partition and has finished loading that
  partition's records (`group_status`: NONE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE); on connection suspension or session loss it stops serving first, and a worker
  pass that read ZooKeeper before that cannot switch serving back on (the lifecycle table
  `zkcoord.cluster.node_state`, run by the worker the controller uses too, `zkcoord.zk.coalescing`: a
  connection generation, bumped by the state listener and checked under the same lock);
* records are written through `ZkRecordStore`, fenced by the partition state version, so a deposed leader
  cannot append, and the next leader loads everything that was acknowledged;
* one partition's bad data is that partition's problem: a load that fails (a malformed batch znode, named with
  its path and why) leaves that partition unserved (COORDINATOR_LOAD_IN_PROGRESS, never served from partial
  data), every other partition loads and serves, and the failed load is retried (back-off 1 s doubling to 30 s,
  at once when the bad znode changes or goes), so a repair is picked up without a restart. Nothing is deleted.

The group service plugs in through two callbacks run on the node's worker thread: `on_become_leader(partition,
store)` must load the partition's records (it may block; the partition answers COORDINATOR_LOAD_IN_PROGRESS
meanwhile) and `on_resign(partition)` must drop the partition's groups; `on_append(partition)` is given to each
partition's store and runs on the appending thread after every committed append (it must only signal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from zkcoord.cluster import node_state
from zkcoord.cluster.node_state import NodeEvent, NodeState, NodeWork
from zkcoord.errors import ConfigError, MalformedZnode
from zkcoord.group.errors import ErrorCode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, format_endpoint
from zkcoord.placement.coordinator import (
    DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS,
    OFFSETS_TOPIC,
    group_of_record_key,
    partition_for_group,
)
from zkcoord.placement.leadership import NO_LEADER, Leadership
from zkcoord.ratelog import RateLimitedLog
from zkcoord.records.offsets_bulk import BulkDecoder
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.cluster_owners import ForeignCluster, foreign_brokers, mark_node
from zkcoord.zk.coalescing import CoalescingWorker
from zkcoord.zk.controller import (
    SESSION_CONNECTED,
    SESSION_LOST,
    SESSION_SUSPENDED,
    Controller,
    ZooKeeperError,
    read_topic_states,
)
from zkcoord.zk.record_store import (
    DEFAULT_COMPACT_AFTER_BATCHES,
    PartitionFence,
    StoreFenced,
    ZkRecordStore,
)
from zkcoord.zk.registry import NodeIdInUse, read_broker_data, register_node
from zkcoord.zk.session import Client, connect

log = logging.getLogger(__name__)
_say = RateLimitedLog(log)

_CONNECTION_EVENTS: dict[object, NodeEvent] = {
    SESSION_SUSPENDED: NodeEvent.SUSPENDED,
    SESSION_LOST: NodeEvent.LOST,
    SESSION_CONNECTED: NodeEvent.CONNECTED,
}

LOAD_RETRY_MIN_S = 1.0
LOAD_RETRY_MAX_S = 30.0
RESYNC_S = 5.0  # the worker's periodic pass: a missed watch never strands a partition

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Typed, validated at construction; Kafka's names where Kafka has one."""

    zookeeper_connect: str
    node_id: int
    host: str
    port: int
    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 15000
    # zkcoord's own: compact an offsets partition's record store once it holds this many batch znodes.
    offsets_compact_after_batches: int = DEFAULT_COMPACT_AFTER_BATCHES
    # Who the node is to ZooKeeper (JAAS Client section / digest) and Kafka's zookeeper.set.acl.
    zookeeper_auth: ZkAuth = NO_AUTH
    # The security protocol of the node's one listener: registered as its endpoint's name, and the endpoint read
    # from the other nodes' registrations (clients are sent to brokers on the protocol they connected with).
    security_protocol: str = "PLAINTEXT"

    def __post_init__(self) -> None:
        if not self.zookeeper_connect:
            raise ConfigError("zookeeper.connect must not be empty")
        if not 0 <= self.node_id < 2**31:
            raise ConfigError(f"node.id must be in 0..2^31-1, got {self.node_id}")
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be 1..65535, got {self.port}")
        if self.security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"security protocol {self.security_protocol!r} is not one of Kafka's four")
        if self.offsets_topic_num_partitions < 1:
            raise ConfigError(
                f"offsets.topic.num.partitions must be >= 1, got {self.offsets_topic_num_partitions}"
            )
        if self.offsets_compact_after_batches < 2:
            raise ConfigError(
                f"offsets.compact.after.batches must be >= 2, got {self.offsets_compact_after_batches}"
            )
        if self.zookeeper_session_timeout_ms < 1000:
            raise ConfigError(
                f"zookeeper.session.timeout.ms must be >= 1000, got {self.zookeeper_session_timeout_ms}"
            )


class ForeignBrokersRegistered(ConfigError):
    """Plain cluster mode refused: the ZooKeeper holds brokers (or a controller) that no zkcoord node started."""

    def __init__(self, connect: str, found: ForeignCluster) -> None:
        super().__init__(
            f"ZooKeeper {connect} holds a cluster zkcoord did not start: {found.describe()}. A cluster node "
            "would register beside those brokers, take part in their controller election and rewrite their "
            "partition state; nothing was written. To coordinate groups in front of that cluster, run "
            f"`zkcoord proxy --zk {connect} --listen HOST:PORT --node-id N --data-dir DIR` (docs/proxy.md)"
        )
        self.found = found


def refuse_foreign_cluster(client: Client, connect: str) -> None:
    """Raise ForeignBrokersRegistered where brokers zkcoord did not start are registered or hold /controller
    (zkcoord.zk.cluster_owners: a zkcoord node marks its registration). Reads only."""
    found = foreign_brokers(client)
    if found:
        raise ForeignBrokersRegistered(connect, found)


def check_no_foreign_cluster(config: ClusterConfig) -> None:
    """`refuse_foreign_cluster` over a session of its own, for a process about to start anything that writes
    (the bridges of `serve` start before the node)."""
    client = connect(
        config.zookeeper_connect,
        timeout=config.zookeeper_connection_timeout_ms / 1000,
        session_timeout_s=config.zookeeper_session_timeout_ms / 1000,
        auth=config.zookeeper_auth,
    )
    try:
        refuse_foreign_cluster(client, config.zookeeper_connect)
    finally:
        try:
            client.stop()
        finally:
            client.close()


@dataclass(frozen=True, slots=True)
class CoordinatorAnswer:
    """What FindCoordinator returns for a group: error code and the coordinator's endpoint (-1/'' if none)."""

    error: ErrorCode
    node_id: int
    host: str
    port: int


class _Status:
    LOADING = "loading"
    LOADED = "loaded"


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """Why an offsets partition this node leads is not served, and when its load is tried again."""

    reason: str
    attempts: int
    retry_at: float  # time.monotonic()


class ClusterNode:
    """Start with `start()` (blocking, a few ZooKeeper round trips), stop with `close()`."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        on_become_leader: Callable[[int, ZkRecordStore], None] | None = None,
        on_resign: Callable[[int], None] | None = None,
        on_append: Callable[[int], None] | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        client: Client | None = None,
    ) -> None:
        self.config = config
        self._on_become_leader = on_become_leader
        self._on_resign = on_resign
        self._on_append = on_append
        self._clock_ms = clock_ms
        self._given_client = client
        self.client: Client | None = client
        self.controller: Controller | None = None
        # The lifecycle (zkcoord.cluster.node_state), its pending work and the connection generation live in
        # the worker, under its lock (`_cond`, which also guards the load failures below).
        self._worker: CoalescingWorker[NodeState, NodeEvent, NodeWork] = CoalescingWorker(
            f"cluster-node-{config.node_id}",
            node_state.transition,
            NodeState.CREATED,
            self._pass,
            idle_event=NodeEvent.RESYNC,
            idle_s=self._idle_wait_s,
            initial_work=node_state.REFRESH,
        )
        self._cond = self._worker.cond
        # Read by request handlers on other threads; replaced whole, never mutated in place.
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[int, Leadership] = {}
        self._num_partitions = config.offsets_topic_num_partitions
        self._owned: dict[int, tuple[str, ZkRecordStore]] = {}
        # Partitions led here whose load failed (under _cond: the worker and watch callbacks change it).
        self._load_failures: dict[int, LoadFailure] = {}
        self._watched_bad: set[str] = set()  # znodes with a pending exists-watch, one each

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        cfg = self.config
        if self.client is None:
            self.client = connect(
                cfg.zookeeper_connect,
                timeout=cfg.zookeeper_connection_timeout_ms / 1000,
                session_timeout_s=cfg.zookeeper_session_timeout_ms / 1000,
                auth=cfg.zookeeper_auth,
            )
        try:
            refuse_foreign_cluster(self.client, cfg.zookeeper_connect)  # before the first write
        except ForeignBrokersRegistered:
            self.close()
            raise
        self.ensure_cluster_paths()
        self._register()
        self.client.add_listener(self._on_state)
        self._worker.feed(NodeEvent.START)
        self.controller = Controller(
            self.client,
            cfg.node_id,
            offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
            clock_ms=self._clock_ms,
        )
        self.controller.start()
        self._worker.start()

    def close(self) -> None:
        self._worker.close(NodeEvent.CLOSE)  # stops serving first, then waits for the pass in progress
        if self.controller is not None:
            self.controller.close()
        for partition in sorted(self._owned):
            self._resign(partition)
        if self.client is not None:
            self.client.remove_listener(self._on_state)
            if self._given_client is None:
                try:
                    self.client.stop()
                finally:
                    self.client.close()

    def ensure_cluster_paths(self) -> None:
        assert self.client is not None
        for path in paths.PERSISTENT_PATHS_0_10_2:
            self.client.ensure_path(path)

    # -- queries (any thread) --------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def _serving(self) -> bool:
        return node_state.serves(self._worker.state)

    def brokers(self) -> list[tuple[int, str, int]]:
        """Live nodes with an endpoint of this node's security protocol, by id."""
        return [(n, h, p) for n, (h, p) in sorted(self._brokers.items())]

    def offsets_leaders(self) -> dict[int, Leadership]:
        return dict(self._leaders)

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self._num_partitions)

    def offsets_partition_count(self) -> int:
        return self._num_partitions

    def group_status(self, group_id: str) -> ErrorCode:
        """Kafka's `validateGroupStatus` order after the group-id check: not available, loading, not coordinator."""
        return self.group_status_of_partition(self.partition_for(group_id))

    def group_status_of_partition(self, partition: int) -> ErrorCode:
        """`group_status` for every group of offsets partition `partition`."""
        if not self._serving:
            return ErrorCode.NOT_COORDINATOR
        owned = self._owned.get(partition)
        if owned is not None:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if owned[0] == _Status.LOADING else ErrorCode.NONE
        lead = self._leaders.get(partition)
        if lead is None or lead.leader == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if lead.leader == self.node_id:
            # ZooKeeper already names this node and the current pass is opening its store (one ZooKeeper
            # round trip per partition; many after a restart). Kafka answers LOAD_IN_PROGRESS from becomeLeader
            # on; NOT_COORDINATOR here made clients drop the coordinator and rediscover this same node.
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def load_failures(self) -> dict[int, LoadFailure]:
        """Offsets partitions led here that are not served because their load failed, with the reason."""
        with self._cond:
            return dict(self._load_failures)

    def owns_group(self, group_id: str) -> bool:
        return self.group_status(group_id) == ErrorCode.NONE

    def find_coordinator(self, group_id: str) -> CoordinatorAnswer:
        lead = self._leaders.get(self.partition_for(group_id))
        if lead is None or lead.leader == NO_LEADER or lead.leader not in self._brokers:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        host, port = self._brokers[lead.leader]
        return CoordinatorAnswer(ErrorCode.NONE, lead.leader, host, port)

    def store_for_group(self, group_id: str) -> ZkRecordStore:
        """The fenced store of the group's partition; StoreFenced (NOT_COORDINATOR) if this node does not lead it."""
        partition = self.partition_for(group_id)
        owned = self._owned.get(partition)
        if owned is None or not self._serving:
            raise StoreFenced(f"node {self.node_id} does not lead offsets partition {partition}")
        return owned[1]

    def record_store(self) -> ClusterRecordStore:
        return ClusterRecordStore(self)

    # -- kazoo callbacks (connection thread) -------------------------------------------------------------

    def _on_state(self, state: object) -> None:
        event = _CONNECTION_EVENTS.get(state)
        if event is not None:  # a new generation: whatever a running pass read before this no longer counts
            self._worker.feed_connection(event)

    def _on_watch(self, event: object) -> None:
        self._wake()

    def _wake(self) -> None:
        self._worker.feed(NodeEvent.CHANGED)

    # -- worker ----------------------------------------------------------------------------------------

    def _pass(self, work: frozenset[NodeWork], gen: int) -> None:
        assert self.client is not None
        if not self.client.connected:
            return  # the CONNECTED event wakes us again; an EXPIRED state keeps the registration owed
        try:
            if node_state.must_register(self._worker.state):
                self._worker.feed(NodeEvent.REGISTER)
                for partition in sorted(self._owned):
                    self._resign(partition)
                self._register()
                self._worker.feed(NodeEvent.REGISTERED)
            self._refresh(gen)
        except (ZooKeeperError, MalformedZnode, NodeIdInUse) as exc:
            log.warning("node=%d cluster refresh failed: %r; retrying", self.node_id, exc)
            self._worker.feed(NodeEvent.FAILED)
            self._worker.backoff(0.5)

    def _idle_wait_s(self) -> float:
        """Until the next periodic pass or the earliest failed-load retry (called under _cond)."""
        due = min((f.retry_at for f in self._load_failures.values()), default=None)
        if due is None:
            return RESYNC_S
        return min(RESYNC_S, max(0.05, due - time.monotonic()))

    def _register(self) -> None:
        cfg = self.config
        endpoint = format_endpoint(cfg.security_protocol, cfg.host, cfg.port)
        reg = BrokerRegistration.create(
            cfg.host, cfg.port, version=4, timestamp_ms=self._clock_ms(), endpoints=(endpoint,)
        )
        # The mark first: a zkcoord node's registration is never seen without it (plain cluster mode refuses
        # to start beside brokers that have none).
        mark_node(self.client, cfg.node_id)
        register_node(self.client, cfg.node_id, reg.encode())

    def _resume_serving(self, gen: int) -> bool:
        """Serve again only if the connection has not changed since the pass began: what this pass read
        (registration, partition states) is then current. Otherwise the listener's stop stands and the
        state change that bumped the generation has already scheduled another pass."""
        with self._cond:
            self._worker.feed_if_current(
                gen,
                NodeEvent.RESUMED,
                NodeEvent.RESUME_STALE,
                lambda: self.client is not None and self.client.connected,
            )
            return self._serving

    def _refresh(self, gen: int) -> None:
        brokers: dict[int, tuple[str, int]] = {}
        for node, data in read_broker_data(self.client, self._on_watch).items():
            try:
                registration = BrokerRegistration.decode(paths.broker_path(node), data)
                endpoint = registration.endpoint_for(self.config.security_protocol)
            except MalformedZnode as exc:
                log.warning("node=%d ignoring broker %d: %s", self.node_id, node, exc)
                continue
            if endpoint is not None:
                brokers[node] = endpoint
        self._brokers = brokers
        assignment, states = read_topic_states(self.client, OFFSETS_TOPIC, self._on_watch)
        if assignment is not None:
            self._num_partitions = len(assignment.partitions)
        self._leaders = {p: Leadership(s.leader, s.leader_epoch) for p, (s, _) in states.items()}
        mine = {p: (s.leader_epoch, v) for p, (s, v) in states.items() if s.leader == self.node_id}
        for partition in sorted(self._owned):
            held = mine.get(partition)
            if held is None or held[1] != self._owned[partition][1].fence.state_version:
                self._resign(partition)
        # Only now, with moved partitions dropped, may the node answer for what it still leads.
        if not self._resume_serving(gen):
            return
        # Every newly led partition answers COORDINATOR_LOAD_IN_PROGRESS from now until its own load is done.
        fresh = [PartitionFence(p, mine[p][0], mine[p][1]) for p in sorted(mine) if p not in self._owned]
        stores = {
            f.partition: ZkRecordStore(
                self.client,
                f,
                compact_after_batches=self.config.offsets_compact_after_batches,
                # every record checked as `decode_record` would, at the bulk decoder's fast-path cost
                check_record=BulkDecoder().check,
                on_append=None if self._on_append is None else partial(self._on_append, f.partition),
                on_compaction_due=self._wake,
            )
            for f in fresh
        }
        self._owned = {**self._owned, **{p: (_Status.LOADING, st) for p, st in stores.items()}}
        for fence in fresh:
            self._load(fence.partition, stores[fence.partition])
        self._retry_failed_loads()
        self._compact_due()

    def _retry_failed_loads(self) -> None:
        now = time.monotonic()
        with self._cond:
            due = sorted(p for p, f in self._load_failures.items() if f.retry_at <= now)
        for partition in due:
            owned = self._owned.get(partition)
            if owned is None or owned[0] == _Status.LOADED:
                with self._cond:
                    self._load_failures.pop(partition, None)
                continue
            self._load(partition, owned[1])

    def _compact_due(self) -> None:
        """Compact every loaded partition whose store is due (also right after a load of a long history).
        Runs on this worker only, behind the store's leadership fence: a deposed leader's compaction fails
        as a whole and the next refresh resigns the partition."""
        for partition, (status, store) in sorted(self._owned.items()):
            if status != _Status.LOADED or not self._serving or not store.compaction_due():
                continue
            try:
                store.maybe_compact()
            except StoreFenced as exc:
                log.info("node=%d compaction of partition %d fenced: %s", self.node_id, partition, exc)
                self._worker.feed(NodeEvent.CHANGED)

    def _load(self, partition: int, store: ZkRecordStore) -> None:
        log.info(
            "node=%d loading offsets partition %d (leader epoch %d)",
            self.node_id,
            partition,
            store.fence.leader_epoch,
        )
        try:
            if self._on_become_leader is not None:
                self._on_become_leader(partition, store)
        except Exception as exc:  # this partition's problem only: the pass goes on with the others
            self._load_failed(partition, exc)
            return
        with self._cond:
            recovered = self._load_failures.pop(partition, None)
        if recovered is not None:
            log.warning(
                "node=%d offsets partition %d loaded after %d failed attempt(s); serving it",
                self.node_id,
                partition,
                recovered.attempts,
            )
        current = self._owned.get(partition)
        if current is not None and current[1] is store:
            self._owned = {**self._owned, partition: (_Status.LOADED, store)}

    def _load_failed(self, partition: int, exc: Exception) -> None:
        reason = str(exc) if isinstance(exc, MalformedZnode) else f"{type(exc).__name__}: {exc}"
        with self._cond:
            before = self._load_failures.get(partition)
            attempts = 1 if before is None else before.attempts + 1
            delay = min(LOAD_RETRY_MAX_S, LOAD_RETRY_MIN_S * 2 ** min(attempts - 1, 16))
            self._load_failures[partition] = LoadFailure(reason, attempts, time.monotonic() + delay)
        args = (self.node_id, partition, reason, delay)
        message = (
            "node=%d offsets partition %d NOT served (its groups answer COORDINATOR_LOAD_IN_PROGRESS; every "
            "other partition is served): load failed: %s; retrying in %.0f s or when the znode changes "
            "(docs/operations.md: repair or remove it; nothing is deleted here)"
        )
        if before is None:  # once per partition and failure spell; then rate-limited (a znode rewritten in a
            log.error(message, *args)  # loop must not write a line per rewrite)
        else:
            level = logging.ERROR if before.reason != reason else logging.WARNING
            _say.log(level, "offsets-partition-load", message, *args)
        if isinstance(exc, MalformedZnode):
            self._watch_bad_znode(partition, exc.path)

    def _watch_bad_znode(self, partition: int, path: str) -> None:
        """Retry at once when the bad znode changes or goes (one pending watch per znode)."""
        with self._cond:
            if path in self._watched_bad:
                return
            self._watched_bad.add(path)
        try:
            assert self.client is not None
            self.client.exists(path, watch=partial(self._on_bad_znode, partition, path))
        except ZooKeeperError:
            with self._cond:  # the back-off retry still comes
                self._watched_bad.discard(path)

    def _on_bad_znode(self, partition: int, path: str, event: object) -> None:
        with self._cond:
            self._watched_bad.discard(path)
            failure = self._load_failures.get(partition)
            if failure is not None:
                self._load_failures[partition] = LoadFailure(failure.reason, failure.attempts, 0.0)
            self._worker.feed(NodeEvent.CHANGED)

    def _resign(self, partition: int) -> None:
        owned = dict(self._owned)
        owned.pop(partition, None)
        self._owned = owned
        with self._cond:
            self._load_failures.pop(partition, None)
        log.info("node=%d no longer leads offsets partition %d", self.node_id, partition)
        if self._on_resign is not None:
            self._on_resign(partition)


class ClusterRecordStore:
    """A RecordStore over the partitions this node leads: `append` routes each record to its group's
    partition store (fenced there); `load` yields the records of every partition currently led."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    def append(self, records: Sequence[Record]) -> None:
        by_partition: dict[int, list[Record]] = {}
        for rec in records:
            by_partition.setdefault(self.node.partition_for(group_of_record_key(rec[0])), []).append(rec)
        for partition in sorted(by_partition):
            recs = by_partition[partition]
            self.node.store_for_group(group_of_record_key(recs[0][0])).append(recs)

    def load(self) -> Iterator[Record]:
        for partition in sorted(self.node._owned):
            yield from self.node._owned[partition][1].load()

    def close(self) -> None:
        pass
