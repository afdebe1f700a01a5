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
        assert desc["nodes"] == [{"id": 3, "version": 4, "endpoint": "127.0.0.1:9093"}]
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
