"""`serve --zk`: the node registers as broker N and publishes its topics with itself as leader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkcoord.testing import wait_for
from zkcoord.zk import registry

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_serve_registers_broker_and_topics(zk: Any, zk_connect: str, tmp_path: Path) -> None:
    from e2e.conftest import ServerProcess  # type: ignore[import-not-found]

    node = ServerProcess(tmp_path / "data", ("--zk", zk_connect, "--node-id", "3", "--num.partitions=2"))
    node.start()
    try:
        brokers = registry.read_brokers(zk)
        assert list(brokers) == [3]
        producer = KafkaProducer(bootstrap_servers=node.bootstrap)
        producer.send("zk-topic", b"x").get(10)
        producer.close()
        wait_for(lambda: registry.read_topic(zk, "zk-topic") is not None, 10, "topic znode")
        assert registry.leader_endpoint(zk, "zk-topic", 1) == ("127.0.0.1", node.port)
    finally:
        node.stop()
        node.kill9()
    wait_for(lambda: registry.read_broker(zk, 3) is None, 15, "broker znode gone after stop")
