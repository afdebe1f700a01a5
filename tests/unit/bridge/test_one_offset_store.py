"""One rule for "the per-partition max of both stores" (`max_of_stores`), shared by the dual-commit fetch, the
never-regress merge and the coordinator mirror's fetch; and the one offset-store protocol's write mode: a
`Fenced` mode reaches the ZooKeeper store only, and the versions it leaves come back in the result."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.bridge import policy
from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.bridge.committer import DualCommitter
from zkcoord.bridge.mirror import merge_fetch
from zkcoord.bridge.policy import Store, StoreRead, StoreReply, TopicPartition
from zkcoord.group.messages import OffsetFetchResponse, OffsetFetchResponsePartition, OffsetFetchResponseTopic
from zkcoord.zk.offset_store import Fenced, OffsetsRead, OffsetWriteMode, WriteMode

ZK, BR = Store.ZOOKEEPER, Store.BROKER
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)

offset = st.one_of(st.none(), st.integers(-3, 9))


def test_max_of_stores_examples() -> None:
    assert policy.max_of_stores(5, 7) == 7
    assert policy.max_of_stores(7, 5) == 7
    assert policy.max_of_stores(None, 3) == 3
    assert policy.max_of_stores(3, None) == 3
    assert policy.max_of_stores(0, -1) == 0  # -1 is "none committed", not a position
    assert policy.max_of_stores(-1, None) is None
    assert policy.max_of_stores(None, None) is None


@given(offset, offset)
def test_max_of_stores_is_the_highest_position(zk: int | None, br: int | None) -> None:
    positions = [o for o in (zk, br) if o is not None and o >= 0]
    assert policy.max_of_stores(zk, br) == (max(positions) if positions else None)
    assert policy.max_of_stores(zk, br) == policy.max_of_stores(br, zk)


tps = st.builds(TopicPartition, st.sampled_from("ab"), st.integers(0, 3))
offsets = st.dictionaries(tps, st.integers(-1, 9), max_size=8)


@settings(max_examples=200, deadline=None)
@given(offsets, offsets)
def test_the_three_merges_are_one_rule(
    zk: dict[TopicPartition, int], coord: dict[TopicPartition, int]
) -> None:
    expected = {
        tp: best
        for tp in zk.keys() | coord.keys()
        if (best := policy.max_of_stores(zk.get(tp), coord.get(tp))) is not None
    }
    assert policy.max_merge(zk, coord) == expected
    fetched = policy.combine_fetch(
        zk.keys() | coord.keys(), [StoreRead(ZK, offsets=zk), StoreRead(BR, offsets=coord)]
    )
    assert fetched.offsets() == expected
    # The coordinator's OffsetFetch answer (-1: none committed) merged with ZooKeeper's znodes.
    by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
    for tp in sorted(coord):
        by_topic.setdefault(tp.topic, []).append(
            OffsetFetchResponsePartition(tp.partition, coord[tp], 3, "m", 0)
        )
    resp = OffsetFetchResponse(0, tuple(OffsetFetchResponseTopic(t, tuple(ps)) for t, ps in by_topic.items()))
    merged, _ = merge_fetch(resp, OffsetsRead({tp: o for tp, o in zk.items() if o >= 0}), all_partitions=True)
    answered = {
        TopicPartition(t.name, p.partition_index): p.committed_offset
        for t in merged.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }
    assert answered == expected


# ------------------------------------------------------------------------------- the write mode and versions


class ModeRecordingStore:
    def __init__(self, store: Store, versions: Mapping[TopicPartition, int] | None = None) -> None:
        self.store = store
        self.versions = dict(versions or {})
        self.modes: list[OffsetWriteMode | None] = []

    def write_offsets(
        self, offsets: Mapping[TopicPartition, int], mode: OffsetWriteMode | None = None
    ) -> StoreReply:
        self.modes.append(mode)
        written = {tp: self.versions[tp] for tp in offsets if tp in self.versions}
        return StoreReply.of(self.store, dict.fromkeys(offsets), written)

    def read_offsets(self, partitions: object = None) -> StoreRead:
        return StoreRead(self.store, offsets={T0: 4}, versions=dict(self.versions))


def test_the_write_mode_reaches_the_zookeeper_store_only_and_its_versions_come_back() -> None:
    zk, br = ModeRecordingStore(ZK, {T0: 3, T1: 0}), ModeRecordingStore(BR)
    committer = DualCommitter(zk, br, policy.CommitOrder.BROKER_FIRST)
    fence = Fenced({T0: 2})
    result = committer.commit({T0: 10, T1: 11}, fence)
    assert zk.modes == [fence] and br.modes == [None]
    assert result.committed and dict(result.versions) == {T0: 3, T1: 0}
    assert committer.commit({T0: 12}).committed
    assert zk.modes[-1] is None  # no mode given: the store's own
    assert committer.fetch([T0]).versions == {T0: 3, T1: 0}


def test_combine_commit_takes_the_versions_of_the_zookeeper_reply_only() -> None:
    cfg = policy.BridgeConfig(policy.OffsetsStorage.KAFKA, True, policy.CommitOrder.ZOOKEEPER_FIRST)
    plan = policy.plan_commit(cfg, {T0: 1, T1: 2})
    stale = policy.StoreError(ZK, "BAD_VERSION", "written by someone else since this member read it")
    replies = {
        ZK: StoreReply.of(ZK, {T0: None, T1: stale}, {T0: 7}),
        BR: StoreReply.of(BR, {T0: None}, {T0: 99}),
    }
    result = policy.combine_commit(plan, replies, cfg.primary)
    assert dict(result.versions) == {T0: 7}
    assert [(o.store, o.tp, o.status) for o in result.outcomes] == [
        (ZK, T0, "written"),
        (ZK, T1, "failed"),
        (BR, T0, "written"),
        (BR, T1, "skipped"),
    ]
    assert not result.retriable  # a fenced refusal is final: the partition is someone else's now


@pytest.mark.parametrize("mode", [Fenced({}), WriteMode.NEVER_REGRESS])
def test_the_broker_store_refuses_a_write_mode_it_cannot_honour(mode: OffsetWriteMode) -> None:
    store = BrokerOffsetStore("127.0.0.1:1", "g", admin_factory=_no_admin)
    with pytest.raises(ValueError, match="only overwrites"):
        store.write_offsets({T0: 1}, mode)


def _no_admin(*args: object, **kwargs: object) -> object:
    raise AssertionError("a refused mode must not reach the broker")
