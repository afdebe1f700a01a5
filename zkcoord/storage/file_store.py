"""Append-only segment files of CRC-framed records, compacted in the background; recovery drops only a torn tail
and never a valid record.

Layout of a directory: `<sequence number, 20 digits>.seg` files, rolled at `segment_bytes`. A frame is
`length: uint32 | crc32: uint32 | payload`, with payload `key_len: uint32 | key | value_len: int32 (-1 = null) | value`
and the CRC-32 (zlib) over the payload.

On open every segment is scanned. A frame that is incomplete or fails its CRC is followed by a search for the next
valid frame (`resync`), except a frame cut short by a crash: its header's length runs past the end of the file
and its key and value lengths agree with it, so what follows is its own (client-written) payload, never searched.
If no valid frame follows and the damage is in the last segment holding data, it is a torn write from a crash (the
last, partial write): its bytes are copied to `<segment>.torn-<byte>` (`.torn-<byte>.1` ... if that name is taken:
never overwritten) and the segment is truncated before them. A whole last frame (its length fits the bytes left
exactly, not all zeros) that fails its CRC is no partial write but damage. If a valid frame follows anywhere (or
the damage is in an earlier segment, or is a whole last frame), a crash cannot explain it: `CorruptLog` is raised naming each damaged range (file, bytes, reason) and the valid records and bytes
after it, and nothing is changed. `repair` (`zkcoord replay DIR --repair`) then rewrites the damaged segments
without the damaged ranges, keeping those bytes in side files and each original segment as `.before-repair`.

A segment that is sealed (rolled at `segment_bytes`, ended for a compaction, or a compaction's output: never
appended to again) gets a seal, `<segment>.sealed`: its size, the CRC-32 of the whole file and its frame count,
with a CRC of its own. An open checks a sealed segment by one CRC-32 over the file against its seal instead of
walking its frames (10 ms instead of 0.45 s for 1M records); a seal that does not match (damaged, stale) is
reported as a WARNING and the segment walked as if it had none, so damage is refused exactly as without seals.
A seal is never the only copy of anything: losing one costs a walk.

The open only checks the log (CRCs, counts); the first `load` then streams it record by record, so a node
loading its groups holds the state it builds and one segment's bytes, not every record. A segment whose checked bytes
still have the CRC-32 taken at the open (one pass over the file) has its frames' CRCs not checked again. Compaction: see
`FileRecordStore`.

fsync policy: "always" (fsync before `append` returns), "interval" (at most every `fsync_interval_ms`, and on
close), "never" (leave it to the OS; a process crash loses nothing, a machine crash may). A compaction fsyncs its
output whatever the policy, before it deletes what the output replaces.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.errors import ConfigError, ErrorCode, ZkcoordError
from zkcoord.storage.aside import fsync_dir, keep_torn_tail, write_durably
from zkcoord.storage.store import RawRecord

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">II")
_KLEN = struct.Struct(">I")
_VLEN = struct.Struct(">i")
_FRAME_AND_KLEN = struct.Struct(">III")
SUFFIX = ".seg"
SWAP = ".swap"
COMPACTING = ".compacting"
# The first frame of a compacted segment: a key no __consumer_offsets record has (key version -1), whose value
# holds the birth time (ms, int64) of each tombstone in the segment, in order. `load` never returns it.
COMPACTED_MARK = b"\xff\xffzkcoord.compacted"
_BIRTH = struct.Struct(">q")
# A sealed segment's seal, `<segment>.sealed`: what its open check found, so the next open need not walk its frames.
SEAL = ".sealed"
_SEAL_MAGIC = b"ZKSEAL01"
_SEAL = struct.Struct(">8sQIQB")  # magic, segment size, CRC-32 of the whole segment, frames, compacted (0/1)
_SEAL_CRC = struct.Struct(">I")  # CRC-32 of the fields before it
FSYNC_POLICIES = ("always", "interval", "never")
# Segments roll at 16 MiB (Kafka's offsets.topic.segment.bytes is 100 MiB): a rolled segment is sealed, so a start
# walks the frames of at most this many bytes written since the last roll (~225k offset records, ~0.1 s), the rest
# being checked by one CRC-32 a file.
SEGMENT_BYTES = 16 * 1024 * 1024
_MIN_FRAME = 16  # header (8) + key_len (4) + value_len (4)


@dataclass(frozen=True, slots=True)
class Problem:
    """A damaged byte range of a segment that a crash cannot explain, and the valid data after it in the log."""

    path: Path
    start: int
    end: int
    why: str
    records_after: int
    bytes_after: int

    def __str__(self) -> str:
        return (
            f"{self.path} at byte {self.start}: {self.why}; {self.end - self.start} damaged bytes "
            f"(bytes {self.start}..{self.end - 1}), followed by {self.records_after} valid records "
            f"({self.bytes_after} bytes)"
        )


class CorruptLog(ZkcoordError):
    """A record log is damaged where a crash cannot explain it; names each file, byte range and what follows."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, path: Path, position: int, reason: str, problems: Sequence[Problem] = ()) -> None:
        if problems:
            lines = "\n".join(f"  {p}" for p in problems)
            directory = path
            message = (
                f"corrupt record log {directory}: {len(problems)} damaged range(s) that a crash cannot explain; "
                f"nothing was changed:\n{lines}\n"
                f"Stop every process using it, copy the directory, then run `zkcoord replay {directory} --repair` "
                f"(docs/operations.md, 'Corruption and recovery')."
            )
        else:
            message = f"corrupt record log {path} at byte {position}: {reason}"
        super().__init__(message)
        self.path = path
        self.position = position
        self.problems = tuple(problems)


