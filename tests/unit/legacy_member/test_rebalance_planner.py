"""The pure rebalance planner and offset-commit planner: exhaustive small cases and hypothesis properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.legacy import assign
from zkcoord.legacy.codecs import ConsumerRegistration, SubscriptionPattern
from zkcoord.legacy.ids import utf16_key
from zkcoord.legacy.rebalance import (
    GroupSnapshot,
    TopicPartition,
    batch_by_size,
    claim_payloads,
    op_size,
    plan_offset_commit,
    plan_rebalance,
    resolve_subscriptions,
)


def snapshot(members: dict[str, dict[str, int]], topics: dict[str, int], all_topics=()) -> GroupSnapshot:
    regs = tuple((cid, ConsumerRegistration.static(sub, timestamp_ms=1)) for cid, sub in members.items())
    parts = tuple((t, tuple(range(n))) for t, n in topics.items())
    return GroupSnapshot(regs, parts, tuple(all_topics))


def test_kafka_documented_range_example():
    snap = snapshot({"C1": {"t": 2}, "C2": {"t": 2}}, {"t": 5})
    plan = plan_rebalance(consumer_id="C1", snapshot=snap, owned=(), strategy="range")
    assert [(c.tp.partition, c.thread_id) for c in plan.claims] == [(0, "C1-0"), (1, "C1-0"), (2, "C1-1")]
    assert plan.fetch_offsets == tuple(TopicPartition("t", p) for p in (0, 1, 2))
    assert plan.my_topics == ("t",)
    assert claim_payloads("g", plan.claims)[0] == ("/consumers/g/owners/t/0", b"C1-0")


def test_release_all_is_eager_and_sorted():
    snap = snapshot({"a": {"t": 1}}, {"t": 3})
    owned = [TopicPartition("t", 2), TopicPartition("t", 10), TopicPartition("s", 1)]
    plan = plan_rebalance(consumer_id="a", snapshot=snap, owned=owned, strategy="range")
    assert plan.release == (TopicPartition("s", 1), TopicPartition("t", 2), TopicPartition("t", 10))
    assert plan.owned_after == frozenset(TopicPartition("t", p) for p in range(3))


def test_missing_topic_and_empty_subscription_own_nothing():
    snap = snapshot({"a": {"gone": 1}, "b": {}}, {})
    for me in ("a", "b"):
        plan = plan_rebalance(consumer_id=me, snapshot=snap, owned=(), strategy="range")
        assert plan.claims == () and plan.assignment == ()


def test_wildcard_members_resolve_against_all_topics():
    wild = ConsumerRegistration.wildcard("t.*", 2, pattern=SubscriptionPattern.WHITE_LIST, timestamp_ms=1)
    static = ConsumerRegistration.static({"tx": 1}, timestamp_ms=1)
    snap = GroupSnapshot(
        (("w", wild), ("s", static)),
        (("tx", (0, 1, 2)), ("ty", (0,)), ("__consumer_offsets", (0,))),
        ("tx", "ty", "__consumer_offsets", "other"),
    )
    subs = resolve_subscriptions(snap, exclude_internal_topics=True)
    assert subs == {"s": {"tx": 1}, "w": {"tx": 2, "ty": 2}}
    plan = plan_rebalance(consumer_id="w", snapshot=snap, owned=(), strategy="range")
    assert plan.my_topics == ("tx", "ty")
    assert {c.tp for c in plan.claims} <= {TopicPartition("tx", p) for p in range(3)} | {
        TopicPartition("ty", 0)
    }


def test_roundrobin_082_requires_identical_subscriptions():
    snap = snapshot({"a": {"t": 1, "u": 1}, "b": {"t": 1}}, {"t": 2, "u": 2})
    with pytest.raises(ValueError, match="Round-robin"):
        plan_rebalance(
            consumer_id="a", snapshot=snap, owned=(), strategy="roundrobin", roundrobin_generation="0.8.2"
        )
    plan = plan_rebalance(consumer_id="a", snapshot=snap, owned=(), strategy="roundrobin")
    assert plan.claims


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_exhaustive_small_groups_partition_exactly_once(strategy):
    """Every group of 1-4 members with 1-2 streams over 0-6 partitions: the members' plans cover each
    partition exactly once and agree with the global assignment each computed."""
    for n_members, n_parts in itertools.product(range(1, 5), range(7)):
        for streams in itertools.product((1, 2), repeat=n_members):
            members = {f"c{i}": {"t": s} for i, s in enumerate(streams)}
            snap = snapshot(members, {"t": n_parts})
            plans = [
                plan_rebalance(consumer_id=cid, snapshot=snap, owned=(), strategy=strategy) for cid in members
            ]
            claimed = [c.tp for p in plans for c in p.claims]
            assert sorted(claimed) == [TopicPartition("t", p) for p in range(n_parts)]
            assert len({p.assignment for p in plans}) == 1


members_st = st.dictionaries(
    st.sampled_from(["a", "b", "c-1", "c-10", "c-2", "z", "ä"]),
    st.dictionaries(st.sampled_from(["t", "u", "v"]), st.integers(1, 3), max_size=3),
    min_size=1,
    max_size=6,
)
topics_st = st.dictionaries(st.sampled_from(["t", "u", "v"]), st.integers(0, 12), max_size=3)


@settings(max_examples=200, deadline=None)
@given(members=members_st, topics=topics_st, strategy=st.sampled_from(["range", "roundrobin"]))
def test_plans_are_a_partition_of_the_assignment(members, topics, strategy):
    snap = snapshot(members, topics)
    plans = {
        cid: plan_rebalance(consumer_id=cid, snapshot=snap, owned=(), strategy=strategy) for cid in members
    }
    expected = assign(strategy, members, {t: list(range(n)) for t, n in topics.items()})
    union: dict[tuple[str, int], str] = {}
    for cid, plan in plans.items():
        for claim in plan.claims:
            key = (claim.tp.topic, claim.tp.partition)
            assert key not in union
            assert claim.thread_id.rsplit("-", 1)[0] == cid
            assert claim.tp.topic in members[cid]
            union[key] = claim.thread_id
        keys = [(utf16_key(tp.topic), tp.partition) for tp, _ in plan.assignment]
        assert keys == sorted(keys)
    assert union == expected
    # Order independence: the snapshot's registration order does not matter.
    reversed_snap = GroupSnapshot(tuple(reversed(snap.registrations)), snap.topic_partitions)
    for cid in members:
        assert (
            plan_rebalance(consumer_id=cid, snapshot=reversed_snap, owned=(), strategy=strategy) == plans[cid]
        )


def test_offset_commit_skips_unchanged_and_orders():
    tp = TopicPartition
    consumed = {tp("u", 0): 5, tp("t", 10): 7, tp("t", 2): 3}
    checkpoints = {tp("u", 0): 5, tp("t", 10): 6}
    writes = plan_offset_commit("g", consumed, checkpoints, existing=frozenset({tp("t", 10)}))
    assert [(w.path, w.data, w.create) for w in writes] == [
        ("/consumers/g/offsets/t/2", b"3", True),
        ("/consumers/g/offsets/t/10", b"7", False),
    ]
    assert plan_offset_commit("g", {tp("t", 0): 1}, {tp("t", 0): 1}) == ()


@given(sizes=st.lists(st.integers(1, 500), max_size=60), budget=st.integers(1, 2000))
def test_batches_keep_order_and_budget(sizes, budget):
    batches = batch_by_size(list(enumerate(sizes)), lambda item: item[1], budget)
    assert [i for batch in batches for i, _ in batch] == list(range(len(sizes)))
    for batch in batches:
        assert sum(s for _, s in batch) <= budget or len(batch) == 1
        assert batch


def test_thousand_offsets_fit_in_few_requests_under_1mib():
    consumed = {TopicPartition("topic", p): 10**12 + p for p in range(1000)}
    writes = plan_offset_commit("group", consumed, {})
    batches = batch_by_size(writes, lambda w: op_size(w.path, w.data), 512 * 1024)
    assert len(batches) == 1
    small = batch_by_size(writes, lambda w: op_size(w.path, w.data), 8 * 1024)
    assert len(small) > 10 and all(sum(op_size(w.path, w.data) for w in b) <= 8 * 1024 for b in small)
    with pytest.raises(ValueError):
        batch_by_size(writes, len, 0)


def test_a_reset_position_over_a_missing_offset_is_written():
    # No stored offset: checkpoint -1. The member's consume position after auto.offset.reset is written
    # even though no record was consumed (the original commits every consume offset that moved).
    tp = TopicPartition
    writes = plan_offset_commit("g", {tp("t", 0): 40, tp("t", 1): 7}, {tp("t", 0): -1, tp("t", 1): 7})
    assert [(w.path, w.data) for w in writes] == [("/consumers/g/offsets/t/0", b"40")]


# --- incremental hand-over (fast mode) -----------------------------------------------------------------------


def test_incremental_keeps_what_stays_and_releases_only_what_moves():
    # a held all six with one stream; b joins: range gives a 0-2 and b 3-5.
    snap = snapshot({"a": {"t": 1}, "b": {"t": 1}}, {"t": 6})
    held = {TopicPartition("t", p): "a-0" for p in range(6)}
    plan = plan_rebalance(consumer_id="a", snapshot=snap, owned=held, strategy="range", keeping=held)
    assert [c.tp.partition for c in plan.keep] == [0, 1, 2]
    assert [tp.partition for tp in plan.release] == [3, 4, 5]
    assert plan.claims == () and plan.fetch_offsets == ()
    assert plan.owned_after == frozenset(TopicPartition("t", p) for p in range(3))
    assert plan.by_topic() == {"t": (0, 1, 2)}
    # The same group, eager: everything released, the whole share claimed and its offsets read.
    eager = plan_rebalance(consumer_id="a", snapshot=snap, owned=held, strategy="range")
    assert eager.keep == () and len(eager.release) == 6 and len(eager.claims) == 3
    assert eager.owned_after == plan.owned_after


def test_incremental_claims_only_new_partitions_and_retags_a_changed_thread_id():
    # a (2 streams) holds 0 as a-0 and 1, 3 as a-1; range over the threads a-0, a-1, c-0 now gives
    # a-0 {0, 1}, a-1 {2}, c-0 {3}.
    snap = snapshot({"a": {"t": 2}, "c": {"t": 1}}, {"t": 4})
    held = {TopicPartition("t", 0): "a-0", TopicPartition("t", 1): "a-1", TopicPartition("t", 3): "a-1"}
    plan = plan_rebalance(consumer_id="a", snapshot=snap, owned=held, strategy="range", keeping=held)
    assert {c.tp.partition: c.thread_id for c in plan.keep} == {0: "a-0", 1: "a-0"}
    # 1 stays with a under another thread id: kept, its owner payload rewritten in place (never released).
    assert [(c.tp.partition, c.thread_id) for c in plan.retag] == [(1, "a-0")]
    assert [tp.partition for tp in plan.release] == [3]
    assert [(c.tp.partition, c.thread_id) for c in plan.claims] == [(2, "a-1")]
    assert plan.fetch_offsets == (TopicPartition("t", 2),)


@settings(max_examples=200, deadline=None)
@given(
    members=members_st,
    topics=topics_st,
    strategy=st.sampled_from(["range", "roundrobin"]),
    held=st.dictionaries(
        st.tuples(st.sampled_from(["t", "u", "v", "w"]), st.integers(0, 13)),
        st.sampled_from(["-0", "-1", "-2"]),
        max_size=20,
    ),
)
def test_incremental_plan_is_the_eager_share_split_into_keep_and_claim(members, topics, strategy, held):
    snap = snapshot(members, topics)
    for cid in members:
        keeping = {TopicPartition(t, p): cid + suffix for (t, p), suffix in held.items()}
        inc = plan_rebalance(consumer_id=cid, snapshot=snap, owned=(), strategy=strategy, keeping=keeping)
        eager = plan_rebalance(consumer_id=cid, snapshot=snap, owned=keeping, strategy=strategy)
        assert inc.assignment == eager.assignment
        assert sorted(inc.keep + inc.claims, key=lambda c: c.tp) == sorted(eager.claims, key=lambda c: c.tp)
        kept = {c.tp for c in inc.keep}
        assert kept == set(keeping) & {c.tp for c in eager.claims}  # everything that stays with me is kept
        assert {c.tp for c in inc.retag} == {c.tp for c in inc.keep if keeping[c.tp] != c.thread_id}
        assert kept.isdisjoint(inc.release) and kept | set(inc.release) == set(keeping)
        assert kept.isdisjoint(inc.fetch_offsets)  # a kept partition's offset is never read again
        assert {c.tp for c in inc.claims} == set(inc.fetch_offsets)


# --- fast mode's make-before-break exit ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    legacy=st.sets(st.sampled_from(["g_a", "g_m", "g_z", "g_host-1"]), max_size=3),
    classic=st.sets(st.integers(0, 5), max_size=3),
    n_parts=st.integers(1, 9),
    owned=st.sets(st.integers(0, 8)),
    strategy=st.sampled_from(["range", "roundrobin"]),
)
def test_a_leaver_lingers_exactly_on_what_a_broker_protocol_member_gets_next(
    legacy, classic, n_parts, owned, strategy
) -> None:
    from zkcoord.legacy.ids import consumer_of_thread, is_classic_id
    from zkcoord.legacy.rebalance import successors_waiting_on_hints

    reg = ConsumerRegistration.static({"t": 1}, timestamp_ms=0)
    ids = sorted(legacy) + [f"g_classic-{c:016x}" for c in classic]
    me = "g_leaver"
    snap = GroupSnapshot(
        registrations=tuple((cid, reg) for cid in [*ids, me]),
        topic_partitions=(("t", tuple(range(n_parts))),),
    )
    mine = [TopicPartition("t", p) for p in sorted(owned) if p < n_parts]
    linger = successors_waiting_on_hints(
        group="g", consumer_id=me, snapshot=snap, owned=mine, strategy=strategy
    )
    after = assign(strategy, {cid: {"t": 1} for cid in ids}, {"t": tuple(range(n_parts))}) if ids else {}
    expected = [tp for tp in mine if tp in after and is_classic_id("g", consumer_of_thread(after[tp]))]
    assert list(linger) == expected  # the assignment without the leaver, classic successors only
