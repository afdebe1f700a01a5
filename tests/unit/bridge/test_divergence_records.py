"""The divergence pipeline's broker side from `__consumer_offsets` records: the coordinator's replay over small
hand-made logs (last commit wins, tombstones delete, a bad record is named, torn tails ignored read-only)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from migration.divergence.snapshot import RecordLogError, broker_rows_from_records, snapshot_broker_records
from zkcoord.records.offsets import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, encode_records
from zkcoord.storage import FileRecordStore


def _commit(group: str, topic: str, partition: int, offset: int) -> tuple[OffsetCommitKey, OffsetCommitValue]:
    return OffsetCommitKey(group, topic, partition), OffsetCommitValue(offset, -1, "", 1_700_000_000_000)


RECORDS = encode_records(
    [
        _commit("g1", "t", 0, 5),
        _commit("g1", "t", 1, 3),
        _commit("g2", "t", 0, 7),
        _commit("g1", "t", 0, 9),  # the last commit wins
        (OffsetCommitKey("g1", "t", 1), None),  # tombstone: gone
        (GroupMetadataKey("g3"), None),  # a group tombstone carries no offsets
        _commit("g3", "u", 2, -1),  # no position: left out
    ]
)


def test_rows_are_what_a_loading_coordinator_would_answer() -> None:
    assert broker_rows_from_records(RECORDS) == [("g1", "t", 0, 9), ("g2", "t", 0, 7)]
    assert broker_rows_from_records(RECORDS, groups=["g2", "nope"]) == [("g2", "t", 0, 7)]
    assert broker_rows_from_records([]) == []


def test_a_record_that_does_not_decode_is_named_not_skipped() -> None:
    key, value = RECORDS[0]
    bad = [*RECORDS[:2], (key, (value or b"")[:5])]
    with pytest.raises(RecordLogError, match=r"log: record 2: malformed"):
        broker_rows_from_records(bad, source="log")


def _write_log(directory: Path, records: list[tuple[bytes, bytes | None]]) -> None:
    store = FileRecordStore(directory)
    try:
        store.append(records)
    finally:
        store.close()


def test_snapshot_from_record_log_directories(tmp_path: Path) -> None:
    _write_log(tmp_path / "a", RECORDS)
    _write_log(tmp_path / "b", encode_records([_commit("g9", "t", 4, 44)]))
    segment = sorted((tmp_path / "a").iterdir())[-1]
    with open(segment, "ab") as out:
        out.write(b"\x00\x00\x00\x30torn")  # a coordinator mid-append
    size = segment.stat().st_size
    rows = snapshot_broker_records([tmp_path / "a", tmp_path / "b"], None, tmp_path / "broker.parquet")
    assert rows == 3
    assert segment.stat().st_size == size  # read-only: the live log is not cut
    table = pq.read_table(tmp_path / "broker.parquet").to_pylist()
    assert [(r["group"], r["topic"], r["partition"], r["offset"]) for r in table] == [
        ("g1", "t", 0, 9),
        ("g2", "t", 0, 7),
        ("g9", "t", 4, 44),
    ]


def test_two_logs_claiming_one_group_or_a_missing_directory_are_errors(tmp_path: Path) -> None:
    _write_log(tmp_path / "a", RECORDS)
    _write_log(tmp_path / "b", encode_records([_commit("g2", "t", 0, 8)]))
    with pytest.raises(RecordLogError, match="group 'g2' has offsets in two record logs"):
        snapshot_broker_records([tmp_path / "a", tmp_path / "b"], None, tmp_path / "x.parquet")
    with pytest.raises(RecordLogError, match="not a record log directory"):
        snapshot_broker_records([tmp_path / "missing"], None, tmp_path / "x.parquet")
