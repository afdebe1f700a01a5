"""Incremental hand-over of fast-mode legacy members against real ZooKeeper: a join, a leave, a crash or a
partition increase never deletes and re-creates the owner znode of a partition whose holder stays (sampled
every 10 ms with its czxid), the holder goes on handing out its records throughout (no pause, no fetch
restart), no partition is ever held twice; faithful members in the same group still release everything."""

from __future__ import annotations

import threading
import time

import pytest

from zkcoord.legacy.rebalance import TopicPartition
from zkcoord.testing import wait_for
from zkcoord.testing.handover import HandoverSampler, legacy_holdings
from zkcoord.zk.member import LegacyConsumer

pytestmark = pytest.mark.integration

TOPIC = "t"


class Reader:
    """Iterates a member on its own thread (paced, so four of them stay light) and records what it hands
    out: (partition, offset) in order."""

    def __init__(self, member: LegacyConsumer) -> None:
        self.member = member
        self.got: list[tuple[TopicPartition, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.member._closed:
            msg = self.member.next_message(0.05)
            if msg is not None:
                self.got.append((TopicPartition(msg.topic, msg.partition), msg.offset))
            self._stop.wait(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def offsets(self, tp: TopicPartition) -> list[int]:
        return [o for t, o in list(self.got) if t == tp]


def check_change(sampler, obs, before: int, what: str) -> dict[TopicPartition, str]:
    """After a change converged: what stayed with its holder, checked for znode re-creation and pauses."""
    obs.wait_converged(30, what)
    sampler.wait_samples(3, 10)
    kept = sampler.kept_through(before, len(sampler.samples) - 1)
    assert sampler.recreated_by_same_holder() == [], what
    assert sampler.held_twice() == [], what
    return kept


def test_fast_members_never_release_what_stays(zk, kit, member_factory):
    kit.register_broker(zk)
    kit.make_topic(zk, TOPIC, 12)
    obs = kit.Observer(zk, "g", {TOPIC: 12})
    members = obs.members

    readers: dict[str, Reader] = {}

    def join(name: str):
        m = member_factory("g", {TOPIC: 1}, consumer_id=name, fetcher_factory=kit.FakeFetcher)
        members.append(m)
        readers[name] = Reader(m)
        return m

    a, b = join("a"), join("b")
    obs.wait_converged(30, "a and b")
    live = lambda: [m for m in members if not m._closed]  # noqa: E731

    with HandoverSampler(zk, "g", {TOPIC: 12}, holdings=legacy_holdings_of(live)) as sampler:
        # c joins: range over a, b, c gives a 0-3 (keeps them), b 4-7 (keeps 6, 7), c 8-11.
        start = len(sampler.samples) - 1
        c = join("c")
        kept = check_change(sampler, obs, start, "c joined")
        assert sorted(kept.items()) == [
            *((TopicPartition(TOPIC, p), "g_a") for p in range(4)),
            *((TopicPartition(TOPIC, p), "g_b") for p in (6, 7)),
        ]
        # b leaves: a 0-5 (keeps 0-3), c 6-11 (keeps 8-11).
        start = len(sampler.samples) - 1
        b.close()
        kept = check_change(sampler, obs, start, "b left")
        assert len(kept) == 8
        # Partition increase 12 -> 16: a 0-7, c 8-15: a keeps 0-5, c keeps 8-11.
        start = len(sampler.samples) - 1
        kit.make_topic(zk, TOPIC, 16)
        obs.topics[TOPIC] = 16
        kept = check_change(sampler, obs, start, "partition increase")
        assert sorted(tp.partition for tp in kept) == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]
        # d joins, gets a share, then crashes: its ZooKeeper session ends without any release (a live member
        # whose session expires registers again, which is a join, not a crash).
        d = join("d")
        obs.wait_converged(30, "d joined")
        sampler.wait_samples(3, 10)
        start = len(sampler.samples) - 1
        d.client.stop()
        members.remove(d)
        kept = check_change(sampler, obs, start, "d crashed")
        assert kept
        # No member stopped handing out a partition it kept (the view samples are a consistent cut).
        assert sampler.holding_gaps() == []
        assert sampler.median_interval_s() <= 0.02, sampler.median_interval_s()
    for r in readers.values():
        r.stop()
    assert a.stats.kept_partitions > 0 and c.stats.kept_partitions > 0
    # a kept 0-3 through every change: it handed out each of their records once, in order, from offset 0
    # (no offset re-read: nothing was committed, so a re-read would have restarted at 0 and repeated).
    for p in range(4):
        got = readers["a"].offsets(TopicPartition(TOPIC, p))
        assert got == list(range(len(got))) and len(got) > 10, (p, got[:20])


def legacy_holdings_of(live):
    def read():
        return legacy_holdings(live())()

    return read


def test_a_group_mixing_fast_and_faithful_members_stays_correct(zk, kit, member_factory):
    """Faithful members (like unmodified 0.8 ones) still release everything; fast members keep what stays and
    wait on the owner znodes of what moves to them, exactly as before."""
    kit.register_broker(zk)
    kit.make_topic(zk, TOPIC, 12)
    obs = kit.Observer(zk, "g", {TOPIC: 12})
    members = obs.members

    def join(name: str, mode: str) -> LegacyConsumer:
        m = member_factory("g", {TOPIC: 1}, consumer_id=name, mode=mode, fetcher_factory=kit.FakeFetcher)
        members.append(m)
        return m

    join("a", "fast")
    f = join("f", "faithful")
    obs.wait_converged(30, "a and f")
    with HandoverSampler(zk, "g", {TOPIC: 12}, holdings=legacy_holdings_of(lambda: list(members))) as sampler:
        # b joins: a 0-3 (kept), b 4-7, f 8-11 (stays with f, but f is eager: released and claimed again).
        start = len(sampler.samples) - 1
        join("b", "fast")
        obs.wait_converged(30, "b joined")
        sampler.wait_samples(3, 10)
        end = len(sampler.samples) - 1
        assert sorted(tp.partition for tp in sampler.kept_through(start, end)) == [0, 1, 2, 3]
        recreated = sampler.recreated_by_same_holder()
        assert sorted(tp.partition for tp, _holder, _a, _b in recreated) == [8, 9, 10, 11]
        assert {holder for _tp, holder, _a, _b in recreated} == {"g_f"}
        # f leaves: a 0-5 (keeps 0-3), b 6-11 (keeps 6, 7; waits for f's 8-11 to be deleted).
        start = end
        f.close()
        members.remove(f)
        obs.wait_converged(30, "f left")
        sampler.wait_samples(3, 10)
        kept = sampler.kept_through(start, len(sampler.samples) - 1)
        assert sorted(tp.partition for tp in kept) == [0, 1, 2, 3, 6, 7]
        assert len(sampler.recreated_by_same_holder()) == 4  # still only f's, from the join
        assert sampler.held_twice() == []


def test_a_partition_moving_between_threads_of_one_member_is_retagged_not_released(zk, kit, member_factory):
    """Multi-stream members: range over threads moves partitions between one member's threads as others come
    and go; the owner znode stays (same czxid) and only its payload changes to the new thread id."""
    kit.register_broker(zk)
    kit.make_topic(zk, TOPIC, 8)
    obs = kit.Observer(zk, "g", {TOPIC: 8})
    members = obs.members
    a = member_factory("g", {TOPIC: 2}, consumer_id="a", fetcher_factory=kit.FakeFetcher)
    members.append(a)
    obs.wait_converged(30, "a alone")  # a-0 0-3, a-1 4-7
    with HandoverSampler(zk, "g", {TOPIC: 8}, holdings=legacy_holdings_of(lambda: list(members))) as sampler:
        start = len(sampler.samples) - 1
        members.append(member_factory("g", {TOPIC: 1}, consumer_id="b", fetcher_factory=kit.FakeFetcher))
        # threads a-0, a-1, b-0: a-0 0-2, a-1 3-5, b-0 6-7: 3 stays with a but moves from a-0 to a-1.
        obs.wait_converged(30, "b joined")
        sampler.wait_samples(3, 10)
        end = len(sampler.samples) - 1
        assert sampler.samples[start].owners[TopicPartition(TOPIC, 3)][0] == "g_a-0"
        assert sampler.samples[end].owners[TopicPartition(TOPIC, 3)][0] == "g_a-1"
        assert (
            sampler.samples[start].owners[TopicPartition(TOPIC, 3)][1]
            == sampler.samples[end].owners[TopicPartition(TOPIC, 3)][1]
        )  # the same znode (czxid): rewritten, not re-created
        assert sampler.recreated_by_same_holder() == []
        assert sampler.held_twice() == [] and sampler.holding_gaps() == []


class CommitOnRelease:
    """The 0.8 pattern with auto.commit.enable=false: commit in beforeReleasingPartitions. Records, inside
    the callback, what it was told, the member's positions, and what ZooKeeper then holds for those
    partitions (committed offset, owner znode still there)."""

    def __init__(self, client) -> None:
        self.client = client
        self.member: LegacyConsumer | None = None
        self.calls: list[dict] = []

    def before_release(self, consumer_id, partitions) -> None:
        assert self.member is not None
        positions = self.member.positions()
        committed = self.member.commit_offsets()
        told = sorted(TopicPartition(t, p) for t, ps in partitions.items() for p in ps)
        in_zk = {}
        for tp in told:
            offset = self.client.exists(f"/consumers/g/offsets/{tp.topic}/{tp.partition}")
            data = self.client.get(f"/consumers/g/offsets/{tp.topic}/{tp.partition}")[0] if offset else None
            owner = self.client.exists(f"/consumers/g/owners/{tp.topic}/{tp.partition}")
            in_zk[tp] = (None if data is None else int(data), owner is not None)
        self.calls.append({"told": told, "positions": positions, "committed": committed, "in_zk": in_zk})

    def after_claim(self, consumer_id, assignment) -> None:
        pass


def test_a_listener_committing_before_release_commits_what_moves(zk, kit, member_factory):
    """auto.commit.enable=false, the listener commits in before_release: an incremental hand-over commits the
    partitions that move (no longer handed out, but still visible to commit_offsets/positions) before their
    owner znodes are deleted, nothing of them is handed out after the callback begins, and the new owner
    starts from those offsets."""
    kit.register_broker(zk)
    kit.make_topic(zk, TOPIC, 4)
    obs = kit.Observer(zk, "g", {TOPIC: 4})
    listener = CommitOnRelease(zk)
    a = member_factory("g", {TOPIC: 1}, consumer_id="a", fetcher_factory=kit.FakeFetcher, listener=listener)
    listener.member = a
    obs.members.append(a)
    obs.wait_converged(30, "a alone")
    reader = Reader(a)  # a hands out records throughout the hand-over (nothing committed: auto-commit off)
    wait_for(lambda: len(a.positions()) == 4 and min(a.positions().values()) > 0, 30, "a consuming all four")
    moving = [TopicPartition(TOPIC, 2), TopicPartition(TOPIC, 3)]  # range over a, b: a 0-1, b 2-3

    b = member_factory("g", {TOPIC: 1}, consumer_id="b", fetcher_factory=kit.FakeFetcher)
    obs.members.append(b)
    obs.wait_converged(30, "b joined")
    reader.stop()

    assert len(listener.calls) == 1, listener.calls
    call = listener.calls[0]
    assert call["told"] == moving
    at_release = {tp: call["positions"].get(tp) for tp in moving}
    # Inside before_release: ZooKeeper held the moved partitions' consume positions, committed by the
    # listener, while their owner znodes still existed; positions() still showed them.
    assert all(call["in_zk"][tp][0] for tp in moving), call["in_zk"]  # (offset znode, owner znode exists)
    assert call["in_zk"] == {tp: (at_release[tp], True) for tp in moving}
    assert call["committed"] >= 2
    # Nothing of them was handed out after the callback began (its position is one past the last record).
    for tp in moving:
        got = reader.offsets(tp)
        assert got == list(range(at_release[tp])), (tp, at_release[tp], got[-5:])
    # The new owner starts from them (FakeFetcher would start an uncommitted partition at 0).
    first: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + 30
    while set(first) != set(moving):
        assert time.monotonic() < deadline, first
        msg = b.next_message(0.2)
        if msg is not None:
            first.setdefault(TopicPartition(msg.topic, msg.partition), msg.offset)
    assert first == at_release
