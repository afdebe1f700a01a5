"""Members joining and leaving (1 -> 10 -> 3) in both modes converge with every partition owned exactly once, and
no member ever believes it owns a partition whose owner znode is not its own (checked at every observation)."""

from __future__ import annotations

import pytest

from zkcoord.legacy import paths
from zkcoord.legacy.rebalance import TopicPartition
from zkcoord.testing import wait_for
from zkcoord.zk.member import DuplicateConsumerId, LegacyConsumer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_join_and_leave_converge(zk, kit, member_factory, mode):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 24)
    kit.make_topic(zk, "u", 7)
    topics = {"t": 24, "u": 7}
    obs = kit.Observer(zk, "g", topics)
    history = kit.OwnerHistory(zk, "g")
    history.watch("t", 24)
    history.watch("u", 7)
    n = 0

    def join(k: int) -> None:
        nonlocal n
        for _ in range(k):
            # Mixed stream counts and subscriptions: range per topic.
            subs = {"t": 1 + n % 2} if n % 3 else {"t": 1, "u": 1}
            obs.members.append(member_factory("g", subs, consumer_id=f"c{n}", mode=mode))
            n += 1

    def converge(timeout: float, what: str) -> None:
        obs.wait_converged(timeout, what)
        # Settled: one more observation compares every partition's believed owner with its znode. (The
        # observations during the rebalance check only what members hold at that instant, which varies with load.)
        before = obs.checked
        obs.observe()
        assert obs.checked - before == 31, what

    join(1)  # c0 subscribes to both topics: from here on every one of the 31 partitions has an owner
    converge(20, "1 member")
    for batch in (2, 3, 4):  # 3, 6, 10 members, several joining at once
        join(batch)
        converge(30, f"{n} members")
    assert len([m for m in obs.members if not m._closed]) == 10
    for leaving in ([0, 4, 7], [1, 2, 5, 9]):  # leave: the first in order, some in the middle, the last
        for i in leaving:
            obs.members[i].close()
        converge(30, f"after {leaving} left")
    live = [m for m in obs.members if not m._closed]
    assert len(live) == 3
    owned = [tp for m in live for tp in m.owned()]
    assert len(owned) == len(set(owned)) == 31
    for tp, seq in history.events.items():
        assert len(seq) >= 3, f"too few owner events seen for {tp}: {seq}"
    # Every change of owner went through a deletion: never one owner znode replaced by another's.
    assert history.direct_handovers() == []


def test_duplicate_consumer_id_is_rejected_at_once(zk, kit, member_factory):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 2)
    first = member_factory("g", {"t": 1}, consumer_id="same")
    with pytest.raises(DuplicateConsumerId, match="another ZooKeeper session"):
        member_factory("g", {"t": 1}, consumer_id="same")
    _data, stat = zk.get(paths.id_path("g", "g_same"))
    assert stat.ephemeralOwner == first.session


def test_faithful_rolls_back_a_partial_claim_and_gives_up(zk, kit, member_factory, zk_client_factory):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 6)
    squatter = zk_client_factory()
    squatter.create(paths.owner_path("g", "t", 4), b"g_other-0", ephemeral=True, makepath=True)
    m = member_factory(
        "g", {"t": 1}, consumer_id="c", mode="faithful", rebalance_max_retries=3, rebalance_backoff_ms=20
    )
    wait_for(lambda: m.stats.gave_up == 1, 10, "the faithful member to give up")
    assert m.stats.attempts == 3
    assert "can't rebalance after 3 retries" in (m.stats.last_error or "")
    # Rollback: nothing of the member is left; the squatter's node is intact; the member idles (KAFKA-4228).
    assert kit.owners(zk, "g", "t") == {4: ("g_other-0", squatter.client_id[0])}
    assert m.owned() == {}


def test_fast_waits_for_the_conflicting_owner_then_owns_its_share(zk, kit, member_factory, zk_client_factory):
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 6)
    squatter = zk_client_factory()
    squatter.create(paths.owner_path("g", "t", 4), b"g_other-0", ephemeral=True, makepath=True)
    obs = kit.Observer(zk, "g", {"t": 6})
    m = member_factory("g", {"t": 1}, consumer_id="c", mode="fast", claim_wait_ms=30000)
    obs.members.append(m)
    wait_for(lambda: m.stats.claim_waits >= 1, 10, "the fast member to wait on the conflict")
    assert m.owned() == {}
    assert set(kit.owners(zk, "g", "t")) == {4}  # the multi-op claimed nothing
    squatter.delete(paths.owner_path("g", "t", 4))
    obs.wait_converged(10, "the member to own all 6")
    assert set(m.owned()) == {TopicPartition("t", p) for p in range(6)}
    assert m.stats.gave_up == 0


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_rebalance_listener_callbacks(zk, kit, zk_connect, mode):
    from zkcoord.legacy.config import LegacyConsumerConfig

    kit.register_broker(zk)
    kit.make_topic(zk, "t", 3)
    calls = []

    class Listener:
        def before_release(self, consumer_id, partitions):
            calls.append(("release", consumer_id, dict(partitions)))

        def after_claim(self, consumer_id, assignment):
            calls.append(("claim", consumer_id, dict(assignment)))

    cfg = LegacyConsumerConfig(
        group_id="g", zookeeper_connect=zk_connect, consumer_id="a", auto_commit_enable=False, mode=mode
    )
    with LegacyConsumer(cfg, {"t": 1}, listener=Listener()) as a:
        wait_for(lambda: a.is_stable() and len(a.owned()) == 3, 10, "a owns all")
        kit.make_topic(zk, "t", 4)  # partition added: the topic data watch rebalances
        wait_for(lambda: a.is_stable() and len(a.owned()) == 4, 10, "a owns the new partition")
    claims = [c for c in calls if c[0] == "claim"]
    releases = [c for c in calls if c[0] == "release"]
    assert claims[0][2] == {TopicPartition("t", p): "g_a-0" for p in range(3)}
    assert claims[-1][2] == {TopicPartition("t", p): "g_a-0" for p in range(4)}
    if mode == "faithful":  # eager, as the original: everything released before the new share is claimed
        assert releases and releases[0][2] == {"t": frozenset({0, 1, 2})}
    else:  # incremental hand-over: partitions that stay with a are never released
        assert releases == []
        assert a.stats.kept_partitions >= 3  # (the first topic watch may add a rebalance that keeps all)
