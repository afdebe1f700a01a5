"""Faults: a member's session expiry, a dropped connection and a ZooKeeper leader kill all end with a correct
assignment and no committed offset lost; records are never handed out while fenced."""

from __future__ import annotations

import uuid

import pytest
from kazoo.protocol.states import KazooState

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import decode_offset
from zkcoord.testing import drop_connection, expire_session, wait_for
from zkcoord.zk.session import connect

pytestmark = pytest.mark.integration


def consume(member, n):
    got = []
    while len(got) < n:
        msg = member.next_message(2.0)
        assert msg is not None, "no record within 2 s"
        got.append(msg)
    return got


def stored_offsets(client, group, topic, partitions):
    out = {}
    for p in range(partitions):
        path = paths.offset_path(group, topic, p)
        if client.exists(path):
            out[p] = decode_offset(path, client.get(path)[0])
    return out


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_session_expiry_keeps_assignment_and_offsets(zk, kit, member_factory, mode):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 8)
    obs = kit.Observer(zk, "g", {"t": 8})
    for i in range(3):
        obs.members.append(
            member_factory("g", {"t": 1}, consumer_id=f"c{i}", mode=mode, fetcher_factory=kit.FakeFetcher)
        )
    obs.wait_converged(20)
    for m in obs.members:
        consume(m, 12)
        m.commit_offsets()
    committed = stored_offsets(zk, "g", "t", 8)
    assert len(committed) == 8 and all(o > 0 for o in committed.values())

    victim = obs.members[1]
    old_session = victim.session
    expire_session(victim.client)
    wait_for(lambda: victim.session != old_session, 20, "the victim to register with its new session")
    obs.wait_converged(20, "the group after the expiry")
    after = stored_offsets(zk, "g", "t", 8)
    assert all(after[p] >= committed[p] for p in committed), (committed, after)
    # Every owner starts from the committed offset: the next record of each partition is the committed one.
    for m in obs.members:
        first_seen = {}
        for msg in consume(m, 3 * len(m.owned())):
            first_seen.setdefault(msg.partition, msg.offset)
        for p, first in first_seen.items():
            assert first == after[p], (m.consumer_id, p, first, after[p])


def test_fence_stops_records_before_anything_else(zk, kit, member_factory):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 2)
    m = member_factory("g", {"t": 1}, consumer_id="c", fetcher_factory=kit.FakeFetcher)
    wait_for(lambda: m.is_stable() and len(m.owned()) == 2, 10, "ownership")
    consume(m, 4)
    assert m._buffer, "the fake fetcher keeps records buffered"
    m._on_state(KazooState.SUSPENDED)  # what kazoo reports the moment the connection drops
    assert m.fenced and m.owned() == {}
    assert m.next_message(0) is None  # records were buffered, but none is handed out once fenced
    wait_for(lambda: m.is_stable() and len(m.owned()) == 2, 10, "re-verified ownership")
    assert m.next_message(1.0) is not None
    drop_connection(m.client)  # a real drop: the same session survives, the member re-checks and resumes
    wait_for(lambda: m.is_stable() and len(m.owned()) == 2, 10, "ownership after the drop")
    assert kit.owners(zk, "g", "t") == {0: ("g_c-0", m.session), 1: ("g_c-0", m.session)}


def test_leader_kill_in_ensemble(zk_ensemble, kit, member_factory):
    chroot = f"/legacy-member-{uuid.uuid4().hex[:8]}"
    admin = connect(zk_ensemble.hosts)
    try:
        admin.ensure_path(chroot)
        connect_string = zk_ensemble.hosts + chroot
        zk = connect(connect_string)
        kit.register_broker(zk)
        kit.make_topic(zk, "t", 6)
        obs = kit.Observer(zk, "g", {"t": 6})
        for i in range(3):
            obs.members.append(
                member_factory(
                    "g",
                    {"t": 1},
                    consumer_id=f"c{i}",
                    zookeeper_connect=connect_string,
                    zookeeper_session_timeout_ms=10000,
                    fetcher_factory=kit.FakeFetcher,
                )
            )
        obs.wait_converged(20)
        for m in obs.members:
            consume(m, 9)
            m.commit_offsets()
        committed = stored_offsets(zk, "g", "t", 6)
        assert len(committed) == 6
        zk_ensemble.kill_node(zk_ensemble.leader())
        obs.wait_converged(40, "the group after the leader kill")
        assert stored_offsets(zk, "g", "t", 6) == committed
        for m in obs.members:
            consume(m, 3 * len(m.owned()))
            m.commit_offsets()
        after = stored_offsets(zk, "g", "t", 6)
        assert all(after[p] > committed[p] for p in committed), (committed, after)
        for m in obs.members:
            m.close()
        zk.stop()
        zk.close()
    finally:
        admin.delete(chroot, recursive=True)
        admin.stop()
        admin.close()