def frame(key: bytes, value: bytes | None) -> bytes:
    payload = b"".join(
        (
            _KLEN.pack(len(key)),
            key,
            _VLEN.pack(-1 if value is None else len(value)),
            b"" if value is None else value,
        )
    )
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def frames(records: Sequence[RawRecord]) -> bytes:
    """`frame` over many records, as one buffer for a single write."""
    parts: list[bytes] = []
    append = parts.append
    head = _FRAME.pack
    crc32 = zlib.crc32
    klen = _KLEN.pack
    vlen = _VLEN.pack
    for key, value in records:
        if value is None:
            payload = klen(len(key)) + key + b"\xff\xff\xff\xff"
        else:
            payload = b"".join((klen(len(key)), key, vlen(len(value)), value))
        append(head(len(payload), crc32(payload)))
        append(payload)
    return b"".join(parts)


def _parse_payload(payload: bytes) -> RawRecord | None:
    if len(payload) < 8:
        return None
    (klen,) = _KLEN.unpack_from(payload, 0)
    if 4 + klen + 4 > len(payload):
        return None
    key = payload[4 : 4 + klen]
    (vlen,) = _VLEN.unpack_from(payload, 4 + klen)
    start = 8 + klen
    if vlen == -1:
        return (key, None) if start == len(payload) else None
    if vlen < 0 or start + vlen != len(payload):
        return None
    return key, payload[start:]


def _frame_at(data: bytes, pos: int) -> tuple[RawRecord | None, int, str]:
    """The frame starting at `pos`: (record, its end, "") or (None, pos, why it is not a valid frame)."""
    n = len(data)
    if pos + 8 > n:
        return None, pos, "incomplete frame header"
    length, crc = _FRAME.unpack_from(data, pos)
    end = pos + 8 + length
    if end > n:
        return None, pos, f"frame of {length} bytes runs past the end"
    payload = data[pos + 8 : end]
    if zlib.crc32(payload) != crc:
        return None, pos, "CRC mismatch"
    record = _parse_payload(payload)
    if record is None:
        return None, pos, "frame payload does not parse"
    return record, end, ""


def _valid_frame_at(data: bytes, q: int, n: int) -> bool:
    """Is there a valid frame at `q`? The lengths must agree before the CRC is paid for."""
    if q + _MIN_FRAME > n:
        return False
    (length,) = _KLEN.unpack_from(data, q)
    if length < 8 or q + 8 + length > n:
        return False
    (klen,) = _KLEN.unpack_from(data, q + 8)
    if 8 + klen > length:
        return False
    (vlen,) = _VLEN.unpack_from(data, q + 12 + klen)
    if vlen < -1 or 8 + klen + max(vlen, 0) != length:
        return False
    return _frame_at(data, q)[0] is not None


def _torn_frame(data: bytes, pos: int, n: int) -> bool:
    """Are the bytes from `pos` to the end one frame cut short by a crash: its header's length runs past the end,
    and its key length and value length are there and agree with it? Its value is a client's bytes, which may hold
    anything, valid frames too: nothing after `pos` is then searched for a frame. (A frame cut before its value
    length, or whose lengths disagree, is searched past as any damage is: a damaged length may point past valid
    frames.)"""
    if pos + 12 > n:
        return False
    (length,) = _KLEN.unpack_from(data, pos)
    if length < 8 or pos + 8 + length <= n:
        return False
    (klen,) = _KLEN.unpack_from(data, pos + 8)
    if 8 + klen > length or pos + 16 + klen > n:
        return False
    (vlen,) = _VLEN.unpack_from(data, pos + 12 + klen)
    return bool(vlen >= -1 and 8 + klen + max(vlen, 0) == length)


def _whole_last_frame(data: bytes, pos: int, n: int) -> bool:
    """Does the bad frame at `pos` end exactly at the end of `data` (its length fits the bytes left) and hold
    anything but zeros? A crash leaves a frame short or zero-filled, never whole: this one was damaged."""
    if pos + 8 > n:
        return False
    (length,) = _KLEN.unpack_from(data, pos)
    return pos + 8 + length == n and bool(data[pos:].strip(b"\0"))


def resync(data: bytes, pos: int) -> int | None:
    """The start of the first valid frame after a bad one at `pos`, or None if no valid frame follows.

    A torn write leaves a prefix of one frame at the end, so nothing valid follows it (`scan_segment` does not
    call this for a frame cut short whose lengths agree: its payload may hold frames); damage in the middle is
    followed by the frames written after it. Every byte position after `pos` is tried, in order (not the one the
    bad frame's length points to: a damaged length could point past a valid frame), so the damaged range ends at
    the first valid frame. A position costs a few integer comparisons unless its lengths agree.
    """
    n = len(data)
    for q in range(pos + 1, n - _MIN_FRAME + 1):
        if _valid_frame_at(data, q, n):
            return q
    return None


