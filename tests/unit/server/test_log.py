"""Partition logs: offsets, reads by offset and size, torn-tail recovery, producer sequence state after reopen."""

from __future__ import annotations

import os
from pathlib import Path

from zkcoord.errors import ErrorCode
from zkcoord.records.batch import build_batch, iter_records, split_batches
from zkcoord.server.log import LogManager, PartitionLog

OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def _append(plog: PartitionLog, batch: bytes) -> int:
    headers = split_batches(batch)
    mv = memoryview(batch)
    return plog.append([(h, mv[h.position : h.position + h.size]) for h in headers])


def _values(data: bytes) -> list[bytes | None]:
    out = []
    pos = 0
    while pos < len(data):
        h = split_batches(data[pos:])[0]
        out.extend(r.value for r in iter_records(data[pos : pos + h.size]))
        pos += h.size
    return out


def test_offsets_reads_and_reopen(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    assert _append(plog, build_batch([(None, b"a"), (None, b"b")])) == 0
    assert _append(plog, build_batch([(None, b"c")])) == 2
    assert plog.next_offset == 3
    assert _values(plog.read(0, 1 << 20)) == [b"a", b"b", b"c"]
    assert _values(plog.read(2, 1 << 20)) == [b"c"]
    assert _values(plog.read(1, 1)) == [b"a", b"b"]  # at least one whole batch, even over max_bytes
    assert plog.read(3, 1 << 20) == b""
    plog.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert again.next_offset == 3
    assert _values(again.read(0, 1 << 20)) == [b"a", b"b", b"c"]


def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"keep")]))
    plog.close()
    seg = next((tmp_path / "t-0").glob("*.log"))
    good = seg.stat().st_size
    whole = build_batch([(None, b"torn")], base_offset=1)
    with open(seg, "ab") as f:
        f.write(whole[: len(whole) - 5])  # a crash in the middle of a write
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert seg.stat().st_size == good
    assert again.next_offset == 1
    assert _append(again, build_batch([(None, b"next")])) == 1
    assert _values(again.read(0, 1 << 20)) == [b"keep", b"next"]


def test_garbled_tail_with_full_length_is_truncated(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"keep")]))
    plog.close()
    seg = next((tmp_path / "t-0").glob("*.log"))
    bad = bytearray(build_batch([(None, b"garbled")], base_offset=1))
    bad[-1] ^= 0xFF
    with open(seg, "ab") as f:
        f.write(bytes(bad))
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert again.next_offset == 1


def test_segments_roll_and_read_across(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, segment_bytes=1024)
    for i in range(40):
        _append(plog, build_batch([(None, b"%03d" % i + b"x" * 60)]))
    assert len(plog.segments) > 1
    values = _values(plog.read(0, 1 << 20))
    assert [v[:3] for v in values if v] == [b"%03d" % i for i in range(40)]
    plog.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0, segment_bytes=1024)
    assert again.next_offset == 40
    assert len(_values(again.read(17, 1 << 20))) == 40 - 17


def test_producer_sequences_survive_reopen(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    first = build_batch([(None, b"a"), (None, b"b")], producer_id=7, producer_epoch=0, base_sequence=0)
    _append(plog, first)
    plog.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    header = split_batches(first)[0]
    assert again.check_sequence(header) == (0, 0)  # a retry of the same batch: its original offset
    gap = split_batches(build_batch([(None, b"c")], producer_id=7, producer_epoch=0, base_sequence=5))[0]
    assert again.check_sequence(gap)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = split_batches(build_batch([(None, b"c")], producer_id=7, producer_epoch=0, base_sequence=2))[0]
    assert again.check_sequence(nxt) == (0, None)


def test_log_manager_discovers_topics(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path)
    mgr.create_topic("my-topic", 3)
    mgr.close()
    again = LogManager(tmp_path)
    assert sorted(again.topics) == ["my-topic"]
    assert len(again.topics["my-topic"]) == 3
    assert again.get("my-topic", 3) is None
    assert os.path.isdir(tmp_path / "logs" / "my-topic-2")
