"""FileRecordStore: append/load order, torn-tail recovery, corruption in old segments, rolling, fsync policies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.storage import CorruptLog, FileRecordStore, MemoryRecordStore
from zkcoord.storage.file_store import COMPACTED_MARK, frame, frames, iter_records, iter_verified, scan

RECORDS = [(b"k1", b"v1"), (b"k2", None), (b"", b""), (b"k3", b"x" * 1000)]


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_append_then_reopen_loads_everything_in_order(tmp_path: Path, policy: str) -> None:
    with FileRecordStore(tmp_path, fsync=policy) as store:
        store.append(RECORDS[:2])
        store.append(RECORDS[2:])
        store.append([])
    with FileRecordStore(tmp_path) as again:
        assert list(again.load()) == RECORDS
        assert list(again.load()) == RECORDS  # a second load re-reads the files


@pytest.mark.parametrize("cut", [1, 5, 8, 9, 12])
def test_torn_tail_is_truncated_and_earlier_records_kept(tmp_path: Path, cut: int) -> None:
    with FileRecordStore(tmp_path) as store:
        store.append(RECORDS)
    (seg,) = FileRecordStore(tmp_path).segments()
    size = seg.stat().st_size
    last = frame(b"k4", b"torn")
    with open(seg, "ab") as f:
        f.write(last[:cut])  # a crash in the middle of writing the next record
    store = FileRecordStore(tmp_path)
    assert list(store.load()) == RECORDS
    assert seg.stat().st_size == size
    store.append([(b"k5", b"after")])
    store.close()
    assert list(FileRecordStore(tmp_path).load()) == [*RECORDS, (b"k5", b"after")]


def test_bad_crc_in_the_whole_last_frame_is_refused_not_dropped(tmp_path: Path) -> None:
    """A whole last frame failing its CRC was damaged, not torn by a crash: the store refuses to open (it dropped
    the record as a torn tail before)."""
    with FileRecordStore(tmp_path) as store:
        store.append(RECORDS)
    (seg,) = FileRecordStore(tmp_path).segments()
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptLog):
        FileRecordStore(tmp_path)
    assert seg.read_bytes() == bytes(data)


def test_damage_in_an_older_segment_raises_and_changes_nothing(tmp_path: Path) -> None:
    with FileRecordStore(tmp_path, segment_bytes=64) as store:
        for i in range(10):
            store.append([(b"key", b"value-%d" % i)])
    segments = FileRecordStore(tmp_path, segment_bytes=64).segments()
    assert len(segments) > 2
    first = segments[0]
    data = bytearray(first.read_bytes())
    data[10] ^= 0x01
    first.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in segments}
    with pytest.raises(CorruptLog) as info:
        FileRecordStore(tmp_path)
    assert str(first) in str(info.value) and "CRC mismatch" in str(info.value)
    assert {p: p.read_bytes() for p in segments} == before


def test_segments_roll_and_load_across_them(tmp_path: Path) -> None:
    with FileRecordStore(tmp_path, segment_bytes=100) as store:
        for i in range(20):
            store.append([(b"k%d" % i, b"v")])
    reopened = FileRecordStore(tmp_path, segment_bytes=100)
    assert len(reopened.segments()) > 3
    assert [k for k, _ in reopened.load()] == [b"k%d" % i for i in range(20)]
    names = [p.name for p in reopened.segments()]
    assert names == sorted(names) and names[0] == "0" * 20 + ".seg"


def test_scan_reports_why_it_stopped() -> None:
    good = frame(b"a", b"b")
    assert scan(good) == ([(b"a", b"b")], len(good), "")
    assert scan(good + b"\x00\x00")[2] == "incomplete frame header"
    assert scan(good[:-1])[2].startswith("frame of")


def test_config_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        FileRecordStore(tmp_path, fsync="sometimes")
    with pytest.raises(ConfigError):
        FileRecordStore(tmp_path, segment_bytes=1)


def test_memory_store() -> None:
    store = MemoryRecordStore()
    store.append(RECORDS)
    assert list(store.load()) == RECORDS
    store.close()


def test_other_files_in_the_directory_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    os.mkdir(tmp_path / "sub")
    with FileRecordStore(tmp_path) as store:
        store.append(RECORDS[:1])
    assert list(FileRecordStore(tmp_path).load()) == RECORDS[:1]


def test_frames_equals_concatenated_frame() -> None:
    from zkcoord.storage.file_store import frames

    assert frames(RECORDS) == b"".join(frame(k, v) for k, v in RECORDS)


def test_a_segment_changed_in_place_after_open_is_checked_again_by_the_first_load(tmp_path: Path) -> None:
    """The first load skips the frame CRCs only of bytes whose CRC-32 is still the one taken at open: a value
    changed in place (same size) after the open is found by its frame's CRC, not loaded."""
    with FileRecordStore(tmp_path) as store:
        store.append(RECORDS)
    store = FileRecordStore(tmp_path)  # checked here
    (seg,) = store.segments()
    data = bytearray(seg.read_bytes())
    at = bytes(data).index(b"v1")
    data[at] ^= 0x01
    with open(seg, "r+b") as f:
        f.write(bytes(data))
    with pytest.raises(CorruptLog, match="CRC mismatch: the file changed after the log was opened") as err:
        list(store.load())
    assert err.value.path == seg
    assert seg.read_bytes() == bytes(data)  # nothing changed by the load


_RAW = st.lists(st.tuples(st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=40))), max_size=30)


@given(_RAW)
def test_iter_verified_yields_what_iter_records_yields(records: list[tuple[bytes, bytes | None]]) -> None:
    data = frames(records)
    path = Path("segment")
    expected = [r for r in records if r[0] != COMPACTED_MARK]  # the store's mark is never loaded
    assert list(iter_verified(path, data, len(data))) == list(iter_records(path, data, len(data))) == expected


@settings(max_examples=300)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=200))
def test_iter_verified_on_any_bytes_yields_within_them_or_raises_corrupt_log(data: bytes, cut: int) -> None:
    """Fail closed: whatever the bytes, the trusted reader never reads past `limit` nor raises anything else."""
    limit = min(cut, len(data))
    try:
        for key, value in iter_verified(Path("segment"), data, limit):
            assert len(key) + len(value or b"") <= limit
    except CorruptLog as exc:
        assert "the file changed after the log was opened" in str(exc)
