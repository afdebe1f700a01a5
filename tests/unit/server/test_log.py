"""Partition logs: offsets, reads by offset and size, torn-tail recovery, producer sequence state after reopen."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from zkcoord.errors import ErrorCode
from zkcoord.records.batch import build_batch, iter_records, split_batches
from zkcoord.server.log import CorruptLog, InvalidConfig, LogManager, PartitionLog, TopicConfig

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
    assert (
        seg.with_name(f"{seg.name}.torn-{good}").read_bytes() == whole[: len(whole) - 5]
    )  # moved, not deleted
    assert again.next_offset == 1
    assert _append(again, build_batch([(None, b"next")])) == 1
    assert _values(again.read(0, 1 << 20)) == [b"keep", b"next"]


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    """Blocks the filesystem allocated for a write the crash never made are zeros: a torn tail too."""
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"keep")]))
    plog.close()
    seg = next((tmp_path / "t-0").glob("*.log"))
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(bytes(4096))
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert seg.stat().st_size == good
    assert _values(again.read(0, 1 << 20)) == [b"keep"]


def test_whole_last_batch_with_a_bad_crc_is_refused_not_truncated(tmp_path: Path) -> None:
    """A batch of full length whose CRC fails is a flipped byte, not a partial write: the records are kept."""
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"keep")]))
    plog.close()
    seg = next((tmp_path / "t-0").glob("*.log"))
    good = seg.stat().st_size
    bad = bytearray(build_batch([(None, b"garbled")], base_offset=1))
    bad[-1] ^= 0xFF
    with open(seg, "ab") as f:
        f.write(bytes(bad))
    with pytest.raises(CorruptLog) as info:
        PartitionLog(tmp_path / "t-0", "t", 0)
    assert f"{seg} at byte {good} of {good + len(bad)}" in info.value.report
    assert "CRC-32C mismatch" in info.value.report
    assert "not a partial write" in info.value.report
    assert seg.stat().st_size == good + len(bad)


def _batch_starts(path: Path) -> list[int]:
    data = path.read_bytes()
    return [h.position for h in split_batches(data)]


def test_every_flipped_byte_is_reported_and_no_batch_is_lost(tmp_path: Path) -> None:
    """Flip each byte of a two-segment log in turn (two masks): the partition either opens with every record
    intact (only a flip in a partitionLeaderEpoch field, which no CRC covers and no read uses), or refuses to
    open naming the file and the damaged batch's byte offset, with every file left byte for byte as it was."""
    pristine = tmp_path / "pristine" / "t-0"
    plog = PartitionLog(pristine, "t", 0, segment_bytes=1024)
    values = []
    for i in range(5):
        batch_values = [b"v%d-%d" % (i, j) for j in range(i + 1)]
        values.extend(batch_values)
        plog.segment_bytes = 1 if i == 3 else 1 << 20  # roll once: batches 3 and 4 go to a second segment
        _append(plog, build_batch([(b"k", v) for v in batch_values]))
    plog.close()
    files = sorted(pristine.glob("*.log"))
    assert len(files) == 2
    starts = {f.name: _batch_starts(f) for f in files}
    checked = opened = 0
    for name in starts:
        size = (pristine / name).stat().st_size
        for pos in range(size):
            for mask in (0x01, 0xFF):
                checked += 1
                work = tmp_path / f"flip-{name[-8:-4]}-{pos}-{mask}"
                shutil.copytree(pristine, work)
                target = work / name
                data = bytearray(target.read_bytes())
                data[pos] ^= mask
                target.write_bytes(bytes(data))
                before = {f.name: f.read_bytes() for f in work.glob("*.log")}
                batch = max(s for s in starts[name] if s <= pos)
                try:
                    again = PartitionLog(work, "t", 0)
                    read = _values(again.read(0, 1 << 20))
                    again.close()
                except CorruptLog as exc:
                    assert f"{target} at byte {batch} of {size}" in exc.report, (pos, exc.report)
                    assert {f.name: f.read_bytes() for f in work.glob("*.log")} == before
                else:
                    opened += 1
                    assert 12 <= pos - batch < 16, (name, pos, "a flip outside partitionLeaderEpoch opened")
                    assert read == values
                shutil.rmtree(work)
    assert opened == 4 * 5 * 2  # the epoch bytes of five batches, both masks
    assert checked == 2 * sum(f.stat().st_size for f in files)


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


