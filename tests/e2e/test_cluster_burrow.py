"""Burrow 1.2.1 (/usr/bin/Burrow) against a `serve --zk` node: its `kafka` cluster module polls our Metadata and
ListOffsets, its `kafka_zk` consumer module reads /consumers/G/offsets, and the lag endpoint reports end - committed.

The broker-protocol side (`[consumer.local] class-name="kafka"`) is not covered: Burrow consumes
`__consumer_offsets` with Fetch, and zkcoord keeps group records in ZooKeeper (zkcoord.zk.record_store), not in a
served `__consumer_offsets` topic log, so there is nothing for Burrow to fetch (see docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkcoord.local.node import NodeProcess
from zkcoord.testing import free_port, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

BURROW = "/usr/bin/Burrow"
TOPIC = "lagged"
RECORDS = 100
COMMITTED = 90
GROUP = "oldgrp"


def _config(zk_hosts: str, chroot: str, bootstrap: str, http_port: int, base: Path) -> str:
    zk_servers = json.dumps(zk_hosts.split(","))
    return f"""
[general]
pidfile="{base}/burrow.pid"

[logging]
level="info"

[zookeeper]
servers={zk_servers}
timeout=6
root-path="{chroot}/burrow"

[client-profile.test]
client-id="burrow-test"
kafka-version="0.10.0"

[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="test"
topic-refresh=1
offset-refresh=1

[consumer.oldzk]
class-name="kafka_zk"
servers={zk_servers}
zookeeper-path="{chroot}"
zookeeper-timeout=6
cluster="local"

[httpserver.default]
address="127.0.0.1:{http_port}"

[storage.default]
class-name="inmemory"
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
"""


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", "--offsets.topic.num.partitions=1")
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.kill9()


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def test_burrow_reports_lag_of_zookeeper_group(
    zk: Any, zk_server: Any, zk_chroot: str, node: NodeProcess, tmp_path: Path
) -> None:
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1)
    for i in range(RECORDS):
        producer.send(TOPIC, f"r{i}".encode(), partition=0)
    producer.flush(20)
    producer.close(5)
    zk.create(f"/consumers/{GROUP}/offsets/{TOPIC}/0", str(COMMITTED).encode(), makepath=True)

    conf_dir = tmp_path / "burrow"
    conf_dir.mkdir()
    http_port = free_port()
    chroot = "/" + zk_chroot.strip("/")
    (conf_dir / "burrow.toml").write_text(
        _config(zk_server.hosts, chroot, node.bootstrap, http_port, conf_dir)
    )
    log_path = conf_dir / "burrow.out"
    with log_path.open("w") as out:
        burrow = subprocess.Popen(
            [BURROW, "-config-dir", str(conf_dir)],
            cwd=conf_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{http_port}/v3/kafka/local"
        found: dict[str, Any] = {}

        def lag_reported() -> bool:
            assert burrow.poll() is None, log_path.read_text()[-3000:]
            body = _get(f"{base}/consumer/{GROUP}/lag")
            if not body or body.get("error") or not body.get("status"):
                return False
            parts = body["status"].get("partitions") or []
            if not parts or parts[0].get("current_lag") != RECORDS - COMMITTED:
                # the first commit can arrive before the first broker-offset poll and is then dropped:
                # bump the committed offset's mtime so Burrow sees a fresh commit
                zk.set(f"/consumers/{GROUP}/offsets/{TOPIC}/0", str(COMMITTED).encode())
                return False
            found.update(body)
            return True

        wait_for(lag_reported, 60, "Burrow lag for the ZooKeeper group", interval=1.0)
        status = found["status"]
        assert status["cluster"] == "local" and status["group"] == GROUP
        part = status["partitions"][0]
        assert part["topic"] == TOPIC and part["partition"] == 0
        assert part["current_lag"] == RECORDS - COMMITTED
        assert part["end"]["offset"] == COMMITTED
        assert status["totallag"] == RECORDS - COMMITTED
        topic = _get(f"{base}/topic/{TOPIC}")
        assert topic is not None and topic["offsets"] == [RECORDS]
    finally:
        with contextlib.suppress(ProcessLookupError):
            burrow.kill()
        burrow.wait(10)
