"""FileRecordStore recovery: a torn tail is cut (kept aside), damage followed by valid data is refused and reported,
`repair` cuts only the damaged bytes; every byte of a small log flipped in turn loses no valid record."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.storage import CorruptLog, FileRecordStore
from zkcoord.storage.file_store import COMPACTED_MARK, frame, frames, repair, scan_segment
from zkcoord.storage.store import RawRecord

RECORDS: list[RawRecord] = [
    (b"k%d" % i, None if i % 5 == 3 else (b"v%d-" % i) * (i % 4 + 1)) for i in range(14)
] + [(b"", b""), (b"last", b"x" * 40)]


def write_log(directory: Path, records: Sequence[RawRecord], segment_bytes: int = 200) -> None:
    with FileRecordStore(directory, segment_bytes=segment_bytes) as store:
        for record in records:
            store.append([record])


def frame_spans(directory: Path) -> list[tuple[str, int, int]]:
    """(file, start, end) of every record's frame, in log order (the log is undamaged)."""
    spans = []
    for path in FileRecordStore(directory, read_only=True).segments():
        pos = 0
        for end in scan_segment(path.read_bytes()).ends:
            spans.append((path.name, pos, end))
            pos = end
    return spans


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pristine")
    write_log(d, RECORDS)
    return d


def test_the_small_log_spans_segments(pristine: Path) -> None:
    assert len(FileRecordStore(pristine, read_only=True).segments()) >= 3
    assert list(FileRecordStore(pristine, read_only=True).load()) == RECORDS


@pytest.mark.parametrize("mask", [0x01, 0xFF])
def test_flipping_each_byte_loses_no_valid_record_and_reports_precisely(
    pristine: Path, tmp_path: Path, mask: int
) -> None:
    spans = frame_spans(pristine)
    original = files(pristine)
    refused = cut = 0
    for index, (name, start, end) in enumerate(spans):
        for pos in range(start, end):
            d = tmp_path / f"{index}-{pos}"
            shutil.copytree(pristine, d)
            data = bytearray(original[name])
            data[pos] ^= mask
            (d / name).write_bytes(bytes(data))
            damaged = files(d)
            expected = RECORDS[:index] + RECORDS[index + 1 :]  # only the damaged record may go
            try:
                store = FileRecordStore(d)
            except CorruptLog as exc:
                refused += 1
                assert files(d) == damaged, "a refused start changed a file"
                (problem,) = exc.problems
                assert (problem.path.name, problem.start, problem.end) == (name, start, end)
                assert problem.records_after == len(RECORDS) - index - 1
                assert problem.bytes_after == sum(e - s for _, s, e in spans[index + 1 :])
                assert f"{d / name} at byte {start}" in str(exc) and "--repair" in str(exc)
                repair(d)
                assert list(FileRecordStore(d).load()) == expected
                assert (d / f"{name}.damaged-{start}-{end}").read_bytes() == bytes(data[start:end])
                assert (d / f"{name}.before-repair").read_bytes() == bytes(data)
            else:
                cut += 1
                # Only the last frame of the log may be taken for a torn write, and its bytes are kept.
                assert index == len(spans) - 1, f"byte {pos} of {name}: opened without record {index}"
                assert list(store.load()) == expected
                assert (d / f"{name}.torn-{start}").read_bytes() == bytes(data[start:end])
                store.close()
            shutil.rmtree(d)
    # Only a damaged length of the last frame (it then stops short of the end or runs past it) looks like a torn
    # write; any other damaged byte leaves that frame whole, which a crash cannot explain.
    assert cut == 4
    assert refused == sum(e - s for _, s, e in spans) - 4


@pytest.mark.parametrize("cut", range(1, 78, 3))
def test_a_torn_batch_is_cut_kept_aside_and_the_log_goes_on(tmp_path: Path, cut: int) -> None:
    write_log(tmp_path, RECORDS[:4], segment_bytes=10_000)
    (seg,) = FileRecordStore(tmp_path).segments()
    size = seg.stat().st_size
    written: list[RawRecord] = [(b"t1", b"a" * 10), (b"t2", None), (b"t3", b"c" * 20)]
    torn = frames(written)[:cut]
    with open(seg, "ab") as f:
        f.write(torn)  # a crash in the middle of writing a batch
    survived = [r for i, r in enumerate(written) if len(frames(written[: i + 1])) <= cut]
    store = FileRecordStore(tmp_path)
    assert list(store.load()) == RECORDS[:4] + survived
    kept = size + sum(len(frame(*r)) for r in survived)
    assert seg.stat().st_size == kept
    aside = tmp_path / f"{seg.name}.torn-{kept}"
    if kept < size + cut:
        assert aside.read_bytes() == torn[kept - size :]
    else:  # the crash fell between two frames: nothing torn
        assert not aside.exists()
    store.append([(b"after", b"1")])
    store.close()
    assert list(FileRecordStore(tmp_path).load()) == RECORDS[:4] + survived + [(b"after", b"1")]


