"""The migrate workflow's membership phase on real ZooKeeper: the test writes the ids and owner znodes exactly as
the members and `serve --bridge-zk-groups` write them (a broker-protocol member's registration carries the
"zkcoord" key, its owner znodes `<consumer id>-0`), and walks a 2-member group to the broker protocol and back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from migration.workflow import MigrationRunner, StepFailed, marker_path
from zkcoord.bridge import Store, StoreRead, StoreReply, TopicPartition
from zkcoord.zk import registry
from zkcoord.zk.offset_store import ZooKeeperOffsetStore

pytestmark = pytest.mark.integration
GROUP = "g"
TPS = [TopicPartition("t", p) for p in range(4)]


class Broker:
    """The broker's offsets for one group (the workflow reads and seeds them)."""

    store = Store.BROKER

    def __init__(self) -> None:
        self.offsets: dict[TopicPartition, int] = {}
        self.members: list[str] = []  # member ids the coordinator has in the group

    def read_offsets(self, partitions: Iterable[Any] | None = None) -> StoreRead:
        return StoreRead(Store.BROKER, offsets=dict(self.offsets))

    def write_offsets(self, offsets: Mapping[TopicPartition, int]) -> StoreReply:
        self.offsets.update(offsets)
        return StoreReply.of(Store.BROKER, {tp: None for tp in offsets})

    def describe(self) -> dict[str, Any]:
        return {"state": "Stable", "members": [{"member_id": m, "client_id": m} for m in self.members]}


def register(zk: Any, consumer: str, *, classic: bool = False) -> None:
    body: dict[str, Any] = {"version": 1, "subscription": {"t": 1}, "pattern": "static", "timestamp": "1"}
    if classic:
        body["zkcoord"] = {"protocol": "classic", "member_id": f"{consumer}-uuid", "client_id": consumer}
    zk.create(f"/consumers/{GROUP}/ids/{consumer}", json.dumps(body).encode(), makepath=True)


def own(zk: Any, consumer: str, partitions: Iterable[int]) -> None:
    for p in partitions:
        path = f"/consumers/{GROUP}/owners/t/{p}"
        if zk.exists(path):
            zk.delete(path)
        zk.create(path, f"{consumer}-0".encode(), makepath=True)


def replace(zk: Any, old: str, new: str, partitions: Iterable[int], *, classic: bool) -> None:
    """One member move as it lands in ZooKeeper: the old member's registration goes, the new one's comes, and the
    new owner holds the old one's partitions."""
    zk.delete(f"/consumers/{GROUP}/ids/{old}")
    register(zk, new, classic=classic)
    own(zk, new, partitions)


def phase(zk: Any) -> str:
    return str(json.loads(zk.get(marker_path(GROUP))[0]).get("membership"))


@pytest.fixture
def runner(zk: Any, tmp_path: Path) -> tuple[MigrationRunner, Broker]:
    broker = Broker()
    registry.write_topic(zk, "t", {p: [1] for p in range(4)})
    ZooKeeperOffsetStore(zk, GROUP).write({tp: 10 * (tp.partition + 1) for tp in TPS})
    register(zk, "g_a")
    register(zk, "g_b")
    own(zk, "g_a", (0, 1))
    own(zk, "g_b", (2, 3))
    # A running coordinator offset bridge announces itself so (zkcoord.bridge.zk_store): the member walk is offered.
    zk.create(
        "/zkcoord/offset-bridges/bridge-", b'{"version":1}', ephemeral=True, sequence=True, makepath=True
    )
    return MigrationRunner(zk, lambda group: broker, tmp_path / "state"), broker


def test_member_by_member_forward_and_back(runner: Any, zk: Any) -> None:
    migrate, broker = runner
    outcome, _ = migrate.plan(GROUP)
    text = "\n".join(outcome.lines)
    assert "membership phase: legacy-only (recorded at the last step: none yet)" in text
    assert "ZooKeeper (legacy) members: 2" in text and "g_a owns t-0, t-1" in text
    assert "point of no return: `migrate finalize` once no ZooKeeper member is left" in text
    assert "next: $ zkcoord migrate dual-commit --zk CONNECT --bootstrap HOST:PORT --group g" in text
    assert phase(zk) == "legacy-only"
    text = "\n".join(migrate.dual_commit(GROUP).lines)
    assert "2 member(s) left; next, 1 of 2" in text and "stop ZooKeeper member g_a (owns t-0, t-1)" in text
    migrate.verify(GROUP)

    replace(zk, "g_a", "c1", (0, 1), classic=True)
    broker.members.append("c1-uuid")
    status = "\n".join(migrate.status(GROUP))
    assert "membership phase: mixed (recorded at the last step: legacy-only)" in status
    assert "broker-protocol (classic) members: 1" in status and "c1 (c1) owns t-0, t-1" in status
    assert "stop ZooKeeper member g_b (owns t-2, t-3)" in status

    with pytest.raises(
        StepFailed, match=r"finalize refused: 1 ZooKeeper member\(s\) remain .*: g_b\. Restart"
    ):
        migrate.finalize(GROUP)
    assert migrate.journal.entries(GROUP)[-1]["detail"]["zookeeper_members"] == ["g_b"]

    zk.delete(f"/consumers/{GROUP}/owners/t/2")  # g_b mid-rebalance: the group is not settled
    status = "\n".join(migrate.status(GROUP))
    assert "wait, the group is not settled" in status and "1 partition(s) have no owner: t-2" in status
    replace(zk, "g_b", "c2", (2, 3), classic=True)
    broker.members.append("c2-uuid")
    assert migrate.finalize(GROUP).after.value == "finalized"
    assert phase(zk) == "broker-only"

    register(zk, "g_late")  # a ZooKeeper member started by mistake after the point of no return
    assert "WARNING: ZooKeeper member(s) g_late joined a group finalized" in "\n".join(migrate.status(GROUP))
    zk.delete(f"/consumers/{GROUP}/ids/g_late")

    moved = []
    for new in ("g_c", "g_d"):
        lines = "\n".join(migrate.rollback(GROUP).lines)
        nxt = migrate.journal.entries(GROUP)[-1]["detail"]["next_member"]
        assert f"stop broker-protocol member {nxt} ({nxt}) (owns" in lines  # client id (consumer id)
        moved.append(nxt)
        replace(zk, nxt, new, (0, 1) if nxt == "c1" else (2, 3), classic=False)
        broker.members.remove(f"{nxt}-uuid")
    assert moved == ["c1", "c2"]
    done = "\n".join(migrate.rollback(GROUP).lines)
    assert "done, every member is a ZooKeeper member again" in done
    assert phase(zk) == "legacy-only"
