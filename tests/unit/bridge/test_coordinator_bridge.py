"""The coordinator-side offset bridge without I/O: which commits are mirrored, the fetch max (exhaustively with
hypothesis), and the mirror queue (coalescing, retry with backoff, bounded waits, close) over a fake ZooKeeper."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.bridge.mirror import ZkOffsetBridge, accepted_commits, merge_fetch
from zkcoord.bridge.zk_store import ZkBridgeUnavailable
from zkcoord.errors import ConfigError
from zkcoord.group.messages import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from zkcoord.topic_partition import TopicPartition as TP
from zkcoord.zk.offset_store import OffsetsRead, WriteReport

LOAD_IN_PROGRESS = 14


def _commit(gen: int, parts: list[tuple[str, int, int]]) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for t, p, o in parts:
        topics.setdefault(t, []).append(OffsetCommitRequestPartition(p, o))
    return OffsetCommitRequest(
        7,
        "g",
        gen,
        "m-1" if gen >= 0 else "",
        tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in topics.items()),
    )


def _commit_resp(errors: list[tuple[str, int, int]]) -> OffsetCommitResponse:
    topics: dict[str, list[OffsetCommitResponsePartition]] = {}
    for t, p, e in errors:
        topics.setdefault(t, []).append(OffsetCommitResponsePartition(p, e))
    return OffsetCommitResponse(tuple(OffsetCommitResponseTopic(t, tuple(ps)) for t, ps in topics.items()))


def test_accepted_commits_keeps_only_acknowledged_positions() -> None:
    req = _commit(3, [("b", 1, 9), ("a", 0, 5), ("a", 1, -1), ("a", 2, 4), ("a", 2, 8)])
    resp = _commit_resp([("b", 1, 0), ("a", 0, 25), ("a", 1, 0), ("a", 2, 0)])
    # a/0 refused (error 25), a/1 is no position; a/2 named twice keeps its highest; sorted output
    assert list(accepted_commits(req, resp).items()) == [(("a", 2), 8), (("b", 1), 9)]


# ------------------------------------------------------------------------------------------- merge_fetch


def _fetch_resp(parts: Iterable[tuple[str, int, int, int]]) -> OffsetFetchResponse:
    topics: dict[str, list[OffsetFetchResponsePartition]] = {}
    for t, p, o, e in parts:
        topics.setdefault(t, []).append(OffsetFetchResponsePartition(p, o, 3 if o >= 0 else -1, "meta", e))
    return OffsetFetchResponse(0, tuple(OffsetFetchResponseTopic(t, tuple(ps)) for t, ps in topics.items()))


def _flat(resp: OffsetFetchResponse) -> list[tuple[TP, OffsetFetchResponsePartition]]:
    return [((t.name, p.partition_index), p) for t in resp.topics for p in t.partitions]


tps = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3))
coordinator = st.dictionaries(tps, st.tuples(st.integers(-1, 6), st.sampled_from([0, 0, 0, 3])), max_size=8)
zk_side = st.tuples(
    st.dictionaries(tps, st.integers(0, 6), max_size=8),
    st.dictionaries(tps, st.just("malformed"), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(coordinator, zk_side, st.booleans())
def test_merge_fetch_is_the_per_partition_max_and_never_hides_a_zookeeper_failure(
    coord: dict[TP, tuple[int, int]], zk_parts: tuple[dict[TP, int], dict[TP, str]], all_partitions: bool
) -> None:
    zk_offsets, zk_errors = zk_parts
    resp = _fetch_resp((t, p, o, e) for (t, p), (o, e) in sorted(coord.items()))
    merged, ahead = merge_fetch(resp, OffsetsRead(zk_offsets, zk_errors), all_partitions=all_partitions)
    flat = _flat(merged)
    keys = [tp for tp, _ in flat]
    assert len(keys) == len(set(keys))
    expected_keys = set(coord) | (set(zk_offsets) | set(zk_errors) if all_partitions else set())
    assert set(keys) == expected_keys
    # the coordinator's partitions keep their order; ZooKeeper-only ones join their topic (each topic once)
    assert [k for k in keys if k in coord] == sorted(coord)
    names = [t.name for t in merged.topics]
    assert len(names) == len(set(names))
    assert merged == merge_fetch(resp, OffsetsRead(zk_offsets, zk_errors), all_partitions=all_partitions)[0]
    for tp, part in flat:
        c_off, c_err = coord.get(tp, (-1, 0))
        if c_err:
            assert (part.committed_offset, part.error_code) == (c_off, c_err)  # the coordinator's own error
        elif tp in zk_errors:
            assert (part.committed_offset, part.error_code) == (-1, LOAD_IN_PROGRESS)
        else:
            assert part.error_code == 0
            assert part.committed_offset == max(c_off, zk_offsets.get(tp, -1))
            from_zk = zk_offsets.get(tp, -1) > c_off
            assert (tp in ahead) == from_zk
            assert part.metadata == ("" if from_zk or tp not in coord else "meta")


def test_merge_fetch_documented_example() -> None:
    resp = _fetch_resp([("t", 0, 10, 0), ("t", 1, 40, 0)])
    merged, ahead = merge_fetch(
        resp, OffsetsRead({("t", 0): 25, ("t", 1): 30, ("u", 0): 5}), all_partitions=True
    )
    assert [(tp, p.committed_offset, p.metadata) for tp, p in _flat(merged)] == [
        (("t", 0), 25, ""),
        (("t", 1), 40, "meta"),
        (("u", 0), 5, ""),
    ]
    assert ahead == (("t", 0), ("u", 0))


# ------------------------------------------------------------------------------------------ the mirror queue


class FakeZk:
    """Records mirror calls; fails the first `fail` calls; `block` holds a call until set."""

    def __init__(self, fail: int = 0, stored: Mapping[tuple[str, TP], int] | None = None) -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict[TP, int]]] = []
        self.stored: dict[tuple[str, TP], int] = dict(stored or {})
        self.block: threading.Event | None = None
        self.read_error: Exception | None = None

    @property
    def connected(self) -> bool:
        return True

    def read(self, group: str, partitions: Iterable[TP] | None) -> OffsetsRead:
        if self.read_error is not None:
            raise self.read_error
        return OffsetsRead({tp: v for (g, tp), v in self.stored.items() if g == group})

    def mirror(self, group: str, offsets: Mapping[TP, int]) -> WriteReport:
        if self.block is not None:
            self.block.wait(10)
        self.calls.append((group, dict(offsets)))
        if self.fail:
            self.fail -= 1
            raise ZkBridgeUnavailable("ZooKeeper session not connected")
        out = WriteReport()
        for tp, offset in offsets.items():
            stored = self.stored.get((group, tp))
            if stored is not None and stored >= offset:
                (out.unchanged if stored == offset else out.kept_higher)[tp] = (
                    offset if stored == offset else (stored, offset)  # type: ignore[assignment]
                )
            else:
                self.stored[(group, tp)] = offset
                out.written[tp] = offset
        return out


T = TypeVar("T")


def _run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(coro_fn())


def test_mirror_coalesces_to_the_highest_offset_per_partition_and_never_regresses() -> None:
    zk = FakeZk(stored={("g", ("t", 1)): 50})

    async def go() -> ZkOffsetBridge:
        bridge = ZkOffsetBridge(zk, ack_wait_ms=0)
        await bridge.start()
        bridge.submit("g", {("t", 0): 5, ("t", 1): 7})
        bridge.submit("g", {("t", 0): 9})
        bridge.submit("g", {("t", 0): 6})
        bridge.submit("a", {("x", 0): 1})
        assert await bridge.flush()
        await bridge.close()
        return bridge

    bridge = _run(go)
    assert zk.stored == {("g", ("t", 0)): 9, ("g", ("t", 1)): 50, ("a", ("x", 0)): 1}
    assert [g for g, _ in zk.calls] == ["a", "g"]  # one round, groups in sorted order
    assert (bridge.stats.mirrored, bridge.stats.kept_higher, bridge.stats.pending) == (2, 1, 0)


def test_a_failed_round_is_counted_and_retried_until_it_lands() -> None:
    zk = FakeZk(fail=3)

    async def go() -> tuple[ZkOffsetBridge, bool]:
        bridge = ZkOffsetBridge(zk, ack_wait_ms=0, retry_backoff_ms=1, max_retry_backoff_ms=4)
        await bridge.start()
        done = bridge.submit("g", {("t", 0): 5})
        first = await done  # resolved by the first (failed) round: the commit does not wait for recovery
        assert await bridge.flush()
        await bridge.close()
        return bridge, first

    bridge, first = _run(go)
    assert first is False
    assert zk.stored == {("g", ("t", 0)): 5}
    assert len(zk.calls) == 4
    assert bridge.stats.mirror_failures == 3 and bridge.healthy
    assert "not connected" in bridge.stats.last_error


def test_commit_waits_for_its_mirror_within_a_bound_and_only_for_group_members() -> None:
    zk = FakeZk()
    req = _commit(2, [("t", 0, 11)])
    resp = _commit_resp([("t", 0, 0)])

    async def go() -> float:
        bridge = ZkOffsetBridge(zk, ack_wait_ms=200)
        await bridge.start()
        await bridge.mirror_commit(req, resp)
        assert zk.stored == {("g", ("t", 0)): 11}  # landed before the acknowledgement
        await bridge.mirror_commit(_commit(-1, [("t", 0, 99)]), resp)
        assert not bridge._pending and zk.stored == {
            ("g", ("t", 0)): 11
        }  # standalone committer: not mirrored
        zk.block = threading.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await bridge.mirror_commit(_commit(2, [("t", 0, 12)]), resp)
        waited = loop.time() - started
        zk.block.set()
        assert await bridge.flush()
        await bridge.close()
        return waited

    waited = _run(go)
    assert 0.15 < waited < 2.0  # acknowledged after ack_wait_ms although ZooKeeper had not answered
    assert zk.stored == {("g", ("t", 0)): 12}


def test_close_reports_what_could_not_be_mirrored() -> None:
    zk = FakeZk(fail=1000)

    async def go() -> ZkOffsetBridge:
        bridge = ZkOffsetBridge(zk, ack_wait_ms=0, retry_backoff_ms=1, close_timeout_ms=2000)
        await bridge.start()
        bridge.submit("g", {("t", 0): 5, ("t", 1): 6})
        await bridge.close()
        return bridge

    bridge = _run(go)
    assert bridge.stats.pending == 2 and not bridge.healthy
    assert zk.stored == {}


def test_fetch_with_zookeeper_unavailable_answers_load_in_progress() -> None:
    zk = FakeZk(stored={("g", ("t", 0)): 30})
    req = OffsetFetchRequest(5, "g", (OffsetFetchRequestTopic("t", (0, 1)),))
    resp = _fetch_resp([("t", 0, 10, 0), ("t", 1, 4, 0)])

    async def go() -> tuple[OffsetFetchResponse, OffsetFetchResponse, ZkOffsetBridge]:
        bridge = ZkOffsetBridge(zk)
        ok = await bridge.fetch_merged(req, resp)
        zk.read_error = ZkBridgeUnavailable("ZooKeeper session not connected")
        failed = await bridge.fetch_merged(req, resp)
        return ok, failed, bridge

    ok, failed, bridge = _run(go)
    assert [p.committed_offset for _, p in _flat(ok)] == [30, 4]
    assert failed.error_code == LOAD_IN_PROGRESS
    # v2+ as Kafka 2.8's OffsetFetchRequest.getErrorResponse: the top-level error and no partitions.
    assert list(_flat(failed)) == []
    assert bridge.stats.fetch_failures == 1 and bridge.stats.fetch_zk_ahead == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"ack_wait_ms": -1}, {"fetch_timeout_ms": 0}, {"retry_backoff_ms": 1.5}, {"close_timeout_ms": True}],
)
def test_config_is_validated(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ZkOffsetBridge(FakeZk(), **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- in the GroupService


def test_group_service_mirrors_member_commits_fetches_the_max_and_remirrors_on_load() -> None:
    from zkcoord.group.config import GroupConfig
    from zkcoord.group.messages import JoinGroupRequest, SyncGroupRequest
    from zkcoord.server.group_service import GroupService
    from zkcoord.storage import MemoryRecordStore

    store = MemoryRecordStore()
    cfg = GroupConfig(group_initial_rebalance_delay_ms=0)

    def commit(group: str, gen: int, member: str, offset: int) -> OffsetCommitRequest:
        part = OffsetCommitRequestPartition(0, offset)
        return OffsetCommitRequest(8, group, gen, member, (OffsetCommitRequestTopic("t", (part,)),))

    fetch = OffsetFetchRequest(5, "g", (OffsetFetchRequestTopic("t", (0,)),))

    async def first_life(zk: FakeZk) -> tuple[int, int]:
        bridge = ZkOffsetBridge(zk)
        await bridge.start()
        svc = GroupService(cfg, store, offset_mirror=bridge, new_uuid=lambda: "u1")
        await svc.start()
        join = JoinGroupRequest(
            5, "g", 10_000, 20_000, "", None, "consumer", (("range", b""),), client_id="c"
        )
        first = await svc.join_group(join)
        joined = await svc.join_group(
            JoinGroupRequest(5, "g", 10_000, 20_000, first.member_id, None, "consumer", (("range", b""),))
        )
        member, gen = joined.member_id, joined.generation_id
        await svc.sync_group(
            SyncGroupRequest(5, "g", gen, member, None, "consumer", "range", ((member, b""),))
        )
        assert (await svc.offset_commit(commit("g", gen, member, 5))).topics[0].partitions[0].error_code == 0
        assert zk.stored == {("g", ("t", 0)): 5}  # mirrored before the acknowledgement
        await svc.offset_commit(commit("s", -1, "", 7))  # a standalone committer: not mirrored
        assert await bridge.flush()
        assert ("s", ("t", 0)) not in zk.stored
        zk.stored[("g", ("t", 0))] = 9  # a legacy member moved on
        fetched = (await svc.offset_fetch(fetch)).topics[0].partitions[0].committed_offset
        await svc.close()
        await bridge.close()
        return gen, fetched

    gen, fetched = _run(lambda: first_life(FakeZk()))
    assert gen >= 1 and fetched == 9

    async def second_life(zk: FakeZk) -> None:
        bridge = ZkOffsetBridge(zk)
        await bridge.start()
        svc = GroupService(cfg, store, offset_mirror=bridge)
        await svc.start()  # loads the log: the broker-managed group's offsets are mirrored again
        assert await bridge.flush()
        await svc.close()
        await bridge.close()

    empty = FakeZk()
    _run(lambda: second_life(empty))
    assert empty.stored == {("g", ("t", 0)): 5}