@dataclass(slots=True)
class SegmentScan:
    """What one segment file holds: its valid records (or only their count), the damaged ranges between them,
    and a trailing tail."""

    size: int = 0
    count: int = 0  # valid records
    first_key: bytes | None = None
    records: list[RawRecord] = field(default_factory=list)  # when kept
    ends: list[int] = field(default_factory=list)  # where each record's frame ends, when kept
    damage: list[tuple[int, int, str]] = field(
        default_factory=list
    )  # (start, end, why); a valid frame at end, or end is the end of the file (a whole last frame damaged)
    damage_before: list[int] = field(default_factory=list)  # valid records before each damaged range
    tail: tuple[int, str] | None = None  # (start, why): bytes with no valid frame after them
    checksum: int = 0  # CRC-32 of the bytes before `valid_end`

    @property
    def valid_end(self) -> int:
        """Where the file's last valid frame ends (where a torn tail starts)."""
        return self.tail[0] if self.tail is not None else self.size

    def records_after(self, pos: int) -> int:
        """Valid records after byte `pos`: the start of the file, the end of a damaged range, or its tail."""
        if pos <= 0:
            return self.count
        for (_, end, _), before in zip(self.damage, self.damage_before, strict=True):
            if end == pos:
                return self.count - before
        return 0

    def valid_bytes_after(self, pos: int) -> int:
        damaged = sum(end - max(start, pos) for start, end, _ in self.damage if end > pos)
        return max(0, self.valid_end - pos - damaged)


def scan_segment(data: bytes, keep: bool = True) -> SegmentScan:
    """Every valid frame of `data`, resynchronising after damage. Takes any bytes; never raises. `keep=False`
    only counts the records (recovery checks a whole log before it is loaded, without holding it twice).

    The loop is `_frame_at` inlined (it runs once per record): the CRC is taken over a view of the payload and
    the key and value are sliced from `data`.
    """
    out = SegmentScan(size=len(data))
    records = out.records
    ends = out.ends
    head = _FRAME.unpack_from
    klen_at = _KLEN.unpack_from
    vlen_at = _VLEN.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    count = 0
    pos = 0
    n = len(data)
    if n >= _MIN_FRAME:
        first = _frame_at(data, 0)[0]
        out.first_key = first[0] if first is not None else None
    while pos < n:
        if pos + _MIN_FRAME <= n:
            length, crc = head(data, pos)
            end = pos + 8 + length
            if length >= 8 and end <= n:
                (klen,) = klen_at(data, pos + 8)
                vstart = pos + 16 + klen
                if vstart <= end:
                    (vlen,) = vlen_at(data, vstart - 4)
                    if (vstart + vlen == end or (vlen == -1 and vstart == end)) and crc32(
                        view[pos + 8 : end]
                    ) == crc:
                        if keep:
                            records.append(
                                (data[pos + 12 : vstart - 4], None if vlen == -1 else data[vstart:end])
                            )
                            ends.append(end)
                        count += 1
                        pos = end
                        continue
        _, _, why = _frame_at(data, pos)
        if _whole_last_frame(data, pos, n):
            out.damage.append((pos, n, f"{why} in a whole last frame (damaged bytes, not a partial write)"))
            out.damage_before.append(count)
            break
        nxt = None if _torn_frame(data, pos, n) else resync(data, pos)
        if nxt is None:
            out.tail = (pos, why)
            break
        out.damage.append((pos, nxt, why))
        out.damage_before.append(count)
        pos = nxt
    out.count = count
    out.checksum = crc32(view[: out.valid_end])
    view.release()
    return out


def iter_records(path: Path, data: bytes, limit: int, skip_mark: bool = True) -> Iterator[RawRecord]:
    """The records of a segment already checked by `scan_segment`, one at a time, up to byte `limit` (the store's
    mark left out unless `skip_mark` is false); raises `CorruptLog` if a frame no longer checks (the file changed
    since)."""
    head = _FRAME_AND_KLEN.unpack_from  # length, crc, key length: one call
    vlen_at = _VLEN.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    pos = 0
    try:
        while pos < limit:
            ok = False
            if pos + _MIN_FRAME <= limit:
                length, crc, klen = head(data, pos)
                end = pos + 8 + length
                if length >= 8 and end <= limit:
                    vstart = pos + 16 + klen
                    if vstart <= end:
                        (vlen,) = vlen_at(data, vstart - 4)
                        ok = (vstart + vlen == end or (vlen == -1 and vstart == end)) and crc32(
                            view[pos + 8 : end]
                        ) == crc
            if not ok:
                why = _frame_at(data, pos)[2] or "frame"
                raise CorruptLog(path, pos, f"{why}: the file changed after the log was opened")
            key = data[pos + 12 : vstart - 4]
            if not (skip_mark and key == COMPACTED_MARK):
                yield key, None if vlen == -1 else data[vstart:end]
            pos = end
    finally:
        view.release()


