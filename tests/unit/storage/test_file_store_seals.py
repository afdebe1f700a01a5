"""FileRecordStore seals: a sealed segment (rolled or a compaction's output) is checked at open by one CRC-32 of the
whole file against its seal instead of frame by frame; a seal that does not match is reported and the segment
walked, so damage is found and refused exactly as without seals; the load equals a full read of the log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcoord.storage import CorruptLog, FileRecordStore
from zkcoord.storage import file_store as fs
from zkcoord.storage.store import RawRecord


def records(n: int, start: int = 0) -> list[RawRecord]:
    return [(b"key-%d" % (i % 7), b"value-%06d" % i) for i in range(start, start + n)]


def written(tmp_path: Path, n: int = 40) -> list[RawRecord]:
    recs = records(n)
    with FileRecordStore(tmp_path, fsync="never", segment_bytes=200, compact_min_bytes=0) as store:
        for r in recs:
            store.append([r])
    return recs


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the segments the open walks frame by frame."""
    seen: list[int] = []
    real: Callable[..., Any] = fs.scan_segment

    def counting(data: bytes, keep: bool = True) -> fs.SegmentScan:
        seen.append(len(data))
        return real(data, keep)  # type: ignore[no-any-return]

    monkeypatch.setattr(fs, "scan_segment", counting)
    return seen


def test_rolled_segments_are_sealed_and_not_walked_at_open(tmp_path: Path, walks: list[int]) -> None:
    recs = written(tmp_path)
    segments = sorted(tmp_path.glob("*.seg"))
    assert len(segments) > 3
    assert sorted(tmp_path.glob("*.seg.sealed")) == [fs.seal_path(p) for p in segments[:-1]]
    walks.clear()
    store = FileRecordStore(tmp_path, fsync="never", segment_bytes=200, compact_min_bytes=0)
    assert walks == [segments[-1].stat().st_size]  # only the active segment, which has no seal
    assert list(store.load()) == recs
    store.close()


def test_a_compaction_output_is_sealed(tmp_path: Path, walks: list[int]) -> None:
    recs = written(tmp_path)
    with FileRecordStore(tmp_path, fsync="never", segment_bytes=200, compact_min_bytes=0) as store:
        store.compact_now()
    (segment,) = tmp_path.glob("*.seg")
    assert sorted(tmp_path.glob("*.sealed")) == [fs.seal_path(segment)]
    walks.clear()
    again = FileRecordStore(tmp_path, fsync="never", compact_min_bytes=0)
    assert walks == []
    last = {k: v for k, v in recs}
    assert dict(again.load()) == last
    again.append(records(1, 100))  # a compaction's output is never appended to: a new segment
    again.close()
    assert len(list(tmp_path.glob("*.seg"))) == 2


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[:-1], "32 bytes, not 33"),
        (lambda b: b[:10] + bytes([b[10] ^ 1]) + b[11:], "its own CRC does not match"),
        (lambda b: b"", "0 bytes, not 33"),
    ],
)
def test_a_damaged_seal_is_reported_and_the_segment_walked(
    tmp_path: Path, walks: list[int], caplog: pytest.LogCaptureFixture, damage: Any, why: str
) -> None:
    recs = written(tmp_path)
    first = sorted(tmp_path.glob("*.seg"))[0]
    seal = fs.seal_path(first)
    seal.write_bytes(damage(seal.read_bytes()))
    walks.clear()
    with caplog.at_level(logging.WARNING, logger=fs.__name__):
        store = FileRecordStore(tmp_path, fsync="never", segment_bytes=200)
    assert f"ignoring the seal of {first.name} ({why}); checking the segment frame by frame" in caplog.text
    assert walks[0] == first.stat().st_size
    assert list(store.load()) == recs
    store.close()


def test_a_segment_damaged_under_its_seal_is_refused_as_without_one(tmp_path: Path) -> None:
    written(tmp_path)
    first = sorted(tmp_path.glob("*.seg"))[0]
    data = bytearray(first.read_bytes())
    data[30] ^= 0xFF
    first.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(CorruptLog) as sealed:
        FileRecordStore(tmp_path)
    for seal in tmp_path.glob("*.sealed"):
        seal.unlink()
    with pytest.raises(CorruptLog) as unsealed:
        FileRecordStore(tmp_path)
    assert str(sealed.value) == str(unsealed.value)
    assert sealed.value.problems[0].path == first
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".sealed")} == {
        name: b for name, b in before.items() if not name.endswith(".sealed")
    }


def test_a_seal_whose_segment_is_gone_or_unfinished_is_removed_and_a_reopened_segment_loses_its_seal(
    tmp_path: Path,
) -> None:
    written(tmp_path)
    orphan = tmp_path / f"{99999:020d}.seg.sealed"
    orphan.write_bytes(b"x")
    unfinished = tmp_path / f"{0:020d}.seg.sealed.tmp"
    unfinished.write_bytes(b"half a seal")
    segments = sorted(tmp_path.glob("*.seg"))
    # the last segment sealed (as `_seal` leaves it before a compaction), then the node restarts: it is the active
    # segment again, appended to, so its seal would no longer describe it
    with FileRecordStore(tmp_path, fsync="never", segment_bytes=200, compact_min_bytes=0) as store:
        store._seal()
    assert fs.seal_path(segments[-1]).exists()
    with FileRecordStore(tmp_path, fsync="never", segment_bytes=200, compact_min_bytes=0) as store:
        assert not orphan.exists()
        assert not unfinished.exists()
        assert not fs.seal_path(segments[-1]).exists()
        store.append(records(1, 500))
    with FileRecordStore(tmp_path, fsync="never", segment_bytes=200, read_only=True) as reader:
        assert list(reader.load())[-1] == records(1, 500)[0]


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(min_value=1, max_value=6)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_OPS)
def test_the_load_with_seals_equals_a_full_read_of_the_log(
    tmp_path_factory: Any, ops: list[tuple[str, int]]
) -> None:
    directory = tmp_path_factory.mktemp("log")
    n = 0

    def open_store() -> FileRecordStore:
        return FileRecordStore(directory, fsync="never", segment_bytes=120, compact_min_bytes=0)

    store = open_store()
    try:
        for op, k in ops:
            if op == "append":
                store.append(records(k, n))
                n += k
            elif op == "compact":
                store.compact_now()
            else:
                store.close()
                store = open_store()
                # a read-only reader checks every frame and ignores seals
                with FileRecordStore(directory, read_only=True) as reader:
                    assert list(store.load()) == list(reader.load())
    finally:
        store.close()
    store = open_store()
    with FileRecordStore(directory, read_only=True) as reader:
        assert list(store.load()) == list(reader.load())
    store.close()
