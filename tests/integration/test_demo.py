"""`zkcoord demo`, the README's main job, runs from nothing and shows the group forming and rebalancing."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_demo_starts_its_own_zookeeper_and_consumes_everything() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "zkcoord", "demo", "--records", "120", "--partitions", "4"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "starting a local ZooKeeper" in out
    assert "after b and c joined" in out
    assert "consumed 120 of 120 records" in out
    # Nothing of the demo's is left: its ZooKeeper port is closed and no node runs on its data directory.
    port = int(out.split("ZooKeeper serving at 127.0.0.1:")[1].split()[0])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the demo's ZooKeeper still listens"
    nodes = subprocess.run(["pgrep", "-f", "zkcoord-demo-"], capture_output=True, text=True).stdout
    assert nodes.strip() == "", f"demo node processes left: {nodes}"