def iter_verified(path: Path, data: bytes, limit: int) -> Iterator[RawRecord]:
    """`iter_records` (the store's mark left out) for bytes whose CRCs were checked by `scan_segment` and have not
    changed since (the caller proves it: one CRC-32 of the whole range equal to the one taken at the check, 10 ms for
    71 MB): the frame lengths are still checked, the frame CRCs not again (half the cost of a load's read: 0.25 s
    instead of 0.51 s for 1M records)."""
    head = _FRAME_AND_KLEN.unpack_from
    vlen_at = _VLEN.unpack_from
    pos = 0
    while pos < limit:
        if pos + _MIN_FRAME > limit:
            raise CorruptLog(path, pos, "incomplete frame header: the file changed after the log was opened")
        length, _, klen = head(data, pos)
        end = pos + 8 + length
        vstart = pos + 16 + klen
        if length < 8 or end > limit or vstart > end:
            raise CorruptLog(path, pos, "frame: the file changed after the log was opened")
        (vlen,) = vlen_at(data, vstart - 4)
        if vlen == -1 and vstart == end:
            value = None
        elif vstart + vlen == end:
            value = data[vstart:end]
        else:
            raise CorruptLog(
                path, pos, "frame payload does not parse: the file changed after the log was opened"
            )
        key = data[pos + 12 : vstart - 4]
        if key != COMPACTED_MARK:
            yield key, value
        pos = end


def seal_path(segment: Path) -> Path:
    return segment.with_name(segment.name + SEAL)


def write_seal(segment: Path, size: int, checksum: int, count: int, compacted: bool, fsync: bool) -> None:
    """Record that `segment` (sealed: never appended to again) is `size` bytes of `count` valid frames whose CRC-32
    as a whole is `checksum`. Written aside and renamed; a lost or damaged seal only costs the next open a walk."""
    body = _SEAL.pack(_SEAL_MAGIC, size, checksum, count, int(compacted))
    path = seal_path(segment)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(body + _SEAL_CRC.pack(zlib.crc32(body)))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def sealed_scan(segment: Path, data: bytes) -> tuple[SegmentScan | None, str]:
    """The open check of `data` (the bytes of `segment`) from its seal: (scan, "") when the seal parses and the
    whole file has the size and CRC-32 it records (its frames were all valid when it was written, and a CRC-32
    equal over the whole file says they still are); (None, why not) otherwise, (None, "") when there is no seal."""
    try:
        blob = seal_path(segment).read_bytes()
    except FileNotFoundError:
        return None, ""
    if len(blob) != _SEAL.size + _SEAL_CRC.size:
        return None, f"{len(blob)} bytes, not {_SEAL.size + _SEAL_CRC.size}"
    (crc,) = _SEAL_CRC.unpack_from(blob, _SEAL.size)
    if zlib.crc32(blob[: _SEAL.size]) != crc:
        return None, "its own CRC does not match"
    magic, size, checksum, count, compacted = _SEAL.unpack_from(blob)
    if magic != _SEAL_MAGIC or compacted not in (0, 1):
        return None, "not a seal this version writes"
    if size != len(data):
        return None, f"it records {size} bytes, the segment has {len(data)}"
    with memoryview(data) as view:
        if zlib.crc32(view) != checksum:
            return None, "the segment's CRC-32 differs from the one it records"
    seg = SegmentScan(size=size, count=count, checksum=checksum)
    if compacted:
        seg.first_key = COMPACTED_MARK
    return seg, ""


def scan(data: bytes) -> tuple[list[RawRecord], int, str]:
    """Parse frames from the start of `data`: (records, end of the last good frame, why it stopped or "")."""
    records: list[RawRecord] = []
    pos = 0
    while pos < len(data):
        record, end, why = _frame_at(data, pos)
        if record is None:
            return records, pos, why
        records.append(record)
        pos = end
    return records, pos, ""


def _swap_range(path: Path) -> tuple[int, int] | None:
    """(first, last) sequence numbers a compaction's `FIRST-LAST.swap` output replaces, None if not one."""
    first, dash, last = path.stem.partition("-")
    if path.suffix != SWAP or not dash or not first.isdigit() or not last.isdigit():
        return None
    return int(first), int(last)


def segment_files(directory: Path) -> list[Path]:
    """The log's files in order. A compaction output not yet renamed (`FIRST-LAST.swap`, complete: it is fsync'd
    before it gets that name) stands for the segments FIRST..LAST it replaces, so a reader never sees both."""
    entries = [p for p in directory.iterdir() if p.is_file()]
    swaps = [(r, p) for p in entries if (r := _swap_range(p)) is not None]
    out = [(r[0], p) for r, p in swaps]
    for p in entries:
        if p.suffix == SUFFIX and p.stem.isdigit():
            n = int(p.stem)
            if not any(a <= n <= b for (a, b), _ in swaps):
                out.append((n, p))
    return [p for _, p in sorted(out)]


@dataclass(slots=True)
class LogScan:
    """Every segment of a directory, scanned: what recovery, `zkcoord replay` and `repair` decide from."""

    directory: Path
    segments: list[tuple[Path, SegmentScan]]

    @property
    def records(self) -> list[RawRecord]:
        """Every record in log order, without the store's own compaction marks."""
        return [r for _, seg in self.segments for r in seg.records if r[0] != COMPACTED_MARK]

    def last_written(self) -> int:
        """Index of the last segment holding any byte (the only place a torn write can be), -1 if none."""
        for i in range(len(self.segments) - 1, -1, -1):
            if self.segments[i][1].size > 0:
                return i
        return -1

    def torn_tail(self) -> tuple[Path, int, int, str] | None:
        """(file, start, size, why) of the torn write at the end of the log, if there is one."""
        last = self.last_written()
        if last < 0:
            return None
        path, seg = self.segments[last]
        if seg.tail is None:
            return None
        return path, seg.tail[0], seg.size, seg.tail[1]

    def problems(self) -> list[Problem]:
        """Every damaged range a crash cannot explain, in log order, with the valid data after it."""
        last = self.last_written()
        out: list[Problem] = []
        for i, (path, seg) in enumerate(self.segments):
            ranges = list(seg.damage)
            if seg.tail is not None and i != last:
                ranges.append((seg.tail[0], seg.size, f"{seg.tail[1]}, in a segment that later ones follow"))
            for start, end, why in ranges:
                records = seg.records_after(end)
                nbytes = seg.valid_bytes_after(end)
                for _, later in self.segments[i + 1 :]:
                    records += later.count
                    nbytes += later.valid_bytes_after(0)
                out.append(Problem(path, start, end, why, records, nbytes))
        return out