def test_documented_repair_cuts_the_damaged_batch_into_a_gap(tmp_path: Path) -> None:
    """docs/operations.md's repair: the valid batches after the damage move to a segment file named after their
    first offset, the damaged file is truncated at the damage; the log opens with a gap of offsets."""
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    for v in (b"a", b"b", b"c"):
        _append(plog, build_batch([(None, v)]))
    plog.close()
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    starts = _batch_starts(seg)
    data[starts[1] + 40] ^= 0x10  # damage the batch of offset 1
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptLog) as info:
        PartitionLog(tmp_path / "t-0", "t", 0)
    assert f"at byte {starts[1]} of {len(data)}" in info.value.report
    assert f"a valid batch follows at byte {starts[2]} of {seg.name} (offsets 2..2)" in info.value.report
    (tmp_path / "t-0" / f"{2:020d}.log").write_bytes(bytes(data[starts[2] :]))
    os.truncate(seg, starts[1])
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert _values(again.read(0, 1 << 20)) == [b"a", b"c"]
    assert _values(again.read(1, 1 << 20)) == [b"c"]  # a consumer in the gap reads on
    assert again.next_offset == 3
    assert _append(again, build_batch([(None, b"d")])) == 3


def test_overlapping_segments_are_refused(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"a"), (None, b"b")]))
    plog.close()
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    copy = tmp_path / "t-0" / f"{1:020d}.log"
    copy.write_bytes(seg.read_bytes())
    with pytest.raises(CorruptLog, match="starts at offset 1 but the segment before it ends at offset 1"):
        PartitionLog(tmp_path / "t-0", "t", 0)
    assert copy.stat().st_size == seg.stat().st_size


def _segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.log"))


def test_retention_bytes_deletes_whole_old_segments_and_moves_the_start(tmp_path: Path) -> None:
    config = TopicConfig(retention_ms=-1, retention_bytes=3000, segment_bytes=1024)
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config=config)
    for i in range(60):
        _append(plog, build_batch([(None, b"x" * 40 + b"%d" % i)]))
    before = _segment_bases(tmp_path / "t-0")
    assert len(before) > 4
    assert plog.apply_retention(now_ms=0) > 0
    after = _segment_bases(tmp_path / "t-0")
    assert after == before[-len(after) :]  # oldest first, whole segments
    assert plog.log_start_offset == after[0]
    assert sum(s.size for s in plog.segments) >= 3000 - 1024  # what is left still covers retention.bytes ...
    assert sum(s.size for s in plog.segments[1:]) < 3000  # ... and no further segment could go
    assert plog.read(after[0] - 1, 1 << 20) == b""  # below the start: nothing (the broker says OUT_OF_RANGE)
    assert _values(plog.read(after[0], 1 << 20))[0] == b"x" * 40 + b"%d" % after[0]
    plog.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0, config=config)
    assert again.log_start_offset == after[0] and again.next_offset == 60


def test_retention_ms_uses_the_newest_timestamp_and_never_the_active_segment(tmp_path: Path) -> None:
    config = TopicConfig(retention_ms=1000, segment_bytes=1024)
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config=config)
    for i in range(40):
        _append(plog, build_batch([(None, b"y" * 60)], base_timestamp=10_000 + i))
    segs = len(plog.segments)
    assert segs > 2
    assert plog.apply_retention(now_ms=10_000 + 1000) == 0  # nothing older than 1 s yet
    last_ts_of_first = max(plog.segments[0].max_timestamps)
    assert plog.apply_retention(now_ms=last_ts_of_first + 1001) == 1
    assert plog.apply_retention(now_ms=10**12) == segs - 2  # all but the active one
    assert len(plog.segments) == 1 and plog.log_start_offset == plog.segments[0].base_offset


def test_flush_messages_fsyncs_after_that_many_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config=TopicConfig(flush_messages=5, flush_ms=60_000))
    for _ in range(4):
        _append(plog, build_batch([(None, b"a")]))
    assert synced == []
    _append(plog, build_batch([(None, b"b")]))
    assert len(synced) == 1
    batch = build_batch([(None, b"c")])
    plog.append([(h, memoryview(batch)) for h in split_batches(batch)], now_ms=1_000)
    plog.maybe_flush(60_999)
    assert len(synced) == 1
    plog.maybe_flush(61_000)  # flush.ms after the first unflushed write
    assert len(synced) == 2


