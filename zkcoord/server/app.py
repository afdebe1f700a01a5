"""One zkcoord node: partition logs + group service + wire listener, started and stopped together.

With a ZooKeeper connect string the node is a cluster member (zkcoord.server.cluster_routing): it registers,
takes part in controller election, and serves the groups of the offsets partitions the controller gives it.
Every collaborator is handed to the broker at construction; nothing is attached afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace

from zkcoord.cluster.node import ClusterConfig
from zkcoord.errors import ConfigError
from zkcoord.group.config import GroupConfig
from zkcoord.metrics import ServeMetrics
from zkcoord.server.authorization import RequestAuthorizer
from zkcoord.server.broker import Broker, NewData, Response, ServerConfig
from zkcoord.server.cluster_routing import ClusterRouting
from zkcoord.server.group_service import GroupService
from zkcoord.server.kafka_protocol import RequestFrame
from zkcoord.server.listener_security import ListenerSecurity
from zkcoord.server.log import LogManager
from zkcoord.server.meta import read_or_create_cluster_id
from zkcoord.server.offsets_v0 import ZooKeeperOffsetsV0
from zkcoord.server.seams import MembershipBridge, OffsetMirror
from zkcoord.server.topic_ids import new_topic_id, topic_lookup, topics_version
from zkcoord.server.wire import WireServer
from zkcoord.storage import FileRecordStore
from zkcoord.zk.auth import NO_AUTH, ZkAuth

log = logging.getLogger(__name__)

LOG_TICK_S = 1.0  # how often flush.ms and the retention check interval are looked at


@dataclass
class Node:
    server_config: ServerConfig
    group_config: GroupConfig = field(default_factory=GroupConfig)
    zk_connect: str | None = None
    advertise: tuple[str, int] | None = None  # advertised.listeners: what clients are told to connect to
    cluster_overrides: dict[str, int] = field(default_factory=dict)  # ClusterConfig fields set by flags
    zk_auth: ZkAuth = NO_AUTH  # who the cluster node is to ZooKeeper, and zookeeper.set.acl
    offset_mirror: OffsetMirror | None = None  # the bridge's (`--bridge-zk-offsets`), for every group service
    membership_bridge: MembershipBridge | None = (
        None  # mixed groups (`--bridge-zk-groups`), for every service
    )
    logs: LogManager | None = None
    broker: Broker | None = None
    wire: WireServer | None = None
    groups: GroupService | None = None  # a single node's group coordinator, over a file in the data dir
    cluster: ClusterRouting | None = None  # a cluster node's: groups routed by offsets partition
    metrics: ServeMetrics | None = None  # fed by the wire server and the group dispatcher, read at scrape
    # What the listener on server_config.host:port requires (None: PLAINTEXT), and further listeners of a single
    # node (`--listeners`), each (host, port, security), served by a broker view advertising that address.
    security: ListenerSecurity | None = None
    more_listeners: tuple[tuple[str, int, ListenerSecurity | None], ...] = ()
    more_wires: list[WireServer] = field(default_factory=list)
    authorizer: RequestAuthorizer | None = None  # Kafka's ACLs, for every listener (None: no authorization)
    _log_ticker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        cfg = self.server_config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.zk_connect:  # a cluster node serves /cluster/id instead (ClusterRouting)
            cfg = self.server_config = replace(
                cfg, cluster_id=read_or_create_cluster_id(cfg.data_dir, cfg.node_id)
            )
        logs = self.logs = LogManager(
            cfg.data_dir,
            limits=cfg.log_limits,
            defaults=cfg.topic_defaults,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
        )
        self._log_ticker = asyncio.get_running_loop().create_task(self._tick_logs(logs))
        if not self.zk_connect:
            # A single node is its own controller: topics stored before ids existed get one (a cluster node's
            # ids come from ZooKeeper, where the controller assigns them).
            logs.assign_missing_ids(new_topic_id)
            store = FileRecordStore(
                cfg.data_dir / "group-records",
                cfg.group_records_fsync,
                fsync_interval_ms=cfg.group_records_fsync_interval_ms,
                compact_min_bytes=cfg.group_records_compact_min_bytes,
                delete_retention_ms=cfg.group_records_delete_retention_ms,
            )
            self.groups = GroupService(
                self.group_config,
                store,
                offset_mirror=self.offset_mirror,
                membership_bridge=self.membership_bridge,
                topics=topic_lookup(logs),
                topic_names=lambda: tuple(logs.topics),
                topics_version=topics_version(logs),
            )
            await self.groups.start()
        self.wire = WireServer(
            self._dispatch,
            cfg.host,
            cfg.port,
            cfg.socket_request_max_bytes,
            cfg.connection_limits,
            observe=self.metrics.observe_request if self.metrics is not None else None,
            security=self.security,
        )
        await self.wire.start()
        if cfg.port == 0 or self.advertise is not None:
            # the advertised endpoint: the bound port unless advertised.listeners says otherwise
            host, port = self.advertise or (cfg.host, self.wire.port)
            self.server_config = cfg = replace(cfg, host=host, port=port)
        # No await from the listener's start to the broker's construction, so no request can arrive before it.
        new_data = NewData()
        observe_group = self.metrics.observe_group_response if self.metrics is not None else None
        if self.zk_connect:
            self.cluster = ClusterRouting(
                self._cluster_config(cfg),
                self.group_config,
                logs,
                new_data.notify,
                self.offset_mirror,
                self.membership_bridge,
            )
            self.broker = Broker(
                cfg,
                logs,
                groups=self.cluster,
                cluster=self.cluster,
                new_data=new_data,
                observe_group=observe_group,
                zk_offsets_v0=self._zk_offsets_v0(self.cluster, logs),
                authorizer=self.authorizer,
            )
            await self.cluster.start()
        else:
            self.broker = Broker(
                cfg,
                logs,
                groups=self.groups,
                new_data=new_data,
                observe_group=observe_group,
                authorizer=self.authorizer,
            )
        await self._start_more_listeners(self.broker)

    async def _start_more_listeners(self, broker: Broker) -> None:
        """Each further listener gets a broker view advertising its own address (a client is told to reconnect
        where it connected, with the same security), sharing this node's logs, groups and producer ids."""
        if self.more_listeners and self.zk_connect:
            raise ConfigError("a cluster node (--zk) has one listener: its registration holds one endpoint")
        cfg = self.server_config
        for host, port, security in self.more_listeners:
            views: list[Broker] = []

            def dispatch(req: RequestFrame, views: list[Broker] = views) -> Response | Awaitable[Response]:
                return views[0].dispatch(req)

            wire = WireServer(dispatch, host, port, cfg.socket_request_max_bytes,
                              cfg.connection_limits,
                              observe=self.metrics.observe_request if self.metrics is not None else None,
                              security=security)  # fmt: skip
            await wire.start()
            self.more_wires.append(wire)
            # No await since the bind: the view exists before any request can reach it.
            views.append(
                Broker(replace(cfg, host=host, port=wire.port), broker.logs, groups=broker.groups,
                       new_data=broker.new_data, producer_ids=broker.producer_ids,
                       observe_group=self.metrics.observe_group_response if self.metrics is not None else None,
                       authorizer=self.authorizer)
            )  # fmt: skip

    def _zk_offsets_v0(self, cluster: ClusterRouting, logs: LogManager) -> ZooKeeperOffsetsV0:
        return ZooKeeperOffsetsV0(
            lambda: cluster.node.client,
            lambda topic, partition: logs.get(topic, partition) is not None,
            self.group_config.offset_metadata_max_bytes,
        )

    def _dispatch(self, req: RequestFrame) -> Response | Awaitable[Response]:
        assert self.broker is not None, "the broker is built before the listener can hand over a request"
        return self.broker.dispatch(req)

    def _cluster_config(self, cfg: ServerConfig) -> ClusterConfig:
        assert self.zk_connect is not None
        return ClusterConfig(
            zookeeper_connect=self.zk_connect,
            node_id=cfg.node_id,
            host=cfg.host,
            port=cfg.port,
            offsets_topic_num_partitions=self.group_config.offsets_topic_num_partitions,
            zookeeper_auth=self.zk_auth,
            security_protocol=self.security.protocol if self.security is not None else "PLAINTEXT",
            **self.cluster_overrides,
        )

    async def _tick_logs(self, logs: LogManager) -> None:
        """Time-based flushes (flush.ms) and retention (every log.retention.check.interval.ms), each second."""
        while True:
            await asyncio.sleep(LOG_TICK_S)
            try:
                logs.tick(int(time.time() * 1000))
            except OSError:
                log.exception("partition log flush or retention failed; retrying at the next tick")

    async def close(self) -> None:
        if self._log_ticker is not None:
            self._log_ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._log_ticker
        for wire in self.more_wires:
            await wire.close()
        if self.wire is not None:
            await self.wire.close()
        if self.cluster is not None:
            await self.cluster.close()
        if self.groups is not None:
            await self.groups.close()
            # The standalone group-records log: fsync (the "interval" policy's promise at shutdown) and let a
            # compaction under way finish, off the event loop.
            await asyncio.to_thread(self.groups.store.close)
        if self.logs is not None:
            self.logs.close()