def scan_log(directory: Path, keep: bool = True) -> LogScan:
    """Scan every segment of `directory`; reads only. A compaction of a running node may rename or delete a file
    between the listing and its read: the listing is then taken again (a few times at most)."""
    for attempt in range(5):
        try:
            return LogScan(
                directory, [(p, scan_segment(p.read_bytes(), keep)) for p in segment_files(directory)]
            )
        except FileNotFoundError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def _is_compacted(seg: SegmentScan) -> bool:
    """Is this segment a compaction's output (its first record the store's mark)?"""
    return seg.first_key == COMPACTED_MARK


def repair(directory: str | os.PathLike[str]) -> list[str]:
    """Rewrite each damaged segment of a stopped node's log without its damaged ranges; returns what was done.

    Crash-safe and idempotent: each damaged range goes to `<segment>.damaged-<start>-<end>`, the original file
    stays as `<segment>.before-repair` (a hard link), and the rewritten segment replaces it by an atomic rename
    after an fsync. A torn tail at the end of the log is moved aside as on a normal start. Valid records keep
    their order; only the damaged bytes leave the log.
    """
    path_dir = Path(directory)
    if not path_dir.is_dir():
        raise ConfigError(f"record log directory {path_dir} does not exist")
    scanned = scan_log(path_dir)
    done: list[str] = []
    last = scanned.last_written()
    for i, (path, seg) in enumerate(scanned.segments):
        cut: list[tuple[int, int, str]] = list(seg.damage)
        if seg.tail is not None:
            cut.append(
                (seg.tail[0], seg.size, seg.tail[1] if i == last else f"{seg.tail[1]} (not the last segment)")
            )
        if not cut:
            continue
        data = path.read_bytes()
        for start, end, why in cut:
            aside = path.with_name(f"{path.name}.damaged-{start}-{end}")
            write_durably(aside, data[start:end])
            done.append(f"{path}: moved bytes {start}..{end - 1} ({why}) to {aside.name}")
        backup = path.with_name(f"{path.name}.before-repair")
        if not backup.exists():
            os.link(path, backup)
        tmp = path.with_name(f"{path.name}.repairing")
        write_durably(tmp, frames(seg.records))
        fsync_dir(path_dir)
        os.replace(tmp, path)
        fsync_dir(path_dir)
        seal_path(path).unlink(missing_ok=True)  # it described the bytes before the repair
        done.append(
            f"{path}: rewritten with its {len(seg.records)} valid records; original kept as {backup.name}"
        )
    return done