def test_topic_configs_are_validated_and_kept(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, defaults=TopicConfig())
    with pytest.raises(InvalidConfig, match=r"'cleanup\.policy' is not supported"):
        logs.create_topic("c", 1, {"cleanup.policy": "compact"})
    with pytest.raises(InvalidConfig, match=r"retention\.ms must be >= -1"):
        logs.create_topic("c", 1, {"retention.ms": "-5"})
    with pytest.raises(InvalidConfig, match="not an integer"):
        logs.create_topic("c", 1, {"segment.bytes": "big"})
    assert "c" not in logs.topics
    logs.create_topic("t", 2, {"retention.bytes": "4096", "cleanup.policy": "delete"})
    assert logs.get("t", 1).config.retention_bytes == 4096  # type: ignore[union-attr]
    logs.close()
    again = LogManager(tmp_path, defaults=TopicConfig())
    assert again.topic_config("t").retention_bytes == 4096
    (tmp_path / "logs" / "t-0" / "topic-config.json").write_text("{not json")
    broken = LogManager(tmp_path, defaults=TopicConfig())
    assert broken.topic_config("t").retention_ms == -1  # unreadable: retention off, never shorter
    assert broken.topic_config("t").retention_bytes == -1


def test_tick_applies_retention_each_interval_to_opened_logs_only(tmp_path: Path) -> None:
    defaults = TopicConfig(retention_ms=-1, retention_bytes=1024, segment_bytes=1024)
    logs = LogManager(tmp_path, defaults=defaults, retention_check_interval_ms=1000)
    for name in ("used", "idle"):
        plog = logs.create_topic(name, 1)[0]
        for _ in range(40):
            _append(plog, build_batch([(None, b"z" * 60)]))
    logs.close()
    logs = LogManager(tmp_path, defaults=defaults, retention_check_interval_ms=1000)
    used, idle = logs.get("used", 0), logs.get("idle", 0)
    assert used is not None and idle is not None
    assert used.log_start_offset == 0  # opened by its use
    logs.tick(0)
    logs.tick(999)
    assert used.log_start_offset == 0  # the first check comes one interval after the first tick
    logs.tick(1000)
    assert used.log_start_offset > 0
    assert not idle.opened  # not scanned just for retention
    assert idle.log_start_offset == 0  # its first use opens it; the next check applies retention
    logs.tick(2000)
    assert idle.log_start_offset > 0


def test_segments_without_timestamps_age_by_their_file_time(tmp_path: Path) -> None:
    """Records of magic-0 producers carry no timestamp (-1): retention.ms counts from the segment file's
    modification time, as Kafka's LogSegment.largestTimestamp, instead of deleting them as if from 1970."""
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config=TopicConfig(retention_ms=1000, segment_bytes=1024))
    for _ in range(40):
        _append(plog, build_batch([(None, b"w" * 60)], timestamps=[-1]))
    assert len(plog.segments) > 2 and max(plog.segments[0].max_timestamps) == -1
    first = plog.segments[0].path
    written_ms = int(first.stat().st_mtime * 1000)
    assert plog.apply_retention(now_ms=written_ms + 1000) == 0  # written just now: kept
    os.utime(first, (first.stat().st_atime, (written_ms - 5000) / 1000))  # as if written 5 s earlier
    assert plog.apply_retention(now_ms=written_ms + 1000) == 1


def test_a_torn_batch_whose_record_embeds_a_whole_batch_is_a_torn_tail(tmp_path: Path) -> None:
    """A record's value is the client's bytes and may hold a whole valid batch: a crash cutting the write after
    it leaves a torn tail, not a batch 'following' the damage (which would make the partition unopenable)."""
    plog = PartitionLog(tmp_path / "t-0", "t", 0)
    _append(plog, build_batch([(None, b"keep")]))
    plog.close()
    seg = next((tmp_path / "t-0").glob("*.log"))
    good = seg.stat().st_size
    embedded = build_batch([(None, b"inner")], base_offset=1)
    outer = build_batch([(None, b"value:" + embedded + b":more")], base_offset=1)
    cut = outer.index(embedded) + len(embedded) + 2
    with open(seg, "ab") as f:
        f.write(outer[:cut])  # a crash in the middle of the write, after the embedded batch
    again = PartitionLog(tmp_path / "t-0", "t", 0)
    assert seg.stat().st_size == good
    assert seg.with_name(f"{seg.name}.torn-{good}").read_bytes() == outer[:cut]  # moved, not deleted
    assert again.next_offset == 1
    assert _values(again.read(0, 1 << 20)) == [b"keep"]
