"""FileRecordStore compaction: last record per key in log order, tombstones kept for delete_retention_ms then
dropped, started by append without blocking it, and a crash at every step of it leaves a complete log."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.group.model import replay_all
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_record,
    encode_record,
)
from zkcoord.storage import FileRecordStore
from zkcoord.storage.file_store import COMPACTING, SWAP
from zkcoord.storage.store import RawRecord


def live(records: Iterable[RawRecord]) -> dict[bytes, bytes]:
    """What replaying `records` leaves: the last value per key, tombstoned keys gone."""
    out: dict[bytes, bytes] = {}
    for key, value in records:
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def history(n: int, keys: int = 20) -> list[RawRecord]:
    """`n` records over `keys` keys, every 7th a tombstone, every 5th of a key written only once (so every
    segment holds records nothing later supersedes)."""
    return [
        (b"u%06d" % i if i % 5 == 4 else b"k%03d" % (i % keys), None if i % 7 == 6 else b"v%06d" % i)
        for i in range(n)
    ]


def dir_bytes(directory: Path) -> int:
    """Bytes of the files in `directory` now (a compaction may remove one while they are counted)."""
    total = 0
    for entry in os.scandir(directory):
        with contextlib.suppress(FileNotFoundError):
            total += entry.stat().st_size
    return total


def read(directory: Path) -> list[RawRecord]:
    return list(FileRecordStore(directory, read_only=True).load())


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def write(directory: Path, records: Sequence[RawRecord], per_append: int = 10, **kw: object) -> None:
    with FileRecordStore(directory, "never", segment_bytes=400, compact_min_bytes=0, **kw) as store:  # type: ignore[arg-type]
        for i in range(0, len(records), per_append):
            store.append(records[i : i + per_append])


def test_compaction_keeps_the_last_record_of_each_key_in_log_order(tmp_path: Path) -> None:
    records = history(500)
    write(tmp_path, records)
    before = sum(p.stat().st_size for p in tmp_path.iterdir())
    with FileRecordStore(tmp_path, compact_min_bytes=0) as store:
        store.compact_now()
        assert len(store.segments()) == 1
    loaded = list(FileRecordStore(tmp_path).load())
    last_of_each: dict[bytes, bytes | None] = {}
    for key, value in records:
        last_of_each.pop(key, None)
        last_of_each[key] = value
    assert loaded == list(last_of_each.items())  # tombstones younger than a day are kept
    assert live(loaded) == live(records)
    assert dir_bytes(tmp_path) < before / 3  # 500 records, 120 keys


def test_real_coordinator_records_replay_the_same_after_compaction(tmp_path: Path) -> None:
    def member(i: int) -> MemberMetadataValue:
        return MemberMetadataValue(f"m{i}", None, "c", "/127.0.0.1", 30000, 10000, b"sub", b"asg")

    history_: list[Record] = []
    for n in range(30):
        group = f"g{n % 4}"
        members = tuple(member(i) for i in range(n % 3))
        history_.append(
            (GroupMetadataKey(group), GroupMetadataValue("consumer", n, "range", None, n, members))
        )
        for p in range(4):
            history_.append((OffsetCommitKey(group, "t", p), OffsetCommitValue(n * 10 + p, -1, "", n)))
        if n % 9 == 8:  # a group deleted: its offsets and its metadata tombstoned
            history_.extend((OffsetCommitKey("g1", "t", p), None) for p in range(4))
            history_.append((GroupMetadataKey("g1"), None))
    raw = [encode_record(r) for r in history_]
    write(tmp_path, raw, per_append=3)
    with FileRecordStore(tmp_path, compact_min_bytes=0) as store:
        store.compact_now()
    compacted = list(FileRecordStore(tmp_path).load())
    assert len(compacted) < len(raw) / 5
    view = replay_all([decode_record(k, v) for k, v in compacted])
    assert view.snapshot() == replay_all(history_).snapshot()


def test_tombstones_are_dropped_only_after_delete_retention(tmp_path: Path) -> None:
    clock = Clock()
    store = FileRecordStore(tmp_path, compact_min_bytes=0, delete_retention_ms=60_000, clock=clock)
    store.append([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    store.append([(b"a", None)])
    store.compact_now()  # the tombstone of a is first seen now
    clock.now += 40
    store.append([(b"b", None)])
    store.compact_now()  # a's tombstone is 40 s old: kept, with its age
    assert read(tmp_path) == [(b"c", b"1"), (b"a", None), (b"b", None)]
    clock.now += 30
    store.append([(b"d", b"1")])
    store.compact_now()  # a's is 70 s old, b's 30 s
    assert read(tmp_path) == [(b"c", b"1"), (b"b", None), (b"d", b"1")]
    store.close()
    clock.now += 31
    with FileRecordStore(tmp_path, compact_min_bytes=0, delete_retention_ms=60_000, clock=clock) as again:
        again.append([(b"e", b"1")])
        again.compact_now()  # the age survives a restart
        assert read(tmp_path) == [(b"c", b"1"), (b"d", b"1"), (b"e", b"1")]


def test_appends_start_compaction_and_the_log_stays_bounded_by_the_live_set(tmp_path: Path) -> None:
    sizes = []
    with FileRecordStore(tmp_path, "never", compact_min_bytes=20_000) as store:
        for n in range(2_000):
            store.append([(b"group-%d-partition-%d" % (n % 3, p), b"%020d" % n) for p in range(20)])
            compactor = store._compactor
            if compactor is not None:
                # Each compaction is waited for, so the bound below does not depend on how fast this machine
                # compacts while appends go on (that they do go on is the next test).
                compactor.join(30)
            sizes.append(dir_bytes(tmp_path))
        assert store.compactions >= 20 and store.compaction_error is None
    live_bytes = 60 * (8 + 4 + 20 + 4 + 20)
    # history: 2,000 x 20 x 56 bytes = 2.2 MB; the log: compacted live set + what was written since (< max(the
    # threshold, the compacted size) + one append)
    assert max(sizes) < live_bytes + 36 + 20_000 + 20 * 56, max(sizes)  # 36: the mark frame
    loaded = list(FileRecordStore(tmp_path).load())
    assert live(loaded) == {
        b"group-%d-partition-%d" % (n % 3, p): b"%020d" % n for n in (1997, 1998, 1999) for p in range(20)
    }


def test_appends_do_not_wait_for_a_compaction_in_progress(tmp_path: Path) -> None:
    release = threading.Event()
    reading = threading.Event()

    def step(name: str) -> None:
        if name == "read":
            reading.set()
            assert release.wait(30)

    store = FileRecordStore(tmp_path, compact_min_bytes=1_000, compaction_step=step)
    store.append(history(100))  # over the threshold: a compaction starts and stops at "read"
    assert reading.wait(30)
    for i in range(50):  # the compaction holds its step: every append still returns
        store.append([(b"during-%d" % i, b"x")])
    release.set()
    compactor = store._compactor
    assert compactor is not None
    compactor.join(30)
    assert store.compactions == 1
    store.close()
    assert live(FileRecordStore(tmp_path).load()) == live(
        history(100) + [(b"during-%d" % i, b"x") for i in range(50)]
    )


# --------------------------------------------------------------------------------- a crash at every step


class Crash(Exception):
    """Stands for the process dying at this point: nothing after it runs, the files stay as they are."""


def steps_of_one_compaction(tmp_path: Path, records: Sequence[RawRecord], per_append: int) -> list[str]:
    d = tmp_path / "probe"
    write(d, records, per_append)
    seen: list[str] = []
    with FileRecordStore(d, compact_min_bytes=0, compaction_step=seen.append) as store:
        store.compact_now()
    return seen


CASES = {"3 segments": (60, 20), "6 segments": (150, 30), "12 segments, small appends": (120, 5)}


@pytest.mark.parametrize("case", CASES)
def test_a_crash_at_any_step_of_compaction_leaves_a_complete_log(tmp_path: Path, case: str) -> None:
    n, per_append = CASES[case]
    records = history(n)
    after = [(b"after-the-seal", b"1"), (b"k000", b"newest")]  # written into the next segment meanwhile
    steps = steps_of_one_compaction(tmp_path, records, per_append)
    assert len(steps) >= 6 and steps[0] == "read" and steps[-1] == "done"
    crashed_at = []
    for crash_step in steps:
        d = tmp_path / crash_step.replace(" ", "-")
        write(d, records, per_append)

        def step(name: str, crash_step: str = crash_step) -> None:
            if name == crash_step:
                raise Crash(name)

        store = FileRecordStore(d, compact_min_bytes=0, compaction_step=step)
        with pytest.raises(Crash):
            store.compact_now()
        store.append(after)  # the node went on writing, then died
        crashed_at.append(sorted(p.suffix for p in d.iterdir() if p.suffix in (SWAP, COMPACTING)))
        reopened = FileRecordStore(d)
        assert live(reopened.load()) == live(records + after), crash_step
        assert not [p for p in d.iterdir() if p.suffix in (SWAP, COMPACTING)]
        reopened.close()
    # the crash points covered both sides of the commit point
    assert [".compacting"] in crashed_at and [".swap"] in crashed_at


def test_a_reader_during_the_swap_sees_each_record_once(tmp_path: Path) -> None:
    records = history(150)
    write(tmp_path, records, 30)

    def step(name: str) -> None:
        if name.startswith("deleted"):
            raise Crash(name)

    store = FileRecordStore(tmp_path, compact_min_bytes=0, compaction_step=step)
    with pytest.raises(Crash):
        store.compact_now()  # the swap is named, one input deleted, the others still there
    listing = sorted(p.name for p in tmp_path.iterdir())
    reader = FileRecordStore(tmp_path, read_only=True)
    assert live(reader.load()) == live(records)
    assert len(list(reader.load())) == len(live_last(records))
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # read-only: nothing finished, nothing moved


def live_last(records: Sequence[RawRecord]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for key, value in records:
        out[key] = value
    return out


@settings(max_examples=60)
@given(
    st.lists(
        st.one_of(
            st.lists(
                st.tuples(st.sampled_from([b"a", b"b", b"c", b""]), st.none() | st.binary(max_size=5)),
                max_size=6,
            ),
            st.just("compact"),
            st.just("reopen"),
        ),
        max_size=25,
    )
)
def test_any_interleaving_of_appends_compactions_and_restarts_replays_the_same(
    tmp_path_factory: pytest.TempPathFactory, ops: list[list[RawRecord] | str]
) -> None:
    d = tmp_path_factory.mktemp("ops")
    written: list[RawRecord] = []
    store = FileRecordStore(d, segment_bytes=64, compact_min_bytes=0)
    for op in ops:
        if op == "compact":
            store.compact_now()
        elif op == "reopen":
            store.close()
            store = FileRecordStore(d, segment_bytes=64, compact_min_bytes=0)
        else:
            assert isinstance(op, list)
            store.append(op)
            written.extend(op)
        assert live(FileRecordStore(d, read_only=True).load()) == live(written)
    store.close()


def test_a_reader_opened_before_a_compaction_reads_the_log_after_it(tmp_path: Path) -> None:
    records = history(150)
    write(tmp_path, records, 30)
    reader = FileRecordStore(tmp_path, read_only=True)  # checks the segments as they are now
    with FileRecordStore(tmp_path, compact_min_bytes=0) as writer:
        writer.compact_now()  # deletes every segment the reader checked
    assert live(reader.load()) == live(records)


def test_a_compaction_before_the_first_load_leaves_the_load_whole(tmp_path: Path) -> None:
    write(tmp_path, history(150), 30)
    store = FileRecordStore(tmp_path, compact_min_bytes=2_000)
    store.append(history(300)[150:])  # over the threshold: a compaction of the segments the open checked
    compactor = store._compactor
    assert compactor is not None
    compactor.join(30)
    assert store.compactions == 1
    assert live(store.load()) == live(history(300))
    store.close()