class FileRecordStore:
    """A `RecordStore` over segment files in `directory` (created if missing), compacted in the background.

    Compaction (Kafka's log cleaner for a compacted topic, as `__consumer_offsets` is): once the bytes written
    since the last compaction reach both `compact_min_bytes` and the share `min_cleanable_ratio` of the log
    (Kafka's `min.cleanable.dirty.ratio`), `append` seals the active segment and a thread rewrites every sealed
    segment into one: the last record of each key, in log order; a tombstone is dropped once it is older than
    `delete_retention_ms` (Kafka's `log.cleaner.delete.retention.ms`). The request path never waits for it:
    appends go on into a new segment meanwhile. Crash-safe at every step: the output is written as
    `FIRST.compacting`, fsync'd, renamed `FIRST-LAST.swap` (the commit point), then the inputs are deleted and
    the swap renamed `FIRST.seg`; an open finishes an interrupted swap and deletes a `.compacting` file, whose
    inputs are all still there. So a crash leaves either the old segments or the new one, each complete, and a
    restart reads about the live set (at most twice it, plus `compact_min_bytes`), not the history.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        fsync: str = "always",
        *,
        fsync_interval_ms: int = 1000,
        segment_bytes: int = SEGMENT_BYTES,
        read_only: bool = False,
        compact_min_bytes: int = 4 * 1024 * 1024,
        min_cleanable_ratio: float = 0.5,
        delete_retention_ms: int = 86_400_000,
        clock: Callable[[], float] = time.time,
        compaction_step: Callable[[str], None] | None = None,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {FSYNC_POLICIES}, got {fsync!r}")
        if fsync_interval_ms < 0:
            raise ConfigError(f"fsync_interval_ms must be >= 0, got {fsync_interval_ms}")
        if segment_bytes < 64:
            raise ConfigError(f"segment_bytes must be >= 64, got {segment_bytes}")
        if compact_min_bytes < 0:
            raise ConfigError(f"compact_min_bytes must be >= 0 (0: never compact), got {compact_min_bytes}")
        if not 0.0 < min_cleanable_ratio < 1.0:
            raise ConfigError(f"min_cleanable_ratio must be in (0, 1), got {min_cleanable_ratio}")
        if delete_retention_ms < 0:
            raise ConfigError(f"delete_retention_ms must be >= 0, got {delete_retention_ms}")
        self.directory = Path(directory)
        self.fsync = fsync
        self.fsync_interval_ms = fsync_interval_ms
        self.segment_bytes = segment_bytes
        self.read_only = read_only
        self.compact_min_bytes = compact_min_bytes
        self.min_cleanable_ratio = min_cleanable_ratio
        self.delete_retention_ms = delete_retention_ms
        self._clock = clock
        self._step = (
            compaction_step  # tests: called at each step of a compaction (may raise to "crash" there)
        )
        self.dropped_tail_bytes = 0
        self.torn_tail: tuple[Path, int, int, str] | None = None  # (file, start, size, why) found on open
        self.compactions = 0  # completed
        self.compaction_error: BaseException | None = (
            None  # the last compaction's failure (it is not retried)
        )
        self._next_name = 0
        self._lock = threading.Lock()  # a compaction's swap against a reader's listing
        self._compactor: threading.Thread | None = None
        self._clean_bytes = 0  # size of the last compaction's output
        self._dirty_bytes = 0  # bytes written after it
        if read_only:
            if not self.directory.is_dir():
                raise ConfigError(f"record log directory {self.directory} does not exist")
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
        # (segment, its valid bytes, their CRC-32) for the first load
        self._checked: list[tuple[Path, int, int]] | None = None
        self._streaming = False  # the first load is reading the segments
        self._count = 0
        self._active: Path | None = None
        self._fd = -1
        self._size = 0
        self._seg_crc = 0  # CRC-32 of the active segment's bytes and its frames: its seal, once sealed
        self._seg_count = 0
        self._last_sync = time.monotonic()
        self._recover()

    # -------------------------------------------------------------------------------------------- recovery

    def segments(self) -> list[Path]:
        return segment_files(self.directory)

    def _recover(self) -> None:
        if not self.read_only:
            self._finish_interrupted_compaction()
        # checked whole; `load` then reads it record by record
        scanned = scan_log(self.directory, keep=False) if self.read_only else self._check_with_seals()
        problems = scanned.problems()
        if problems:
            raise CorruptLog(self.directory, problems[0].start, problems[0].why, problems)
        self.torn_tail = torn = scanned.torn_tail()
        if torn is not None:
            path, start, size, why = torn
            self.dropped_tail_bytes = size - start
            if self.read_only:
                log.warning(
                    "record log %s: ignoring a torn tail of %d bytes at byte %d (%s)",
                    path,
                    size - start,
                    start,
                    why,
                )
            else:
                aside = keep_torn_tail(path, start, path.read_bytes()[start:])
                log.warning(
                    "record log %s: cutting a torn tail of %d bytes at byte %d (%s); its bytes are kept in %s",
                    path,
                    size - start,
                    start,
                    why,
                    aside.name,
                )
                with open(path, "r+b") as f:
                    f.truncate(start)
                    f.flush()
                    os.fsync(f.fileno())
        # The first load trusts the frame CRCs of a segment whose checked bytes still have this CRC-32, and checks
        # them again otherwise.
        self._checked = [(path, seg.valid_end, seg.checksum) for path, seg in scanned.segments]
        self._count = sum(seg.count for _, seg in scanned.segments)
        sizes = [seg.valid_end for _, seg in scanned.segments]
        if scanned.segments and _is_compacted(scanned.segments[0][1]):
            self._clean_bytes = sizes[0]
            self._dirty_bytes = sum(sizes[1:])
        else:
            self._dirty_bytes = sum(sizes)
        self._active = None
        if scanned.segments:
            path, last = scanned.segments[-1]
            self._next_name = int(path.stem.partition("-")[0]) + 1
            if not _is_compacted(last):  # a compaction's output is never appended to
                self._active, self._size = path, last.valid_end
                self._seg_crc, self._seg_count = last.checksum, last.count
                if not self.read_only:
                    seal_path(path).unlink(missing_ok=True)  # appended to again: its seal would be stale

    def _check_with_seals(self) -> LogScan:
        """`scan_log` for this store's own open: a segment whose seal matches it (one CRC-32 over the file, 10 ms
        for 71 MB) is not walked frame by frame (0.45 s for 1M frames); any other segment is. A seal that does not
        match is reported and the segment walked, whatever it holds; a seal whose segment is gone, or one whose write
        a stop interrupted (`.sealed.tmp`), is removed (it describes only that file, and is never the only copy)."""
        segments: list[tuple[Path, SegmentScan]] = []
        for path in segment_files(self.directory):
            data = path.read_bytes()
            seg, why = sealed_scan(path, data)
            if seg is None:
                if why:
                    log.warning(
                        "record log %s: ignoring the seal of %s (%s); checking the segment frame by frame",
                        self.directory,
                        path.name,
                        why,
                    )
                seg = scan_segment(data, keep=False)
            segments.append((path, seg))
        for seal in self.directory.glob(f"*{SUFFIX}{SEAL}"):
            if not seal.with_name(seal.name[: -len(SEAL)]).exists():
                seal.unlink()
        for unfinished in self.directory.glob(f"*{SUFFIX}{SEAL}.tmp"):
            unfinished.unlink()  # a seal being written when the node stopped: never read, rewritten at the next seal
        return LogScan(self.directory, segments)

    def _finish_interrupted_compaction(self) -> None:
        """A crash during a compaction left either an incomplete `.compacting` output (its inputs are all still
        there: it is deleted) or a complete `.swap` (fsync'd before it got that name: its swap is finished)."""
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(COMPACTING) and path.is_file():
                log.warning(
                    "record log %s: removing %s, an interrupted compaction's output",
                    self.directory,
                    path.name,
                )
                path.unlink()
        for path in sorted(self.directory.iterdir()):
            span = _swap_range(path)
            if span is None:
                continue
            seg = scan_segment(path.read_bytes())
            if seg.damage or seg.tail is not None:
                start, why = (seg.damage[0][0], seg.damage[0][2]) if seg.damage else (seg.valid_end, "torn")
                raise CorruptLog(path, start, f"{why} in a compaction output, which was complete when named")
            log.warning("record log %s: finishing an interrupted compaction (%s)", self.directory, path.name)
            self._swap(path, span)

    def _swap(self, swap: Path, span: tuple[int, int], seal: tuple[int, int, int] | None = None) -> None:
        """Replace the segments `span` covers by `swap` (complete and fsync'd): delete them (and their seals),
        rename it; then seal it if `seal` (size, CRC-32, frames) is given."""
        first, last = span
        with self._lock:
            for seg in [p for p in self.directory.iterdir() if p.suffix == SUFFIX and p.stem.isdigit()]:
                if first <= int(seg.stem) <= last:
                    seal_path(seg).unlink(missing_ok=True)
                    seg.unlink()
                    self._at(f"deleted {seg.name}")
            fsync_dir(self.directory)
            output = self.directory / f"{first:020d}{SUFFIX}"
            os.replace(swap, output)
            fsync_dir(self.directory)
            if seal is not None:
                write_seal(output, *seal, compacted=True, fsync=True)

    # -------------------------------------------------------------------------------------------- protocol

    def load(self) -> Iterator[RawRecord]:
        """Every record in append order. The first call after open streams the segments recovery checked, one
        record at a time (a load holds the state it builds and one segment's bytes, not every record); once a
        compaction ran, or for a read-only reader, the log is read as it is now."""
        if self._checked is not None:
            checked, self._checked = self._checked, None
            if not self.read_only:
                return self._stream(checked)
            # A read-only reader may sit beside a running node whose compaction deletes the segments checked at
            # open: it reads them again, whole, below (the listing is retried if a file vanishes meanwhile).
        with self._lock:
            scanned = scan_log(self.directory)
        problems = scanned.problems()
        if problems:
            raise CorruptLog(self.directory, problems[0].start, problems[0].why, problems)
        torn = scanned.torn_tail()
        if torn is not None and not self.read_only:
            raise CorruptLog(torn[0], torn[1], torn[3])
        return iter(scanned.records)

    def _stream(self, checked: list[tuple[Path, int, int]]) -> Iterator[RawRecord]:
        self._streaming = True  # no compaction may delete these segments before they are read
        try:
            for path, limit, checksum in checked:
                data = path.read_bytes()
                with memoryview(data) as view:
                    same = len(data) >= limit and zlib.crc32(view[:limit]) == checksum
                if same:
                    yield from iter_verified(path, data, limit)  # its frames' CRCs were checked at open
                else:
                    yield from iter_records(path, data, limit)
        finally:
            self._streaming = False

    def append(self, records: Sequence[RawRecord]) -> None:
        if self.read_only:
            raise ZkcoordError(f"record log {self.directory} is open read-only")
        if not records:
            return
        if any(key == COMPACTED_MARK for key, _ in records):
            raise ZkcoordError(f"record key {COMPACTED_MARK!r} is reserved for the store's compaction mark")
        blob = frames(records)
        if self._fd < 0 or (self._size > 0 and self._size + len(blob) > self.segment_bytes):
            self._roll()
        written = 0
        view = memoryview(blob)
        while written < len(blob):
            written += os.write(self._fd, view[written:])
        self._size += len(blob)
        self._count += len(records)
        self._seg_crc = zlib.crc32(blob, self._seg_crc)
        self._seg_count += len(records)
        self._dirty_bytes += len(blob)
        if self.fsync == "always":
            os.fsync(self._fd)
        elif self.fsync == "interval":
            now = time.monotonic()
            if (now - self._last_sync) * 1000 >= self.fsync_interval_ms:
                os.fsync(self._fd)
                self._last_sync = now
        if self._compaction_due():
            # Not loaded yet: a load after this reads the log as it then is, not the segments opened.
            self._checked = None
            inputs = self._seal()
            self._compactor = threading.Thread(
                target=self._compact_in_background,
                args=(inputs,),
                name=f"compact-{self.directory.name}",
                daemon=True,
            )
            self._compactor.start()

    def _end_active(self) -> None:
        """Seal the active segment: fsync'd (unless fsync=never) and closed, never appended to again, and its seal
        written so that the next open need not walk its frames."""
        if self._fd >= 0:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
        if self._active is not None:
            write_seal(self._active, self._size, self._seg_crc, self._seg_count, False, self.fsync != "never")
            self._active = None

    def _roll(self) -> None:
        if self._fd >= 0:
            self._end_active()
        if self._active is None:
            # Names only need to sort in write order; after a repair or a compaction the record count lags them.
            name = max(self._count, self._next_name)
            self._active = self.directory / f"{name:020d}{SUFFIX}"
            self._next_name = name + 1
            self._size = 0
            self._seg_crc = 0
            self._seg_count = 0
        self._fd = os.open(self._active, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if self.fsync != "never":
            fsync_dir(self.directory)  # the new file's directory entry must survive a crash too

    def close(self) -> None:
        """Close the active segment; a compaction under way finishes first (it is bounded by the log's size)."""
        compactor = self._compactor
        if compactor is not None:
            compactor.join()
        if self._fd >= 0:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileRecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ compaction

    def _compaction_due(self) -> bool:
        if self.compact_min_bytes == 0 or self.compaction_error is not None or self._streaming:
            return False
        if self._compactor is not None and self._compactor.is_alive():
            return False
        dirty = self._dirty_bytes
        ratio = self.min_cleanable_ratio
        return dirty >= self.compact_min_bytes and dirty >= self._clean_bytes * ratio / (1.0 - ratio)

    def _seal(self) -> list[Path]:
        """End the active segment (the next append starts a new one); returns every segment, all sealed now."""
        self._end_active()
        self._dirty_bytes = 0
        return self.segments()

    def compact_now(self) -> None:
        """Seal the active segment and compact every segment, in the caller's thread (tests, tools)."""
        if self.read_only:
            raise ZkcoordError(f"record log {self.directory} is open read-only")
        if self._compactor is not None:
            self._compactor.join()
        self._checked = None
        self._compact(self._seal())

    def _compact_in_background(self, inputs: list[Path]) -> None:
        try:
            self._compact(inputs)
        except Exception as exc:
            # The inputs are intact (or the swap is complete and the next open finishes it); appends go on.
            self.compaction_error = exc
            log.error(
                "record log %s: compaction failed, not retried until a restart: %s", self.directory, exc
            )

    def _at(self, step: str) -> None:
        if self._step is not None:
            self._step(step)

    def _compact(self, inputs: list[Path]) -> None:
        if not inputs or (
            len(inputs) == 1 and _is_compacted(scan_segment(inputs[0].read_bytes(), keep=False))
        ):
            return  # nothing was written since the last compaction
        started = time.monotonic()
        now_ms = int(self._clock() * 1000)
        horizon = now_ms - self.delete_retention_ms
        latest: dict[bytes, tuple[bytes | None, int]] = {}  # key -> (value, birth of a tombstone)
        before = 0
        for path in inputs:
            data = path.read_bytes()
            before += len(data)
            seg = scan_segment(data, keep=False)
            if seg.damage or seg.tail is not None:
                raise CorruptLog(
                    path, seg.valid_end, "damage found while compacting; the log is left as it is"
                )
            births: list[int] = []
            for key, value in iter_records(path, data, len(data), skip_mark=False):
                if key == COMPACTED_MARK:
                    births = [b for (b,) in _BIRTH.iter_unpack(value or b"")]
                    births.reverse()
                    continue
                latest.pop(key, None)  # so the dict's order is the order of each key's last record
                # A tombstone's age counts from the first compaction that sees it (so from at most its write).
                latest[key] = (value, (births.pop() if births else now_ms) if value is None else 0)
            del data
        tombstone_births = [b for value, b in latest.values() if value is None and b >= horizon]
        dropped = sum(1 for value, b in latest.values() if value is None and b < horizon)
        self._at("read")
        first = int(inputs[0].stem)
        last = int(inputs[-1].stem)
        tmp = self.directory / f"{first:020d}{COMPACTING}"
        size = 0
        kept = 0
        checksum = 0  # of the output, for its seal
        with open(tmp, "wb") as f:
            chunk: list[RawRecord] = [(COMPACTED_MARK, b"".join(_BIRTH.pack(b) for b in tombstone_births))]
            for key, (
                value,
                birth,
            ) in latest.items():  # written in chunks: no second copy of the log in memory
                if value is None and birth < horizon:
                    continue
                chunk.append((key, value))
                if len(chunk) >= 8192:
                    blob = frames(chunk)
                    size += f.write(blob)
                    checksum = zlib.crc32(blob, checksum)
                    kept += len(chunk)
                    chunk.clear()
            blob = frames(chunk)
            size += f.write(blob)
            checksum = zlib.crc32(blob, checksum)
            kept += len(chunk) - 1  # not the mark
            self._at("written")
            f.flush()
            os.fsync(f.fileno())
        self._at("synced")
        swap = self.directory / f"{first:020d}-{last:020d}{SWAP}"
        os.replace(tmp, swap)
        fsync_dir(self.directory)
        self._at("swap")  # the commit point: from here an open finishes the compaction
        self._swap(swap, (first, last), (size, checksum, kept + 1))  # its frames: the records and the mark
        self._at("done")
        self._clean_bytes = size
        self.compactions += 1
        log.info(
            "record log %s: compacted %d segments, %d -> %d bytes, %d records kept, %d tombstones dropped (%.0f ms)",
            self.directory,
            len(inputs),
            before,
            size,
            kept,
            dropped,
            (time.monotonic() - started) * 1000,
        )
