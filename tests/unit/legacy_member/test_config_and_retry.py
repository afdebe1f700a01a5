"""LegacyConsumerConfig validation/defaults and the retry policies' decisions and timing (injected sleep)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoNodeError, SessionExpiredError

from zkcoord.errors import ConfigError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.zk import retry


def cfg(**kw):
    return LegacyConsumerConfig(group_id="g", zookeeper_connect="127.0.0.1:2181", **kw)


def test_defaults_follow_082():
    c = cfg()
    assert c.rebalance_backoff_ms == 2000 == c.zookeeper_sync_time_ms
    assert c.zookeeper_connection_timeout_ms == c.zookeeper_session_timeout_ms == 6000
    assert c.rebalance_max_retries == 4 and c.auto_commit_interval_ms == 60000 and c.auto_commit_enable
    assert c.client_id == "g" and c.auto_offset_reset == "largest" and c.dual_commit_enabled is False
    assert cfg(zookeeper_sync_time_ms=500).rebalance_backoff_ms == 500


def test_from_properties_round_trip_and_errors():
    c = LegacyConsumerConfig.from_properties(
        {
            "group.id": "g",
            "zookeeper.connect": "h:1/chroot",
            "partition.assignment.strategy": "RoundRobin",
            "auto.commit.enable": "false",
            "rebalance.backoff.ms": "10",
            "zkcoord.mode": "faithful",
            "offsets.storage": "ZooKeeper",
        }
    )
    assert (c.partition_assignment_strategy, c.auto_commit_enable, c.backoff_ms, c.mode) == (
        "roundrobin",
        False,
        10,
        "faithful",
    )
    assert c.offsets_storage == "zookeeper"
    assert LegacyConsumerConfig.from_properties(c.to_properties()) == c
    with pytest.raises(ConfigError, match="unknown legacy consumer properties: bogus"):
        LegacyConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "h", "bogus": "1"})
    with pytest.raises(ConfigError, match=r"missing required properties: zookeeper\.connect"):
        LegacyConsumerConfig.from_properties({"group.id": "g"})
    with pytest.raises(ConfigError, match="expected an integer"):
        LegacyConsumerConfig.from_properties(
            {"group.id": "g", "zookeeper.connect": "h", "rebalance.max.retries": "x"}
        )


def test_kafka_storage_defaults_to_dual_commit():
    assert cfg(offsets_storage="Kafka").dual_commit_enabled is True
    assert cfg(offsets_storage="kafka", dual_commit_enabled=False).dual_commit_enabled is False
    assert cfg().dual_commit_enabled is False


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"commit_order": "random"}, "zkcoord.commit.order"),
        ({"partition_assignment_strategy": "sticky"}, "partition.assignment.strategy"),
        ({"auto_offset_reset": "earliest"}, "auto.offset.reset"),
        ({"mode": "turbo"}, "zkcoord.mode"),
        ({"rebalance_max_retries": 0}, "rebalance.max.retries=0 is out of range"),
        ({"zookeeper_session_timeout_ms": True}, "must be an integer"),
        ({"multi_budget_bytes": 2 * 1024 * 1024}, "zkcoord.multi.budget.bytes"),
        ({"offsets_storage": "redis"}, "offsets.storage"),
    ],
)
def test_invalid_values_are_named(kw, message):
    with pytest.raises(ConfigError, match=message):
        cfg(**kw)
    with pytest.raises(ConfigError):
        LegacyConsumerConfig(group_id="", zookeeper_connect="h")


def test_classification():
    assert retry.classify(ConnectionLoss()) is retry.ErrorClass.RETRY
    assert retry.classify(SessionExpiredError()) is retry.ErrorClass.SESSION_EXPIRED
    assert retry.classify(retry.SessionMoved("x")) is retry.ErrorClass.SESSION_EXPIRED
    assert retry.classify(ConnectionClosedError()) is retry.ErrorClass.NEVER
    assert retry.classify(NoNodeError()) is retry.ErrorClass.NEVER
    assert retry.classify(ValueError()) is retry.ErrorClass.NEVER
    assert retry.classify(retry.RebalanceFailed("c", 4, None)) is retry.ErrorClass.RETRY


def test_faithful_timing_matches_synced_rebalance():
    slept: list[float] = []
    failures: list[int] = []
    policy = retry.faithful_rebalance(
        consumer_id="g_c",
        max_retries=4,
        backoff_ms=2000,
        sleep=slept.append,
        on_attempt_failed=lambda n, e: failures.append(n),
    )
    calls = []
    with pytest.raises(retry.RebalanceFailed, match="g_c can't rebalance after 4 retries"):
        policy(lambda: calls.append(1) or False)
    assert len(calls) == 4 and slept == [2.0] * 4 and failures == [1, 2, 3]


def test_faithful_counts_exceptions_as_failed_attempts_but_not_session_loss():
    slept: list[float] = []
    outcomes = iter([ValueError("race"), False, True])

    def attempt():
        o = next(outcomes)
        if isinstance(o, Exception):
            raise o
        return o

    assert retry.faithful_rebalance(consumer_id="c", max_retries=4, backoff_ms=5, sleep=slept.append)(attempt)
    assert slept == [0.005, 0.005]
    with pytest.raises(SessionExpiredError):
        retry.faithful_rebalance(consumer_id="c", max_retries=4, backoff_ms=5, sleep=slept.append)(
            lambda: (_ for _ in ()).throw(SessionExpiredError())
        )


def test_fast_retries_until_done_or_stopped():
    import random

    slept: list[float] = []
    n = iter(range(100))
    assert retry.fast_rebalance(should_stop=lambda: False, sleep=slept.append, rng=random.Random(1))(
        lambda: next(n) >= 9
    )
    assert len(slept) == 9 and all(0 < s <= 0.5 for s in slept)
    assert slept[-1] > slept[0]
    stop = iter([False, False, True])
    with pytest.raises(retry.RebalanceStopped):
        retry.fast_rebalance(should_stop=lambda: next(stop), sleep=slept.append)(lambda: False)


def test_zk_operation_retries_connection_loss_only():
    slept: list[float] = []
    seq = iter([ConnectionLoss(), ConnectionLoss(), "ok"])

    def op():
        v = next(seq)
        if isinstance(v, Exception):
            raise v
        return v

    assert retry.call(op, policy=retry.zk_operation(sleep=slept.append)) == "ok"
    assert len(slept) == 2
    with pytest.raises(NoNodeError):
        retry.call(
            lambda: (_ for _ in ()).throw(NoNodeError()), policy=retry.zk_operation(sleep=slept.append)
        )


def test_zk_call_deadline_defaults_to_the_session_timeout_and_is_retried():
    from zkcoord.zk.member_zk import ZooKeeperCallTimeout

    cfg = LegacyConsumerConfig(group_id="g", zookeeper_connect="z", zookeeper_session_timeout_ms=9000)
    assert cfg.call_deadline_ms == 9000
    props = {"group.id": "g", "zookeeper.connect": "z", "zkcoord.zk.call.timeout.ms": "250"}
    assert LegacyConsumerConfig.from_properties(props).call_deadline_ms == 250
    with pytest.raises(ConfigError, match=r"zkcoord\.zk\.call\.timeout\.ms=0 is out of range"):
        LegacyConsumerConfig(group_id="g", zookeeper_connect="z", zk_call_timeout_ms=0)
    exc = ZooKeeperCallTimeout("create", "/consumers/g/owners/t/0", 0.25, "SUSPENDED")
    assert (
        str(exc)
        == "ZooKeeper create /consumers/g/owners/t/0 got no reply within 250 ms (connection SUSPENDED)"
    )
    assert retry.classify(exc) is retry.ErrorClass.RETRY
