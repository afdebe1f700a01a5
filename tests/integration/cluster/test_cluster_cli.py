"""`zkcoord cluster describe` against a live controller."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zkcoord.cli import main
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.testing import wait_for
from zkcoord.zk.controller import Controller

pytestmark = pytest.mark.integration


def test_describe_shows_nodes_controller_and_leaders(zk: Any, zk_connect: str, capsys: Any) -> None:
    reg = BrokerRegistration.create("127.0.0.1", 9093, timestamp_ms=1)
    zk.create(paths.broker_path(3), reg.encode(), ephemeral=True, makepath=True)
    ctl = Controller(zk, 3, offsets_topic_num_partitions=2)
    ctl.start()
    try:
        wait_for(lambda: ctl.active and ctl.reconciles > 0, 10, "the controller's first pass")
        assert main(["cluster", "describe", "--zk", zk_connect, "--json"]) == 0
        desc = json.loads(capsys.readouterr().out)
        assert desc["controller"] == 3 and desc["controller_epoch"] == 1
        assert desc["nodes"] == [
            {
                "id": 3,
                "version": 4,
                "endpoint": "127.0.0.1:9093",
                "endpoints": [
                    {"listener": "PLAINTEXT", "protocol": "PLAINTEXT", "host": "127.0.0.1", "port": 9093}
                ],
            }
        ]
        assert [(r["topic"], r["partition"], r["leader"], r["leader_epoch"]) for r in desc["partitions"]] == [
            (OFFSETS_TOPIC, 0, 3, 0),
            (OFFSETS_TOPIC, 1, 3, 0),
        ]
        assert main(["cluster", "describe", "--zk", zk_connect]) == 0
        text = capsys.readouterr().out
        assert "controller: 3  controller_epoch: 1" in text
        assert "__consumer_offsets leaders (group coordinators): node 3: 2" in text
        assert main(["cluster", "describe", "--zk", zk_connect, "--topic", "nope"]) == 0
        assert "no such topic" in capsys.readouterr().out
    finally:
        ctl.close()


def test_describe_shows_every_endpoint_with_its_protocol(zk: Any, zk_connect: str, capsys: Any) -> None:
    """A node whose only listener is SASL_SSL has no PLAINTEXT endpoint, and is shown all the same."""
    secured = BrokerRegistration.create(
        "10.0.0.1", 9094, timestamp_ms=1, endpoints=["SASL_SSL://10.0.0.1:9094"]
    )
    zk.create(paths.broker_path(1), secured.encode(), makepath=True)
    mapped = (
        b'{"listener_security_protocol_map":{"INTERNAL":"SSL","PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://10.0.0.2:9092","INTERNAL://10.0.0.2:9093"],"jmx_port":-1,"host":"10.0.0.2",'
        b'"timestamp":"1","port":9092,"version":4}'
    )
    zk.create(paths.broker_path(2), mapped, makepath=True)
    zk.ensure_path(paths.BROKER_TOPICS)
    assert main(["cluster", "describe", "--zk", zk_connect, "--json"]) == 0
    nodes = {n["id"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes[1]["endpoint"] is None
    assert nodes[1]["endpoints"] == [
        {"listener": "SASL_SSL", "protocol": "SASL_SSL", "host": "10.0.0.1", "port": 9094}
    ]
    assert [(e["listener"], e["protocol"]) for e in nodes[2]["endpoints"]] == [
        ("PLAINTEXT", "PLAINTEXT"),
        ("INTERNAL", "SSL"),
    ]
    assert main(["cluster", "describe", "--zk", zk_connect]) == 0
    text = capsys.readouterr().out
    assert "SASL_SSL://10.0.0.1:9094" in text
    assert "PLAINTEXT://10.0.0.2:9092,INTERNAL://10.0.0.2:9093 (SSL)" in text
