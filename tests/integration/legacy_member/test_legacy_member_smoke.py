"""Smoke: registration payload, convergence of a few members."""

from __future__ import annotations

import json

import pytest

from zkcoord.legacy import paths

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_three_members_converge(zk, kit, member_factory, mode):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 10)
    obs = kit.Observer(zk, "g", {"t": 10})
    for i in range(3):
        obs.members.append(member_factory("g", {"t": 1}, consumer_id=f"c{i}", mode=mode))
    obs.wait_converged(20)
    data, stat = zk.get(paths.id_path("g", "g_c0"))
    doc = json.loads(data)
    assert list(doc) == ["version", "subscription", "pattern", "timestamp"]
    assert data == b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"%d"}' % int(
        doc["timestamp"]
    )
    assert stat.ephemeralOwner == obs.members[0].session
    assert obs.checked > 0
