"""One zkcoord node: partition logs + group service + wire listener, started and stopped together.

With a ZooKeeper connect string the node is a cluster member (zkcoord.server.cluster_routing): it registers,
takes part in controller election, and serves the groups of the offsets partitions the controller gives it.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from zkcoord.group.config import GroupConfig
from zkcoord.metrics import ServeMetrics
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager
from zkcoord.server.wire import WireServer

log = logging.getLogger(__name__)


def _load_group_service(config: GroupConfig, server: ServerConfig) -> Any:
    """The GroupService over a FileRecordStore in the data dir, or None while that module is not there."""
    try:
        service_mod = importlib.import_module("zkcoord.server.group_service")
        storage_mod = importlib.import_module("zkcoord.storage")
    except ImportError as exc:
        log.warning("group coordinator not available (%s); group APIs answer COORDINATOR_NOT_AVAILABLE", exc)
        return None
    store = storage_mod.FileRecordStore(server.data_dir / "group-records")
    return service_mod.GroupService(config, store)


@dataclass
class Node:
    server_config: ServerConfig
    group_config: GroupConfig = field(default_factory=GroupConfig)
    zk_connect: str | None = None
    advertise: tuple[str, int] | None = None  # advertised.listeners: what clients are told to connect to
    cluster_overrides: dict[str, int] = field(default_factory=dict)  # ClusterConfig fields set by flags
    logs: LogManager | None = None
    broker: Broker | None = None
    wire: WireServer | None = None
    groups: Any = None
    zk: Any = None
    metrics: ServeMetrics | None = None  # fed by the wire server and the group dispatcher, read at scrape

    async def start(self) -> None:
        cfg = self.server_config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs = LogManager(cfg.data_dir, cfg.log_segment_bytes)
        if not self.zk_connect:
            self.groups = _load_group_service(self.group_config, cfg)
            if self.groups is not None:
                await self.groups.start()
        self.broker = Broker(cfg, self.logs, self.groups)
        if self.groups is not None:
            from zkcoord.server.groups import GroupDispatch

            self.broker.groups_dispatch = GroupDispatch(self.groups, self._observe_group()).dispatch
        self.wire = WireServer(
            self.broker.dispatch,
            cfg.host,
            cfg.port,
            cfg.socket_request_max_bytes,
            observe=self.metrics.observe_request if self.metrics is not None else None,
        )
        await self.wire.start()
        if cfg.port == 0 or self.advertise is not None:
            # the advertised endpoint: the bound port unless advertised.listeners says otherwise
            host, port = self.advertise or (cfg.host, self.wire.port)
            self.server_config = cfg = ServerConfig(**{**_asdict(cfg), "host": host, "port": port})
            self.broker.config = cfg
        if self.zk_connect:
            await self._join_cluster(self.zk_connect, cfg)

    async def _join_cluster(self, zk_connect: str, cfg: ServerConfig) -> None:
        from zkcoord.cluster.node import ClusterConfig
        from zkcoord.server.cluster_routing import ClusterRouting
        from zkcoord.server.groups import GroupDispatch

        assert self.broker is not None and self.logs is not None
        cluster_config = ClusterConfig(
            zookeeper_connect=zk_connect,
            node_id=cfg.node_id,
            host=cfg.host,
            port=cfg.port,
            offsets_topic_num_partitions=self.group_config.offsets_topic_num_partitions,
            **self.cluster_overrides,
        )
        routing = ClusterRouting(cluster_config, self.group_config)
        self.zk = routing
        self.groups = routing
        self.broker.groups = routing
        self.broker.cluster = routing
        self.broker.groups_dispatch = GroupDispatch(routing, self._observe_group()).dispatch
        self.broker.on_topic_created.append(routing.topic_created)
        routing.on_new_data = self.broker.notify_new_data
        await routing.start(self.logs)

    def _observe_group(self) -> Any:
        return self.metrics.observe_group_response if self.metrics is not None else None

    async def close(self) -> None:
        if self.wire is not None:
            await self.wire.close()
        if self.groups is not None:
            await self.groups.close()
        if self.logs is not None:
            self.logs.close()


def _asdict(cfg: ServerConfig) -> dict[str, Any]:
    return {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}