def test_zeroed_tail_after_a_machine_crash_is_cut(tmp_path: Path) -> None:
    write_log(tmp_path, RECORDS[:3])
    (seg,) = FileRecordStore(tmp_path).segments()
    with open(seg, "ab") as f:
        f.write(bytes(4096))  # the file grew but the data never reached the disk
    assert list(FileRecordStore(tmp_path).load()) == RECORDS[:3]


def test_garbage_between_valid_frames_is_refused_not_cut(tmp_path: Path) -> None:
    write_log(tmp_path, RECORDS[:3], segment_bytes=10_000)
    (seg,) = FileRecordStore(tmp_path).segments()
    good = seg.read_bytes()
    seg.write_bytes(good + b"\x00\x00\x01\x00garbage" + frames(RECORDS[3:9]))
    before = files(tmp_path)
    with pytest.raises(CorruptLog) as info:
        FileRecordStore(tmp_path)
    assert files(tmp_path) == before
    (problem,) = info.value.problems
    assert (problem.start, problem.end, problem.records_after) == (len(good), len(good) + 11, 6)
    assert problem.bytes_after == len(frames(RECORDS[3:9]))


def test_an_empty_segment_after_the_last_written_one_does_not_hide_a_torn_tail(tmp_path: Path) -> None:
    write_log(tmp_path, RECORDS, segment_bytes=200)
    segments = FileRecordStore(tmp_path).segments()
    with open(segments[-1], "ab") as f:
        f.write(frame(b"torn", b"x")[:5])
    (tmp_path / f"{int(segments[-1].stem) + 100:020d}.seg").write_bytes(b"")  # created, never written
    assert list(FileRecordStore(tmp_path).load()) == RECORDS


def test_new_segments_sort_after_repaired_ones(tmp_path: Path) -> None:
    big = [(b"b%d" % i, b"v" * 60) for i in range(6)]  # one record per segment
    write_log(tmp_path, big, segment_bytes=64)
    for seg in FileRecordStore(tmp_path).segments()[:3]:
        data = bytearray(seg.read_bytes())
        data[9] ^= 0xFF
        seg.write_bytes(bytes(data))
    repair(tmp_path)  # three records fewer than the segment names count
    more = [(b"n%d" % i, b"v" * 60) for i in range(3)]
    with FileRecordStore(tmp_path, segment_bytes=64) as store:
        store.append(more[:1])
        store.append(more[1:])
    assert list(FileRecordStore(tmp_path).load()) == big[3:] + more


def test_repair_of_a_clean_log_changes_nothing(pristine: Path, tmp_path: Path) -> None:
    d = tmp_path / "log"
    shutil.copytree(pristine, d)
    assert repair(d) == []
    assert files(d) == files(pristine)


# ------------------------------------------------------------------------------------------------------ fuzzing

keys_st = st.binary(max_size=20).filter(lambda k: k != COMPACTED_MARK)  # the store's own key
records_st = st.lists(st.tuples(keys_st, st.none() | st.binary(max_size=40)), max_size=8)


@given(st.binary(max_size=600))
def test_any_bytes_scan_to_records_or_a_report(data: bytes) -> None:
    seg = scan_segment(data)
    covered = sorted([(s, e) for s, e, _ in seg.damage] + ([(seg.tail[0], seg.size)] if seg.tail else []))
    # every valid record re-frames to the bytes it was read from; records and damage tile the file
    pieces = []
    pos = 0
    ends = iter(seg.ends)
    records = iter(seg.records)
    damage = iter(covered)
    nxt_damage = next(damage, None)
    while pos < len(data):
        if nxt_damage is not None and nxt_damage[0] == pos:
            pieces.append(data[pos : nxt_damage[1]])
            pos = nxt_damage[1]
            nxt_damage = next(damage, None)
            continue
        end = next(ends)
        assert frame(*next(records)) == data[pos:end]
        pieces.append(data[pos:end])
        pos = end
    assert b"".join(pieces) == data


