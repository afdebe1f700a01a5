"""Bridge policy: config semantics, commit plans in both orders, combined results that hide nothing,
fetch = per-partition max with every error, divergence classification. Exhaustive + hypothesis."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.bridge import (
    Agreement,
    BridgeConfig,
    CommitOrder,
    DualCommitter,
    OffsetsStorage,
    Store,
    StoreError,
    StoreRead,
    StoreReply,
    TopicPartition,
    combine_commit,
    combine_fetch,
    disagreements,
    divergence_report,
    explain,
    max_merge,
    plan_commit,
)
from zkcoord.bridge.policy import classify, gated_offsets
from zkcoord.errors import ConfigError

ZK, BR = Store.ZOOKEEPER, Store.BROKER
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


# ------------------------------------------------------------------------------------------ config


def test_dual_commit_defaults_follow_storage_like_0_8_2() -> None:
    assert BridgeConfig(OffsetsStorage.ZOOKEEPER).dual_commit_enabled is False
    assert BridgeConfig(OffsetsStorage.KAFKA).dual_commit_enabled is True
    assert BridgeConfig(OffsetsStorage.KAFKA, False).dual_commit_enabled is False


def test_properties_parsing_lowercases_and_rejects_bad_values() -> None:
    cfg = BridgeConfig.from_properties({"offsets.storage": "KAFKA", "dual.commit.enabled": "false"})
    assert cfg.offsets_storage is OffsetsStorage.KAFKA and cfg.dual_commit_enabled is False
    assert BridgeConfig.from_properties({}).offsets_storage is OffsetsStorage.ZOOKEEPER
    with pytest.raises(ConfigError, match=r"offsets.storage must be 'zookeeper' or 'kafka', not 'hdfs'"):
        BridgeConfig.from_properties({"offsets.storage": "hdfs"})
    with pytest.raises(ConfigError, match=r"dual.commit.enabled must be 'true' or 'false'"):
        BridgeConfig.from_properties({"dual.commit.enabled": "yes"})
    with pytest.raises(ConfigError, match=r"dual.commit.order"):
        BridgeConfig.from_properties({"dual.commit.order": "both"})


@pytest.mark.parametrize(
    ("storage", "dual", "order", "writes", "reads"),
    [
        (OffsetsStorage.ZOOKEEPER, False, CommitOrder.BROKER_FIRST, (ZK,), (ZK,)),
        (OffsetsStorage.ZOOKEEPER, False, CommitOrder.ZOOKEEPER_FIRST, (ZK,), (ZK,)),
        (OffsetsStorage.KAFKA, False, CommitOrder.BROKER_FIRST, (BR,), (BR,)),
        (OffsetsStorage.KAFKA, False, CommitOrder.ZOOKEEPER_FIRST, (BR,), (BR,)),
        (OffsetsStorage.KAFKA, True, CommitOrder.BROKER_FIRST, (BR, ZK), (ZK, BR)),
        (OffsetsStorage.KAFKA, True, CommitOrder.ZOOKEEPER_FIRST, (ZK, BR), (ZK, BR)),
        (OffsetsStorage.ZOOKEEPER, True, CommitOrder.BROKER_FIRST, (BR, ZK), (ZK, BR)),
        (OffsetsStorage.ZOOKEEPER, True, CommitOrder.ZOOKEEPER_FIRST, (ZK, BR), (ZK, BR)),
    ],
)
def test_every_configuration_plans_the_right_stores(
    storage: OffsetsStorage,
    dual: bool,
    order: CommitOrder,
    writes: tuple[Store, ...],
    reads: tuple[Store, ...],
) -> None:
    cfg = BridgeConfig(storage, dual, order)
    plan = plan_commit(cfg, {T1: 5, T0: 3})
    assert plan.stores == writes
    assert cfg.read_stores() == reads
    assert plan.writes[0].gated_by is None
    for before, write in itertools.pairwise(plan.writes):
        assert write.gated_by is before.store
    assert all(w.offsets == ((T0, 3), (T1, 5)) for w in plan.writes)


def test_plan_rejects_bad_offsets_and_accepts_pairs_and_objects() -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA)
    with pytest.raises(ValueError, match="offset for t-0 must be >= 0, not -1"):
        plan_commit(cfg, {T0: -1})
    with pytest.raises(ValueError, match="must be an int"):
        plan_commit(cfg, {T0: "5"})  # type: ignore[dict-item]

    class KafkaTP:
        topic = "t"
        partition = 1

    plan = plan_commit(cfg, {("t", 0): 1, KafkaTP(): 2})
    assert plan.writes[0].offsets == ((T0, 1), (T1, 2))


# ------------------------------------------------------------------------------------------ commit

ERR = StoreError(BR, "NOT_COORDINATOR", "moved", retriable=True)
TOO_LARGE = StoreError(BR, "OFFSET_METADATA_TOO_LARGE", "", retriable=False)


def test_broker_first_writes_zookeeper_only_for_partitions_the_broker_accepted() -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA, True, CommitOrder.BROKER_FIRST)
    plan = plan_commit(cfg, {T0: 10, T1: 20})
    broker = StoreReply.of(BR, {T0: None, T1: ERR})
    assert gated_offsets(plan.writes[1], {BR: broker}) == ((T0, 10),)
    result = combine_commit(plan, {BR: broker, ZK: StoreReply.all_ok(ZK, [T0])}, cfg.primary)
    assert not result.committed and not result.primary_committed
    assert [(o.tp, o.store, o.status) for o in result.outcomes] == [
        (T0, BR, "written"),
        (T1, BR, "failed"),
        (T0, ZK, "written"),
        (T1, ZK, "skipped"),
    ]
    assert result.failures[0].error is ERR
    assert result.skipped[0].error is ERR  # the gate's cause is carried, not hidden
    assert result.written(ZK) == {T0: 10}
    assert result.retriable
    assert any("t-1 offset 20: broker NOT_COORDINATOR" in line for line in result.describe())


def test_zookeeper_first_failure_blocks_broker_and_is_reported() -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA, True, CommitOrder.ZOOKEEPER_FIRST)
    plan = plan_commit(cfg, {T0: 1})
    lost = StoreError(ZK, "ConnectionLoss", "", retriable=True)
    result = combine_commit(plan, {ZK: StoreReply.all_failed(ZK, [T0], lost)}, cfg.primary)
    assert [o.status for o in result.outcomes] == ["failed", "skipped"]
    assert result.skipped[0].error is lost


def test_non_retriable_failure_makes_result_non_retriable() -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA, False)
    plan = plan_commit(cfg, {T0: 1, T1: 2})
    result = combine_commit(plan, {BR: StoreReply.of(BR, {T0: TOO_LARGE, T1: ERR})})
    assert not result.retriable
    assert len(result.failures) == 2


def test_partition_missing_from_a_reply_is_a_failure_not_a_success() -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA, False)
    plan = plan_commit(cfg, {T0: 1, T1: 2})
    result = combine_commit(plan, {BR: StoreReply.of(BR, {T0: None})})
    assert [(o.tp, o.status, o.error.error if o.error else None) for o in result.outcomes] == [
        (T0, "written", None),
        (T1, "failed", "NO_REPLY"),
    ]


outcome = st.sampled_from(["ok", "retriable", "fatal", "absent"])


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 10**6), outcome, outcome), max_size=6),
    st.sampled_from(list(CommitOrder)),
)
def test_combined_result_accounts_for_every_partition_in_every_store(
    cases: dict[int, tuple[int, str, str]], order: CommitOrder
) -> None:
    cfg = BridgeConfig(OffsetsStorage.KAFKA, True, order)
    offsets = {TopicPartition("t", p): off for p, (off, _, _) in cases.items()}
    plan = plan_commit(cfg, offsets)
    first, second = plan.stores

    def reply(store: Store, which: int, sent: Mapping[TopicPartition, int]) -> StoreReply:
        errors: dict[TopicPartition, StoreError | None] = {}
        for tp in sent:
            kind = str(cases[tp.partition][which])
            if kind == "ok":
                errors[tp] = None
            elif kind != "absent":
                errors[tp] = StoreError(store, kind.upper(), retriable=kind == "retriable")
        return StoreReply.of(store, errors)

    replies = {first: reply(first, 1, offsets)}
    replies[second] = reply(second, 2, dict(gated_offsets(plan.writes[1], replies)))
    result = combine_commit(plan, replies, cfg.primary)
    assert len(result.outcomes) == 2 * len(offsets)
    for o in result.outcomes:
        kind_first = cases[o.tp.partition][1]
        if o.store is first:
            assert (o.status == "written") == (kind_first == "ok")
        elif kind_first != "ok":
            assert o.status == "skipped" and o.error is not None
        else:
            assert (o.status == "written") == (cases[o.tp.partition][2] == "ok")
        assert (o.error is None) == (o.status == "written")
    assert result.committed == all(a == "ok" and b == "ok" for _, a, b in cases.values())


# ------------------------------------------------------------------------------------------- fetch


def test_fetch_takes_max_and_keeps_every_error() -> None:
    unknown = StoreError(BR, "UNKNOWN_TOPIC_OR_PARTITION")
    zk = StoreRead(ZK, offsets={T0: 10, T1: 7, T2: 3})
    br = StoreRead(BR, offsets={T0: 12, T1: 5}, errors={T2: unknown})
    result = combine_fetch([T2, T1, T0], [br, zk])
    assert [(p.tp, p.offset, p.source) for p in result.partitions] == [
        (T0, 12, BR),
        (T1, 7, ZK),
        (T2, 3, ZK),
    ]
    # The original forced UNKNOWN_TOPIC_OR_PARTITION to NoError here; zkcoord keeps it next to the value.
    assert result.partitions[2].errors == (unknown,)
    assert result.errors == ((T2, unknown),)
    assert not result.complete
    assert result.offsets() == {T0: 12, T1: 7, T2: 3}


def test_fetch_request_level_error_and_no_offset_anywhere() -> None:
    down = StoreError(BR, "NoBrokersAvailable", retriable=True)
    result = combine_fetch(
        [T0, T1], [StoreRead(ZK, offsets={T0: 4, T1: -1}), StoreRead(BR, request_error=down)]
    )
    assert result.partitions[0] == (T0, 4, ZK, 4, None, (down,))
    assert result.partitions[1] == (T1, None, None, None, None, (down,))


def test_tie_reports_zookeeper_as_source() -> None:
    result = combine_fetch([T0], [StoreRead(ZK, offsets={T0: 5}), StoreRead(BR, offsets={T0: 5})])
    assert result.partitions[0].source is ZK and result.complete


@given(
    st.dictionaries(st.integers(0, 4), st.integers(-1, 100)),
    st.dictionaries(st.integers(0, 4), st.integers(-1, 100)),
)
def test_fetch_is_the_per_partition_max(zk: dict[int, int], br: dict[int, int]) -> None:
    tps = [TopicPartition("t", p) for p in range(5)]
    result = combine_fetch(
        tps,
        [
            StoreRead(ZK, offsets={TopicPartition("t", p): o for p, o in zk.items()}),
            StoreRead(BR, offsets={TopicPartition("t", p): o for p, o in br.items()}),
        ],
    )
    for p in result.partitions:
        candidates = [o for o in (zk.get(p.tp.partition), br.get(p.tp.partition)) if o is not None and o >= 0]
        assert p.offset == (max(candidates) if candidates else None)
    assert result.offsets() == max_merge(
        {TopicPartition("t", p): o for p, o in zk.items()}, {TopicPartition("t", p): o for p, o in br.items()}
    )


# -------------------------------------------------------------------------------------- divergence


def test_classify_every_case() -> None:
    assert classify(5, 5) == (Agreement.AGREE, 0)
    assert classify(7, 5) == (Agreement.ZOOKEEPER_AHEAD, 2)
    assert classify(5, 9) == (Agreement.BROKER_AHEAD, 4)
    assert classify(None, 9) == (Agreement.MISSING_IN_ZOOKEEPER, 0)
    assert classify(5, None) == (Agreement.MISSING_IN_BROKER, 0)
    with pytest.raises(ValueError, match="no offset in either store"):
        classify(None, None)


def test_divergence_report_rows_bounds_and_explanations() -> None:
    report = divergence_report({T0: 5, T1: 10, T2: -1}, {T0: 5, T1: 12, TopicPartition("v", 0): 1})
    assert [(r.tp, r.agreement, r.lag) for r in report] == [
        (T1.__class__("t", 0), Agreement.AGREE, 0),
        (T1, Agreement.BROKER_AHEAD, 2),
        (TopicPartition("v", 0), Agreement.MISSING_IN_ZOOKEEPER, 0),
    ]
    assert report[1].ahead is BR and report[2].missing is ZK and report[0].ahead is None
    assert [r.tp for r in disagreements(report, max_lag=2)] == [TopicPartition("v", 0)]
    assert [r.tp for r in disagreements(report, max_lag=1)] == [T1, TopicPartition("v", 0)]
    assert "broker=12 ahead of zookeeper=10 by 2" in explain(report[1])
    assert "no zookeeper offset" in explain(report[2])
    with pytest.raises(ValueError, match="max_lag"):
        disagreements(report, -1)


@given(
    st.dictionaries(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), st.integers(0, 50)),
    st.dictionaries(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), st.integers(0, 50)),
    st.integers(0, 10),
)
def test_divergence_properties(
    zk: dict[tuple[str, int], int], br: dict[tuple[str, int], int], bound: int
) -> None:
    report = divergence_report(zk, br)
    assert [r.tp for r in report] == sorted(TopicPartition(*k) for k in zk.keys() | br.keys())
    for r in report:
        if r.zookeeper is not None and r.broker is not None:
            assert r.lag == abs(r.zookeeper - r.broker)
    bad = disagreements(report, bound)
    assert all(r.lag > bound or r.missing is not None for r in bad)
    assert len(bad) <= len(report)
    if zk == br:
        assert not disagreements(report, 0)


# ---------------------------------------------------------------------------- committer (fake stores)


class FakeStore:
    def __init__(
        self, store: Store, fail: BaseException | None = None, reject: frozenset[TopicPartition] = frozenset()
    ):
        self.store = store
        self.fail = fail
        self.reject = reject
        self.data: dict[TopicPartition, int] = {}
        self.calls: list[dict[TopicPartition, int]] = []

    def write_offsets(self, offsets: Mapping[TopicPartition, int]) -> StoreReply:
        self.calls.append(dict(offsets))
        if self.fail is not None:
            raise self.fail
        errors: dict[TopicPartition, StoreError | None] = {}
        for tp, off in offsets.items():
            if tp in self.reject:
                errors[tp] = StoreError(self.store, "REJECTED")
            else:
                self.data[tp] = off
                errors[tp] = None
        return StoreReply.of(self.store, errors)

    def read_offsets(self, partitions: object = None) -> StoreRead:
        if self.fail is not None:
            raise self.fail
        return StoreRead(self.store, offsets=dict(self.data))


def test_dual_committer_executes_plan_in_order_and_reports_exceptions() -> None:
    zk, br = FakeStore(ZK), FakeStore(BR, reject=frozenset({T1}))
    committer = DualCommitter(zk, br, CommitOrder.BROKER_FIRST)
    result = committer.commit({T0: 4, T1: 9})
    assert br.calls == [{T0: 4, T1: 9}] and zk.calls == [{T0: 4}]
    assert [o.status for o in result.outcomes] == ["written", "failed", "written", "skipped"]
    zk.data[T1] = 11
    fetched = committer.fetch([("t", 0), T1])
    assert fetched.offsets() == {T0: 4, T1: 11} and fetched.complete

    broken = FakeStore(ZK, fail=ConnectionError("zookeeper gone"))
    result = DualCommitter(broken, FakeStore(BR), CommitOrder.ZOOKEEPER_FIRST).commit({T0: 1})
    assert [(o.store, o.status) for o in result.outcomes] == [(ZK, "failed"), (BR, "skipped")]
    assert result.failures[0].error is not None
    assert result.failures[0].error.error == "ConnectionError"
    assert "zookeeper gone" in result.failures[0].error.message


def test_dual_committer_fetch_surfaces_store_exception() -> None:
    committer = DualCommitter(FakeStore(ZK), FakeStore(BR, fail=TimeoutError("no broker")))
    committer.stores[ZK].data[T0] = 3  # type: ignore[attr-defined]
    result = committer.fetch([T0])
    assert result.offsets() == {T0: 3}
    assert [e.error for _, e in result.errors] == ["TimeoutError"]


def test_dual_committer_requires_the_stores_its_config_uses() -> None:
    with pytest.raises(ValueError, match="needs the zookeeper store"):
        DualCommitter(None, FakeStore(BR))
    solo = DualCommitter(None, FakeStore(BR), config=BridgeConfig(OffsetsStorage.KAFKA, False))
    assert solo.commit({T0: 1}).committed
