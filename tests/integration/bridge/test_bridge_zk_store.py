"""ZooKeeperOffsetStore on real ZooKeeper: byte format, batching under 1 MB, versioned writes that detect a
concurrent writer, never-regress mode, malformed znodes, session expiry mid-write."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from zkcoord.bridge import CommitOrder, DualCommitter, Store, StoreReply, TopicPartition
from zkcoord.bridge.zk_side import ZooKeeperSide
from zkcoord.ratelog import RateLimitedLog
from zkcoord.testing import expire_session
from zkcoord.topic_partition import TopicPartition as TP
from zkcoord.zk import offset_store
from zkcoord.zk.offset_store import (
    OffsetWriteConflict,
    WriteMode,
    ZooKeeperOffsetStore,
    list_member_ids,
    read_node,
    walk_offsets,
    write_node,
)

pytestmark = pytest.mark.integration


def test_round_trip_uses_the_legacy_byte_format(zk: Any) -> None:
    store = ZooKeeperOffsetStore(zk, "g1")
    report = store.write({("t", 0): 17780915, ("t", 1): 0, ("u", 3): 5})
    assert report.ok and report.written == {("t", 0): 17780915, ("t", 1): 0, ("u", 3): 5}
    assert zk.get("/consumers/g1/offsets/t/0")[0] == b"17780915"
    assert store.partitions() == [("t", 0), ("t", 1), ("u", 3)]
    assert store.read().offsets == {("t", 0): 17780915, ("t", 1): 0, ("u", 3): 5}
    assert store.read([("t", 1), ("t", 9)]).offsets == {("t", 1): 0}
    again = store.write({("t", 0): 17780915})
    assert again.unchanged == {("t", 0): 17780915} and not again.written


def test_many_partitions_are_split_into_batches_under_the_limit(zk: Any) -> None:
    store = ZooKeeperOffsetStore(zk, "big", max_batch_bytes=4096)
    offsets = {("topic-with-a-long-name", p): p * 1000 for p in range(300)}
    report = store.write(offsets)
    assert report.ok and len(report.written) == 300
    assert report.batches > 5
    assert store.read().offsets == offsets


def test_never_regress_keeps_higher_offsets(zk: Any) -> None:
    store = ZooKeeperOffsetStore(zk, "g")
    store.write({("t", 0): 100, ("t", 1): 10})
    report = store.write({("t", 0): 50, ("t", 1): 20, ("t", 2): 1}, WriteMode.NEVER_REGRESS)
    assert report.kept_higher == {("t", 0): (100, 50)}
    assert report.written == {("t", 1): 20, ("t", 2): 1}
    assert store.read().offsets == {("t", 0): 100, ("t", 1): 20, ("t", 2): 1}
    overwrite = store.write({("t", 0): 50})
    assert overwrite.written == {("t", 0): 50}


class RacingStore(ZooKeeperOffsetStore):
    """Another writer changes the node between our read and our multi, on the first attempt only."""

    def __init__(self, client: Any, group: str, racer: Any, value: bytes) -> None:
        super().__init__(client, group)
        self.racer, self.value, self.raced = racer, value, False

    def _read_raw(self, batch: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
        found = super()._read_raw(batch)
        if not self.raced:
            self.raced = True
            self.racer.set("/consumers/g/offsets/t/0", self.value)
        return found


def test_concurrent_writer_is_detected_and_never_regress_respects_it(zk: Any, zk_client_factory: Any) -> None:
    ZooKeeperOffsetStore(zk, "g").write({("t", 0): 10, ("t", 1): 10})
    store = RacingStore(zk, "g", zk_client_factory(), b"500")
    report = store.write({("t", 0): 200, ("t", 1): 200}, WriteMode.NEVER_REGRESS)
    assert report.conflicts == 1
    # The batch is all-or-nothing: t-1 was rolled back with t-0 and written on the re-read attempt.
    assert report.kept_higher == {("t", 0): (500, 200)} and report.written == {("t", 1): 200}
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"500"


def test_conflict_that_never_clears_is_reported_per_partition(zk: Any, zk_client_factory: Any) -> None:
    racer = zk_client_factory()
    ZooKeeperOffsetStore(zk, "g").write({("t", 0): 1})

    class AlwaysRacing(ZooKeeperOffsetStore):
        def _read_raw(self, batch: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
            found = super()._read_raw(batch)
            racer.set("/consumers/g/offsets/t/0", b"1")  # bumps the version every time
            return found

    report = AlwaysRacing(zk, "g", max_attempts=3).write({("t", 0): 9})
    assert report.conflicts == 3
    assert "concurrent writer" in report.errors[("t", 0)]
    assert not report.ok


def test_malformed_znode_is_reported_and_left_intact(zk: Any) -> None:
    zk.create("/consumers/g/offsets/t/0", b"12x", makepath=True)
    zk.create("/consumers/g/offsets/t/1", b"7", makepath=True)
    store = ZooKeeperOffsetStore(zk, "g")
    read = store.read()
    assert read.offsets == {("t", 1): 7}
    assert "malformed znode /consumers/g/offsets/t/0: offset '12x' is not a decimal integer" in str(
        read.errors[("t", 0)]
    )
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"12x"
    assert list(walk_offsets(zk)) == [("g", "t", 1, 7)]


def test_a_bad_offsets_child_is_skipped_and_its_warning_rate_limited(
    zk: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every read of all partitions (each OffsetFetch of a whole group, each client retry) meets the same child:
    # it used to log one WARNING each time.
    monkeypatch.setattr(
        offset_store, "_say", RateLimitedLog(offset_store.log)
    )  # no window left by other tests
    zk.create("/consumers/g/offsets/t/not-a-partition", b"5", makepath=True)
    zk.create("/consumers/g/offsets/t/2", b"9", makepath=True)
    store = ZooKeeperOffsetStore(zk, "g")
    with caplog.at_level(logging.WARNING, logger="zkcoord.zk.offset_store"):
        for _ in range(50):
            assert store.read().offsets == {("t", 2): 9}
    lines = [
        r.getMessage() for r in caplog.records if "ignoring offsets child 'not-a-partition'" in r.getMessage()
    ]
    assert 1 <= len(lines) <= 10, len(lines)
    assert offset_store._say.events["offsets-child-name"] == 50  # every event counted


def test_session_expiry_mid_write_is_survived(zk: Any) -> None:
    class ExpiringStore(ZooKeeperOffsetStore):
        expired = False

        def _read_raw(self, batch: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
            found = super()._read_raw(batch)
            if not self.expired:
                self.expired = True
                expire_session(self.client)
            return found

    store = ExpiringStore(zk, "g")
    report = store.write({("t", p): p for p in range(20)})
    assert store.expired and report.ok
    assert ZooKeeperOffsetStore(zk, "g").read().offsets == {("t", p): p for p in range(20)}


def test_marker_nodes_are_versioned(zk: Any) -> None:
    assert read_node(zk, "/consumers/g/migration") == (None, -1)
    version = write_node(zk, "/consumers/g/migration", b"a", -1)
    assert read_node(zk, "/consumers/g/migration") == (b"a", version)
    with pytest.raises(OffsetWriteConflict, match="changed by another writer"):
        write_node(zk, "/consumers/g/migration", b"b", -1)
    write_node(zk, "/consumers/g/migration", b"c", version)
    with pytest.raises(OffsetWriteConflict):
        write_node(zk, "/consumers/g/migration", b"d", version)
    zk.create("/consumers/g/ids/c2", b"{}", makepath=True, ephemeral=True)
    zk.create("/consumers/g/ids/c1", b"{}", ephemeral=True)
    assert list_member_ids(zk, "g") == ["c1", "c2"]


class FakeBroker:
    store = Store.BROKER

    def __init__(self) -> None:
        self.data: dict[TopicPartition, int] = {}

    def write_offsets(self, offsets: Mapping[TopicPartition, int]) -> StoreReply:
        self.data.update(offsets)
        return StoreReply.all_ok(Store.BROKER, offsets)

    def read_offsets(self, partitions: Any = None) -> Any:
        from zkcoord.bridge import StoreRead

        return StoreRead(Store.BROKER, offsets=dict(self.data))


def test_dual_committer_over_real_zookeeper(zk: Any) -> None:
    broker = FakeBroker()
    committer = DualCommitter(ZooKeeperSide.for_group(zk, "g"), broker, CommitOrder.ZOOKEEPER_FIRST)
    result = committer.commit({("t", 0): 5, ("t", 1): 6})
    assert result.committed
    assert zk.get("/consumers/g/offsets/t/1")[0] == b"6"
    broker.data[TopicPartition("t", 0)] = 9
    zk.set("/consumers/g/offsets/t/1", b"oops")
    fetched = committer.fetch([("t", 0), ("t", 1)])
    assert fetched.offsets() == {("t", 0): 9, ("t", 1): 6}
    assert [(tp, e.error) for tp, e in fetched.errors] == [(("t", 1), "MALFORMED_ZNODE")]
