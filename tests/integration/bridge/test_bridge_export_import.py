"""Export from real ZooKeeper and import back: exact ExportZkOffsets lines, never-regress import, an import
interrupted by a session expiry half way that resumes from its journal."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from migration.offsets_io import (
    ImportFailed,
    OffsetRecord,
    ZooKeeperTarget,
    export_zookeeper,
    import_offsets,
    read_offsets_file,
)
from zkcoord.testing import expire_session
from zkcoord.zk.offset_store import ZooKeeperOffsetStore

pytestmark = pytest.mark.integration


def test_export_writes_exportzkoffsets_lines_and_import_restores(zk: Any, tmp_path: Path) -> None:
    ZooKeeperOffsetStore(zk, "group1").write({("topic1", 0): 286894308, ("topic1", 1): 7})
    ZooKeeperOffsetStore(zk, "group2").write({("t", 0): 1})
    zk.create("/consumers/empty/ids", makepath=True)  # a group without offsets is skipped, not a crash
    out = tmp_path / "offsets.txt"
    assert export_zookeeper(zk, None, out) == 3
    assert out.read_text().splitlines() == [
        "/consumers/group1/offsets/topic1/0:286894308",
        "/consumers/group1/offsets/topic1/1:7",
        "/consumers/group2/offsets/t/0:1",
    ]
    assert export_zookeeper(zk, ["group2"], tmp_path / "g2.jsonl") == 1
    zk.delete("/consumers/group1", recursive=True)
    report = import_offsets(read_offsets_file(out), ZooKeeperTarget(zk), tmp_path / "j")
    assert report.written_batches == 2
    assert zk.get("/consumers/group1/offsets/topic1/0")[0] == b"286894308"


def test_never_regress_import_keeps_newer_offsets(zk: Any) -> None:
    ZooKeeperOffsetStore(zk, "g").write({("t", 0): 100})
    target = ZooKeeperTarget(zk, never_regress=True)
    import_offsets([OffsetRecord("g", "t", 0, 40), OffsetRecord("g", "t", 1, 40)], target)
    assert target.kept_higher == 1
    assert ZooKeeperOffsetStore(zk, "g").read().offsets == {("t", 0): 100, ("t", 1): 40}


class ExpiringTarget(ZooKeeperTarget):
    """Expires the ZooKeeper session during the third batch and reports that batch failed."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.calls = 0

    def write(self, group: str, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        self.calls += 1
        if self.calls == 3:
            expire_session(self.client)
            return dict.fromkeys(offsets, "SessionExpiredError")
        return super().write(group, offsets)


def test_import_interrupted_by_session_expiry_resumes(zk: Any, tmp_path: Path) -> None:
    records = [OffsetRecord("g", "t", p, 1000 + p) for p in range(50)]
    journal = tmp_path / "import.journal"
    with pytest.raises(ImportFailed, match="batch 3/5"):
        import_offsets(records, ExpiringTarget(zk), journal, batch_size=10)
    assert len(ZooKeeperOffsetStore(zk, "g").read().offsets) == 20
    report = import_offsets(records, ZooKeeperTarget(zk), journal, batch_size=10)
    assert (report.resumed_batches, report.written_batches) == (2, 3)
    assert ZooKeeperOffsetStore(zk, "g").read().offsets == {("t", p): 1000 + p for p in range(50)}


def test_snapshot_reads_the_broker_side_from_a_record_log(
    zk: Any, zk_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    from zkcoord.cli import main
    from zkcoord.records.offsets import OffsetCommitKey, OffsetCommitValue, encode_records
    from zkcoord.storage import FileRecordStore

    ZooKeeperOffsetStore(zk, "g1").write({("t", 0): 9, ("t", 1): 4})
    log_dir = tmp_path / "group-records"
    store = FileRecordStore(log_dir)
    store.append(
        encode_records(
            [
                (OffsetCommitKey("g1", "t", 0), OffsetCommitValue(12, -1, "", 0)),
                (OffsetCommitKey("g1", "t", 1), OffsetCommitValue(4, -1, "", 0)),
            ]
        )
    )
    store.close()
    out = tmp_path / "snap"
    args = ["migrate", "snapshot", "--zk", zk_connect, "--broker-records", str(log_dir), "--out", str(out)]
    assert main(args) == 0
    assert "broker (record logs): 2 offset(s)" in capsys.readouterr().out

    def rows(name: str) -> list[tuple[str, str, int, int]]:
        table = pq.read_table(out / name).to_pylist()
        return [(r["group"], r["topic"], r["partition"], r["offset"]) for r in table]

    assert rows("zookeeper.parquet") == [("g1", "t", 0, 9), ("g1", "t", 1, 4)]
    assert rows("broker.parquet") == [("g1", "t", 0, 12), ("g1", "t", 1, 4)]
    assert main([*args, "--bootstrap", "127.0.0.1:1"]) == 2
    assert "either --bootstrap or --broker-records" in capsys.readouterr().err
    assert main([*args[:-2], "--out", str(out), "--broker-records", str(tmp_path / "nope")]) == 2
    assert "not a record log directory" in capsys.readouterr().err
