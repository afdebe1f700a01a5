"""The migrate workflow on real ZooKeeper with an in-memory broker store: the whole path, refusals with
precise messages, idempotent re-runs, a failed step that the next run repairs, rollback without regression,
and two concurrent runs fenced by the marker's version."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from migration.workflow import IllegalStep, MigrationRunner, MigrationState, StepFailed, marker_path
from zkcoord.bridge import Store, StoreError, StoreRead, StoreReply, TopicPartition
from zkcoord.zk.offset_store import OffsetWriteConflict, ZooKeeperOffsetStore

pytestmark = pytest.mark.integration
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


class MemoryBroker:
    """One in-memory broker shared by all groups; `down` and `refuse` inject failures."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        self.down = False
        self.refuse: set[TopicPartition] = set()

    def for_group(self, group: str) -> GroupView:
        return GroupView(self, group)


class GroupView:
    store = Store.BROKER

    def __init__(self, broker: MemoryBroker, group: str) -> None:
        self.broker, self.group = broker, group

    def read_offsets(self, partitions: Iterable[Any] | None = None) -> StoreRead:
        if self.broker.down:
            return StoreRead(
                Store.BROKER, request_error=StoreError(Store.BROKER, "NoBrokersAvailable", retriable=True)
            )
        return StoreRead(Store.BROKER, offsets=dict(self.broker.offsets.get(self.group, {})))

    def write_offsets(self, offsets: Mapping[TopicPartition, int]) -> StoreReply:
        errors: dict[TopicPartition, StoreError | None] = {}
        for tp, off in offsets.items():
            if tp in self.broker.refuse:
                errors[tp] = StoreError(Store.BROKER, "COORDINATOR_NOT_AVAILABLE", retriable=True)
            else:
                self.broker.offsets.setdefault(self.group, {})[tp] = off
                errors[tp] = None
        return StoreReply.of(Store.BROKER, errors)

    def describe(self) -> dict[str, Any]:
        return {"state": "Empty", "members": []}


@pytest.fixture
def setup(zk: Any, tmp_path: Path) -> tuple[MigrationRunner, MemoryBroker, ZooKeeperOffsetStore]:
    broker = MemoryBroker()
    clock = iter(range(1_000, 10**9, 1_000))
    runner = MigrationRunner(zk, broker.for_group, tmp_path / "state", clock_ms=lambda: next(clock))
    store = ZooKeeperOffsetStore(zk, "g")
    store.write({T0: 100, T1: 200, T2: 300})
    zk.create("/consumers/g/ids/g_host-1", b"{}", makepath=True, ephemeral=True)
    return runner, broker, store


def test_full_migration_path_with_journal_and_marker(setup: Any, zk: Any, tmp_path: Path) -> None:
    runner, broker, store = setup
    outcome, report = runner.plan("g")
    assert outcome.after is MigrationState.PLANNED and report.to_seed == {T0: 100, T1: 200, T2: 300}
    text = "\n".join(outcome.lines)
    assert (
        "legacy members (/consumers/g/ids): g_host-1" in text
        and "broker members (DescribeGroups): none" in text
    )
    assert json.loads(zk.get(marker_path("g"))[0])["state"] == "planned"

    broker.offsets["g"] = {T0: 150}  # the broker already has a newer offset: seeding must not lower it
    out = runner.dual_commit("g")
    assert out.after is MigrationState.DUAL_COMMIT and "copied 2 offset(s)" in out.lines[0]
    assert broker.offsets["g"] == {T0: 150, T1: 200, T2: 300}

    bad = runner.verify("g", max_lag=10)
    assert not bad.ok and bad.after is MigrationState.DUAL_COMMIT
    assert "t-0: broker=150 ahead of zookeeper=100 by 50" in "\n".join(bad.lines)
    assert runner.verify("g", max_lag=50).after is MigrationState.VERIFIED
    assert runner.verify("g", max_lag=50).changed is False  # idempotent re-run

    store.write({T1: 260})  # a ZooKeeper-only member moved on after verify
    with pytest.raises(StepFailed, match=r"finalize refused: 1 partition\(s\) disagree beyond --max-lag 50"):
        runner.finalize("g", max_lag=50)
    broker.offsets["g"][T1] = 260
    assert runner.finalize("g", max_lag=50).after is MigrationState.FINALIZED
    assert runner.finalize("g").changed is False

    events = [(e["step"], e["event"]) for e in runner.journal.entries("g")]
    assert events[:4] == [
        ("plan", "begin"),
        ("plan", "done"),
        ("dual-commit", "begin"),
        ("dual-commit", "done"),
    ]
    assert ("finalize", "failed") in events and events[-1] == ("finalize", "done")
    final = next(e for e in runner.journal.entries("g") if e["step"] == "finalize" and e["event"] == "done")
    assert final["detail"]["snapshot"]["t/1"] == [260, 260]
    assert "state finalized" in runner.status("g")[0]


