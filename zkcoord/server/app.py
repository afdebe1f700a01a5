"""One zkcoord node: partition logs + group service + wire listener (+ ZooKeeper registration), started and stopped together."""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from zkcoord.group.config import GroupConfig
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
    logs: LogManager | None = None
    broker: Broker | None = None
    wire: WireServer | None = None
    groups: Any = None
    zk: Any = None

    async def start(self) -> None:
        cfg = self.server_config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs = LogManager(cfg.data_dir, cfg.log_segment_bytes)
        self.groups = _load_group_service(self.group_config, cfg)
        if self.groups is not None:
            await self.groups.start()
        self.broker = Broker(cfg, self.logs, self.groups)
        if self.groups is not None:
            from zkcoord.server.groups import GroupDispatch

            self.broker.groups_dispatch = GroupDispatch(self.groups).dispatch
        self.wire = WireServer(self.broker.dispatch, cfg.host, cfg.port, cfg.socket_request_max_bytes)
        await self.wire.start()
        if cfg.port == 0:
            # the advertised port must be the bound one
            self.server_config = cfg = ServerConfig(**{**_asdict(cfg), "port": self.wire.port})
            self.broker.config = cfg
        if self.zk_connect:
            from zkcoord.server.zk_registration import ZkRegistration

            self.zk = ZkRegistration(self.zk_connect, cfg.node_id, cfg.host, cfg.port)
            await asyncio.to_thread(self.zk.start, self.logs)
            self.broker.on_topic_created.append(self.zk.topic_created)

    async def close(self) -> None:
        if self.wire is not None:
            await self.wire.close()
        if self.groups is not None:
            await self.groups.close()
        if self.zk is not None:
            await asyncio.to_thread(self.zk.close)
        if self.logs is not None:
            self.logs.close()


def _asdict(cfg: ServerConfig) -> dict[str, Any]:
    return {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}
