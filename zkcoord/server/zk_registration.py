"""With `serve --zk`: register this node as broker N and publish its topics and partition states (leader = itself).

This lets legacy ZooKeeper-era consumers and tools (which read /brokers) find the partitions this node serves.
Single-node mode: this node leads every partition it stores; a multi-node controller lives in zkcoord.cluster.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from zkcoord.legacy.codecs import PartitionState
from zkcoord.server.log import LogManager
from zkcoord.zk import registry
from zkcoord.zk.session import connect

log = logging.getLogger(__name__)


class ZkRegistration:
    def __init__(self, hosts: str, node_id: int, host: str, port: int) -> None:
        self.hosts = hosts
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client: Any = None

    def start(self, logs: LogManager) -> None:
        self.client = connect(self.hosts, timeout=15)
        registry.ensure_cluster_paths(self.client)
        registry.register_broker(
            self.client, self.node_id, self.host, self.port, timestamp_ms=int(time.time() * 1000)
        )
        for topic in sorted(logs.topics):
            self.topic_created(topic, len(logs.topics[topic]))
        log.info("registered as broker %d in ZooKeeper %s", self.node_id, self.hosts)

    def topic_created(self, topic: str, partitions: int) -> None:
        """Called on the event loop; ZooKeeper writes are small and few (one per topic creation)."""
        if self.client is None:
            return
        registry.write_topic(self.client, topic, {p: [self.node_id] for p in range(partitions)})
        for p in range(partitions):
            state = PartitionState(
                leader=self.node_id, leader_epoch=0, isr=(self.node_id,), controller_epoch=1
            )
            registry.write_partition_state(self.client, topic, p, state)

    def close(self) -> None:
        if self.client is not None:
            self.client.stop()
            self.client.close()
            self.client = None