def test_steps_refuse_the_wrong_state_with_a_precise_message(setup: Any) -> None:
    runner, _, _ = setup
    with pytest.raises(
        IllegalStep,
        match=r"group 'g' is in state 'none'; `migrate verify` needs one of: dual-commit, verified",
    ):
        runner.verify("g")
    runner.plan("g")
    with pytest.raises(
        IllegalStep, match=r"state 'planned'; `migrate finalize`.*`zkcoord migrate dual-commit`"
    ):
        runner.finalize("g")
    assert runner.journal.entries("g")[0]["event"] == "refused"


def test_failed_dual_commit_keeps_state_and_rerun_repairs(setup: Any) -> None:
    runner, broker, _ = setup
    runner.plan("g")
    broker.down = True
    with pytest.raises(StepFailed, match="cannot read broker offsets: broker NoBrokersAvailable"):
        runner.dual_commit("g")
    broker.down = False
    broker.refuse = {T2}
    with pytest.raises(
        StepFailed, match=r"refused 1 of 3 seed offsets \(t-2: broker COORDINATOR_NOT_AVAILABLE\)"
    ):
        runner.dual_commit("g")
    assert runner.state("g") is MigrationState.PLANNED
    broker.refuse = set()
    out = runner.dual_commit("g")
    assert (
        out.after is MigrationState.DUAL_COMMIT and "copied 1 offset(s)" in out.lines[0]
    )  # only what was missing
    assert runner.dual_commit("g").changed is False


def test_rollback_takes_the_max_and_never_lowers(setup: Any) -> None:
    runner, broker, store = setup
    runner.plan("g")
    runner.dual_commit("g")
    broker.offsets["g"][T0] = 180  # broker moved on (members on kafka storage)
    broker.offsets["g"][TopicPartition("u", 0)] = 7  # committed to the broker only
    store.write({T2: 350})  # a ZooKeeper-only member moved on
    out = runner.rollback("g")
    assert out.after is MigrationState.ROLLED_BACK
    assert ZooKeeperOffsetStore(store.client, "g").read().offsets == {
        ("t", 0): 180,
        ("t", 1): 200,
        ("t", 2): 350,
        ("u", 0): 7,
    }
    assert runner.rollback("g").changed is False
    assert runner.plan("g")[0].after is MigrationState.PLANNED  # start again after a rollback


def test_concurrent_runs_are_fenced_by_the_marker_version(setup: Any, zk: Any) -> None:
    runner, _, _ = setup
    runner.plan("g")

    class Racing(MigrationRunner):
        def _finish(self, group: str, *args: Any, **kwargs: Any) -> None:
            # Another operator's run moves the marker between our read and our write.
            zk.set(marker_path(group), zk.get(marker_path(group))[0])
            super()._finish(group, *args, **kwargs)

    racing = Racing(zk, runner.broker_for, runner.journal.dir)
    with pytest.raises(OffsetWriteConflict, match="changed by another writer"):
        racing.dual_commit("g")


def test_plan_exits_non_zero_and_marks_nothing_when_the_broker_does_not_answer(
    setup: Any, zk: Any, zk_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan is what dual-commit would do, unknown while the broker does not answer for the group: the group is not
    marked, the command exits 2 and prints what to check and the command to run again (as printed)."""
    runner, broker, _ = setup
    broker.down = (
        True  # the in-memory broker answers the read with an error, as COORDINATOR_NOT_AVAILABLE does
    )
    with pytest.raises(
        StepFailed, match=r"did not answer for the group's offsets \(broker NoBrokersAvailable\)"
    ):
        runner.plan("g")
    assert not zk.exists(marker_path("g"))
    assert runner.journal.entries("g")[-1]["event"] == "failed"

    from zkcoord.cli import main
    from zkcoord.local.zookeeper import free_port

    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    state = str(tmp_path / "cli-state")
    argv = ["migrate", "plan", "--zk", zk_connect, "--bootstrap", closed, "--group", "g", "--state-dir", state,
            "--request-timeout-ms", "1500"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "nothing was marked" in err and f"zkcoord cluster describe --zk {zk_connect}" in err
    assert (
        f"$ zkcoord migrate plan --zk {zk_connect} --bootstrap {closed} --state-dir {state} --group g" in err
    )
    assert not zk.exists(marker_path("g"))