@given(st.binary(max_size=400))
def test_any_segment_bytes_open_or_raise_corrupt_log(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    d = tmp_path_factory.mktemp("fuzz")
    (d / f"{0:020d}.seg").write_bytes(data)
    try:
        store = FileRecordStore(d)
    except CorruptLog as exc:
        # damage a crash cannot explain: valid records follow it, or it is a whole last frame
        assert exc.problems and all(p.records_after > 0 or "whole last frame" in p.why for p in exc.problems)
        return
    list(store.load())
    store.close()


@given(
    records_st,
    st.binary(min_size=1, max_size=30),
    st.lists(st.tuples(keys_st, st.binary(max_size=40)), min_size=1, max_size=5),
)
def test_garbage_followed_by_valid_frames_never_loses_them(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[RawRecord],
    garbage: bytes,
    after: list[tuple[bytes, bytes]],
) -> None:
    d = tmp_path_factory.mktemp("fuzz")
    head = frames(before)
    seg = d / f"{0:020d}.seg"
    seg.write_bytes(head + garbage + frames(after))
    snapshot = seg.read_bytes()
    try:
        store = FileRecordStore(d)
    except CorruptLog as exc:
        assert seg.read_bytes() == snapshot
        first = exc.problems[0]
        assert first.start >= len(head)
        assert sum(p.records_after for p in exc.problems[:1]) >= len(after)
        repair(d)
        loaded = list(FileRecordStore(d).load())
    else:
        # the garbage happened to be whole valid frames
        loaded = list(store.load())
        store.close()
    assert loaded[: len(before)] == before
    assert loaded[len(loaded) - len(after) :] == after


def test_a_second_torn_tail_at_the_same_byte_never_overwrites_the_first(tmp_path: Path) -> None:
    """Two crashes tearing a write at the same byte of the same segment: both torn copies are kept."""
    write_log(tmp_path, RECORDS[:3], segment_bytes=10_000)
    (seg,) = FileRecordStore(tmp_path).segments()
    size = seg.stat().st_size
    first, second = frame(b"torn", b"first" * 8)[:30], frame(b"torn", b"second" * 8)[:25]
    for torn in (first, second):
        with open(seg, "ab") as f:
            f.write(torn)
        FileRecordStore(tmp_path).close()
        assert seg.stat().st_size == size
    assert (tmp_path / f"{seg.name}.torn-{size}").read_bytes() == first
    assert (tmp_path / f"{seg.name}.torn-{size}.1").read_bytes() == second
    assert list(FileRecordStore(tmp_path).load()) == RECORDS[:3]


@pytest.mark.parametrize("where", ["crc", "key", "value"])
def test_a_flipped_bit_in_the_whole_last_frame_is_refused_not_cut(tmp_path: Path, where: str) -> None:
    """A whole last frame (its length fits the bytes left exactly) whose CRC fails was damaged, not torn: a
    crash leaves a frame short. The store refuses to open, names the frame and changes nothing."""
    with FileRecordStore(tmp_path, fsync="always") as store:
        store.append([(b"first", b"1" * 10)])
        store.append([(b"second", b"2" * 10)])
    (seg,) = FileRecordStore(tmp_path).segments()
    start = len(frame(b"first", b"1" * 10))
    data = bytearray(seg.read_bytes())
    data[start + {"crc": 5, "key": 14, "value": len(data) - start - 1}[where]] ^= 0x01
    seg.write_bytes(bytes(data))
    before = files(tmp_path)
    with pytest.raises(CorruptLog) as info:
        FileRecordStore(tmp_path)
    assert files(tmp_path) == before  # nothing cut, nothing moved aside
    (problem,) = info.value.problems
    assert (problem.path, problem.start, problem.end) == (seg, start, len(data))
    assert (problem.records_after, problem.bytes_after) == (0, 0)
    assert "whole last frame" in problem.why and "--repair" in str(info.value)
    repair(tmp_path)  # the documented way on: the frame is kept aside, the log opens without it
    assert list(FileRecordStore(tmp_path).load()) == [(b"first", b"1" * 10)]
    assert (tmp_path / f"{seg.name}.damaged-{start}-{len(data)}").read_bytes() == bytes(data[start:])


EMBEDDED = frame(b"inner", b"a valid frame inside a value")  # OffsetCommit metadata is the client's bytes
OUTER = frame(b"outer", b"metadata:" + EMBEDDED + b":more")


@pytest.mark.parametrize("cut", range(OUTER.index(EMBEDDED) + len(EMBEDDED), len(OUTER)))
def test_a_torn_write_whose_value_embeds_a_valid_frame_is_a_torn_tail(tmp_path: Path, cut: int) -> None:
    """A write cut after a frame-shaped part of its value: the header's length runs past the end, so what
    follows it is that frame's payload, not a frame of its own: a torn tail, cut and kept aside."""
    write_log(tmp_path, RECORDS[:3], segment_bytes=10_000)
    (seg,) = FileRecordStore(tmp_path).segments()
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(OUTER[:cut])
    assert EMBEDDED in OUTER[:cut]
    store = FileRecordStore(tmp_path)
    assert list(store.load()) == RECORDS[:3]
    assert seg.stat().st_size == size
    assert (tmp_path / f"{seg.name}.torn-{size}").read_bytes() == OUTER[:cut]
    store.close()


def test_a_frame_whose_lengths_disagree_is_searched_past(tmp_path: Path) -> None:
    """A header whose length runs past the end but whose key length does not fit it is no frame a crash cut:
    the valid frames after it are found and the store refuses to open."""
    write_log(tmp_path, RECORDS[:3], segment_bytes=10_000)
    (seg,) = FileRecordStore(tmp_path).segments()
    good = seg.read_bytes()
    garbage = b"\x00\x00\x10\x00" + b"\x00" * 4 + b"\x00\x00\x20\x00"  # length 4096, key length 8192
    seg.write_bytes(good + garbage + frames(RECORDS[3:6]))
    with pytest.raises(CorruptLog) as info:
        FileRecordStore(tmp_path)
    (problem,) = info.value.problems
    assert (problem.start, problem.end, problem.records_after) == (len(good), len(good) + len(garbage), 3)
