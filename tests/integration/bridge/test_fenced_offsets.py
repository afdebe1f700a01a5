"""The one offset store's `Fenced` write mode on real ZooKeeper: a member's write lands only on the znode version
it expects, reports what someone else wrote as stale (left as it is), and returns the versions it left; the
bridge's ZooKeeperSide turns a refusal into a final BAD_VERSION and passes the versions through."""

from __future__ import annotations

from typing import Any

import pytest

from zkcoord.bridge.zk_side import ZooKeeperSide
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.offset_store import Fenced, ZooKeeperOffsetStore

pytestmark = pytest.mark.integration

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.mark.parametrize("batched", [True, False])
def test_a_fenced_write_lands_only_on_the_version_it_expects(zk: Any, batched: bool) -> None:
    store = ZooKeeperOffsetStore(zk, "g", batched=batched)
    created = store.write({T0: 5, T1: 6}, Fenced({}))
    assert created.written == {T0: 5, T1: 6} and created.versions == {T0: 0, T1: 0} and not created.stale
    moved = store.write({T0: 7}, Fenced(created.versions))
    assert moved.written == {T0: 7} and moved.versions == {T0: 1}

    zk.set("/consumers/g/offsets/t/1", b"50")  # the partition's new owner commits
    last = store.write({T0: 8, T1: 9}, Fenced({**created.versions, **moved.versions}))
    assert last.written == {T0: 8} and last.versions == {T0: 2}
    assert last.stale == {T1: 9}
    assert zk.get("/consumers/g/offsets/t/1")[0] == b"50"  # never moved back
    read = store.read([T0, T1])
    assert read.offsets == {T0: 8, T1: 50} and read.versions == {T0: 2, T1: 1}


def test_the_zookeeper_side_reports_a_refusal_as_bad_version_and_passes_versions(zk: Any) -> None:
    side = ZooKeeperSide(ZooKeeperOffsetStore(zk, "g"), Fenced({}))
    first = side.write_offsets({T0: 1})
    assert first.accepted() == {T0} and dict(first.versions) == {T0: 0}

    refused = side.write_offsets({T0: 2})  # its own mode expects no znode: someone wrote it since
    error = dict(refused.errors)[T0]
    assert error is not None and error.error == "BAD_VERSION" and not error.retriable
    assert not refused.versions
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"1"

    again = side.write_offsets({T0: 2}, Fenced(dict(first.versions)))
    assert again.accepted() == {T0} and dict(again.versions) == {T0: 1}
    read = side.read_offsets([T0, T1])
    assert read.offsets == {T0: 2} and read.versions == {T0: 1} and not read.errors
