"""read_members on real ZooKeeper: members by protocol (the "zkcoord" key marks a broker-protocol member) and the
partitions their owner znodes hold."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zkcoord.bridge.membership import MemberView, read_members
from zkcoord.topic_partition import TopicPartition

pytestmark = pytest.mark.integration


def test_members_by_protocol_with_what_they_own(zk: Any) -> None:
    legacy = {"version": 1, "subscription": {"t": 1}, "pattern": "static", "timestamp": "1"}
    classic = {**legacy, "zkcoord": {"protocol": "classic", "member_id": "c-1", "client_id": "c"}}
    zk.create("/consumers/g/ids/g_a", json.dumps(legacy).encode(), makepath=True)
    zk.create("/consumers/g/ids/g_b", json.dumps(classic).encode(), makepath=True)
    zk.create("/consumers/g/owners/t/0", b"g_a-0", makepath=True)
    zk.create("/consumers/g/owners/t/1", b"g_b-0", makepath=True)
    zk.create("/consumers/g/owners/t/2", b"g_b-0", makepath=True)
    assert read_members(zk, "g") == [
        MemberView("g_a", "legacy", (TopicPartition("t", 0),)),
        MemberView("g_b", "classic", (TopicPartition("t", 1), TopicPartition("t", 2))),
    ]
    assert read_members(zk, "nobody") == []
