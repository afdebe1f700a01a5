"""Partition logs: produced RecordBatch v2 bytes in append-only segment files, durable across kill -9.

Layout: `<data-dir>/logs/<topic>-<partition>/<base offset, 20 digits>.log`. A segment holds whole batches exactly as
produced, except for the base offset the log assigns (not covered by the CRC). The offset index (base offset, last
offset, file position, max timestamp per batch) is rebuilt on open by a scan that checks every batch's header,
CRC-32C and offset continuity. Only a torn tail (the last, partial write of a crash: a batch cut short, or a
zero-filled end) is truncated away; damage anywhere else, or a damaged batch that is complete, makes the partition
refuse to open (`CorruptLog`, naming file, byte offset and what follows) and nothing is deleted: the broker answers
KAFKA_STORAGE_ERROR for that partition and keeps serving the others. Producer-id sequence state is rebuilt from the
same headers so idempotent producers keep deduplicating across restarts.

Each topic has a `TopicConfig` (Kafka's retention.ms, retention.bytes, segment.bytes, flush.messages, flush.ms):
retention deletes whole old segments only, never the active one, and moves the log start offset; a deleted
topic's directories are renamed `*-delete` before removal, and logs set aside are renamed `*.stale`, never read.

Partition logs open lazily (a node with many partitions starts without touching them) and their segment files
share one descriptor budget (`log.max.open.files`, least recently used closed first); topic creation is bounded
by `max.partitions.per.topic` and `max.broker.partitions`.
"""

from __future__ import annotations

import bisect
import json
import logging
import mmap
import os
import re
import shutil
import struct
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.records.batch import (
    CRC_START,
    HEADER_SIZE,
    BatchHeader,
    CorruptBatch,
    build_batch,
    parse_header,
    validate_batch,
)
from zkcoord.records.crc32c import crc32c
from zkcoord.server.limits import LogLimits
from zkcoord.server.topic_ids import (
    PARTITION_METADATA_FILE,
    decode_partition_metadata,
    encode_partition_metadata,
)
from zkcoord.storage.aside import keep_torn_tail

log = logging.getLogger(__name__)

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# A deleted partition's directory is renamed `<topic>-<partition>.<uuid>-delete` (Kafka's naming) before its files
# are removed, so a crash mid-deletion leaves a directory that is never mistaken for a live partition and is
# removed at the next start.
DELETED_SUFFIX = "-delete"
CLUSTER_TOPIC_FILE = "cluster-topic"
STALE_SUFFIX = ".stale"  # a topic's logs set aside (not served, kept for the operator)
_BASE_OFFSET = struct.Struct(">q")


class InvalidTopic(ZkcoordError, ValueError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class PartitionLimitExceeded(InvalidTopic):
    """A topic creation or growth past max.partitions.per.topic / max.broker.partitions; INVALID_PARTITIONS."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidConfig(ZkcoordError, ValueError):
    """A topic config Kafka would refuse, or one zkcoord does not implement; Kafka's INVALID_CONFIG (40)."""

    code = ErrorCode.INVALID_CONFIG


INT64_MAX = 2**63 - 1
MIN_SEGMENT_BYTES = 1024


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's log settings with Kafka's meanings: the node's `log.*` defaults, overridden per topic by the
    configs of CreateTopics under Kafka's topic-level names (`TOPIC_CONFIGS`). Retention deletes whole segments
    only, oldest first, never the active (last) one: a segment goes when its newest record is older than
    `retention_ms`, or while the partition without it is still at least `retention_bytes` large."""

    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms / log.retention.ms (Kafka: 168 h); -1: no limit
    retention_bytes: int = -1  # retention.bytes / log.retention.bytes; -1: no limit
    segment_bytes: int = 64 * 1024 * 1024  # segment.bytes / log.segment.bytes (Kafka: 1 GiB)
    flush_messages: int = INT64_MAX  # flush.messages / log.flush.interval.messages: fsync after N records
    flush_ms: int = INT64_MAX  # flush.ms / log.flush.interval.ms: fsync data older than this

    def __post_init__(self) -> None:
        for name, low in (
            ("retention_ms", -1),
            ("retention_bytes", -1),
            ("segment_bytes", MIN_SEGMENT_BYTES),
            ("flush_messages", 1),
            ("flush_ms", 0),
        ):
            value = getattr(self, name)
            if not low <= value <= INT64_MAX:
                raise InvalidConfig(f"{_KAFKA_NAME[name]} must be >= {low}, got {value}")

    def with_overrides(self, configs: Mapping[str, str | None]) -> TopicConfig:
        """These defaults with a topic's configs applied; InvalidConfig names the first bad one."""
        changes: dict[str, int] = {}
        for key, value in configs.items():
            if key in _ACCEPTED_AS_DEFAULT and value in _ACCEPTED_AS_DEFAULT[key]:
                continue
            attr = TOPIC_CONFIGS.get(key)
            if attr is None:
                supported = ", ".join(sorted(TOPIC_CONFIGS))
                raise InvalidConfig(f"topic config {key!r} is not supported (supported: {supported})")
            try:
                changes[attr] = int(value) if value is not None else getattr(self, attr)
            except ValueError:
                raise InvalidConfig(f"topic config {key}={value!r}: not an integer") from None
        return replace(self, **changes)

    def overrides(self, defaults: TopicConfig) -> dict[str, str]:
        """The topic-level configs that differ from `defaults` (what a topic stores)."""
        return {
            _TOPIC_NAME[f.name]: str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }


TOPIC_CONFIGS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
}
_TOPIC_NAME = {attr: name for name, attr in TOPIC_CONFIGS.items()}
_KAFKA_NAME = _TOPIC_NAME
# Kafka topic configs whose only value here is Kafka's default: accepted and changing nothing.
_ACCEPTED_AS_DEFAULT = {"cleanup.policy": frozenset({"delete"})}
TOPIC_CONFIG_FILE = "topic-config.json"  # Kafka's /config/topics/T shape: {"version":1,"config":{...}}


class CorruptLog(ZkcoordError):
    """A partition log damaged somewhere other than its torn tail: it is not opened and nothing is truncated.
    Kafka's KAFKA_STORAGE_ERROR (its answer for a partition whose log directory is offline)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, report: str, path: Path, position: int) -> None:
        super().__init__(report)
        self.report = report
        self.path = path
        self.position = position


class OpenFiles:
    """The segment descriptors open at once, at most `budget`; the least recently used is closed for a new one
    (it reopens on its next use: segments are append-only files, so nothing is lost)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._open: OrderedDict[Segment, None] = OrderedDict()
        self.reopened = 0

    def fd(self, seg: Segment) -> int:
        if seg._fd is not None:
            self._open.move_to_end(seg)
            return seg._fd
        while len(self._open) >= self.budget:
            old, _ = self._open.popitem(last=False)
            old._release()
        seg._fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._open[seg] = None
        self.reopened += 1
        return seg._fd

    def forget(self, seg: Segment) -> None:
        self._open.pop(seg, None)

    def __len__(self) -> int:
        return len(self._open)


@dataclass(slots=True)
class _ProducerState:
    epoch: int
    last_seq: int
    # (base_sequence, base_offset) of recent batches: a retried batch gets its original offset back.
    recent: list[tuple[int, int, int]] = field(default_factory=list)


class Segment:
    """One segment file and its batch index (parallel lists, ordered by offset); its descriptor comes from the
    shared `OpenFiles` budget on use."""

    __slots__ = (
        "_fd",
        "_files",
        "base_offset",
        "last_offsets",
        "max_timestamps",
        "path",
        "positions",
        "size",
    )

    def __init__(self, path: Path, base_offset: int, files: OpenFiles) -> None:
        self.path = path
        self.base_offset = base_offset
        self._files = files
        self._fd: int | None = None
        self.size = 0
        self.positions: list[int] = []
        self.last_offsets: list[int] = []
        self.max_timestamps: list[int] = []

    @property
    def fd(self) -> int:
        return self._files.fd(self)

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._files.forget(self)
        self._release()


class PartitionLog:
    """The log of one topic partition. Recovered (scanned, torn tail truncated) at construction, or with
    `lazy` on first use, which is how LogManager opens them so a node with many partitions starts at once."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        segment_bytes: int = 64 * 1024 * 1024,
        files: OpenFiles | None = None,
        lazy: bool = False,
        config: TopicConfig | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = (
            config if config is not None else TopicConfig(retention_ms=-1, segment_bytes=segment_bytes)
        )
        self.segment_bytes = self.config.segment_bytes
        self._dirty: set[Segment] = set()  # segments written since the last fsync
        self._unflushed = 0  # records appended since the last fsync
        self._flushed_at_ms: int | None = None
        self._files = files if files is not None else OpenFiles(64)
        self._segments: list[Segment] = []
        self._log_start_offset = 0
        self._next_offset = 0
        self._producers: dict[int, _ProducerState] = {}
        self._recovered = False
        self._failure: CorruptLog | None = None
        directory.mkdir(parents=True, exist_ok=True)
        if not lazy:
            self._ready()

    # -- opening --------------------------------------------------------------------------------------------

    def _ready(self) -> None:
        if self._failure is not None:
            raise self._failure
        if not self._recovered:
            self._recovered = True
            try:
                self._recover()
            except CorruptLog as exc:
                self._failure = exc
                self.close()
                self._segments = []
                log.error("%s", exc.report)
                raise

    @property
    def opened(self) -> bool:
        """Recovered and usable (not lazily waiting for its first use, not refused as corrupt)."""
        return self._recovered and self._failure is None

    def open_error(self) -> CorruptLog | None:
        """Open (recover) the log if it is not yet; why it refuses to open, or None when it is usable."""
        try:
            self._ready()
        except CorruptLog as exc:
            return exc
        return None

    @property
    def segments(self) -> list[Segment]:
        self._ready()
        return self._segments

    @property
    def producers(self) -> dict[int, _ProducerState]:
        self._ready()
        return self._producers

    @property
    def log_start_offset(self) -> int:
        self._ready()
        return self._log_start_offset

    @property
    def next_offset(self) -> int:
        self._ready()
        return self._next_offset

    @next_offset.setter
    def next_offset(self, value: int) -> None:
        self._next_offset = value

    def _recover(self) -> None:
        for leftover in sorted(self.directory.glob("*.log.deleted")):  # a crash mid-retention
            leftover.unlink()
        segs: list[Segment] = []
        for path in sorted(self.directory.glob("*.log")):
            try:
                base = int(path.stem)
            except ValueError:
                log.warning("log %s-%d: ignoring stray file %s", self.topic, self.partition, path)
                continue
            segs.append(Segment(path, base, self._files))
        self._segments = segs
        expected = segs[0].base_offset if segs else 0
        for i, seg in enumerate(segs):
            if seg.base_offset < expected:
                raise CorruptLog(
                    f"partition log {self.topic}-{self.partition}: segment {seg.path} starts at offset "
                    f"{seg.base_offset} but the segment before it ends at offset {expected - 1}: overlapping "
                    "or misnamed segment files; the partition is not opened and nothing was deleted "
                    "(docs/operations.md, 'Partition log corruption')",
                    seg.path,
                    0,
                )
            if (
                seg.base_offset > expected
            ):  # a repaired log (docs/operations.md), or a segment file gone missing
                log.warning(
                    "log %s-%d: offsets %d..%d are in no segment (before %s)",
                    self.topic,
                    self.partition,
                    expected,
                    seg.base_offset - 1,
                    seg.path.name,
                )
                expected = seg.base_offset
            expected = self._scan(seg, expected, segs[i + 1 :])
        if segs:
            self._log_start_offset = segs[0].base_offset
        self._next_offset = expected
        if not segs:
            self._segments.append(Segment(self.directory / f"{0:020d}.log", 0, self._files))

    def _scan(self, seg: Segment, expected: int, later: list[Segment]) -> int:
        """Index `seg` batch by batch (header, CRC-32C, offsets continuing from `expected`) over the mapped file
        (memory stays bounded, nothing is copied but the headers); returns the offset after its last batch.
        Damage is handed to `_damaged`, which truncates a torn tail or raises."""
        file_size = os.fstat(seg.fd).st_size
        pos = 0
        reason = ""
        if file_size:
            with mmap.mmap(seg.fd, file_size, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
                while pos < file_size:
                    header, reason = _check_batch(view, pos, file_size, expected)
                    if header is None:
                        break
                    self._index(seg, pos, header)
                    expected = header.last_offset + 1
                    pos += header.size
        if pos < file_size:
            self._damaged(seg, pos, file_size, reason, later)
        seg.size = pos
        return expected

    def _damaged(self, seg: Segment, pos: int, file_size: int, reason: str, later: list[Segment]) -> None:
        """Truncate a torn tail at `pos`, or raise `CorruptLog` when valid data follows the damage or the damaged
        batch is whole (a flipped byte, not a partial write): only the last, partial write may be dropped."""
        where = f"partition log {self.topic}-{self.partition}: damaged batch in {seg.path} at byte {pos} of {file_size}"
        found = _find_batch(seg, pos, file_size)
        if found is not None and _inside_torn_batch(seg, pos, found[0], file_size):
            found = None  # the torn batch's own records (a client's bytes), not a batch of their own
        follows = (seg, *found) if found is not None else None
        for other in later:
            if follows is not None:
                break
            size = os.fstat(other.fd).st_size
            found = _find_batch(other, 0, size)
            follows = (other, *found) if found is not None else None
        later_bytes = sum(os.fstat(other.fd).st_size for other in later)
        if follows is None and later_bytes == 0 and _torn_tail(seg, pos, file_size):
            aside = keep_torn_tail(seg.path, pos, os.pread(seg.fd, file_size - pos, pos))
            log.warning(
                "%s (%s): a torn tail, truncating the %d bytes of the last, partial write; they are kept in %s",
                where,
                reason,
                file_size - pos,
                aside.name,
            )
            os.ftruncate(seg.fd, pos)
            return
        if follows is not None:
            fseg, fpos, fh = follows
            what = (
                f"a valid batch follows at byte {fpos} of {fseg.path.name} (offsets {fh.base_offset}.."
                f"{fh.last_offset}), {file_size - pos + later_bytes} bytes from the damage to the end of the log"
            )
        else:
            what = (
                f"no valid batch follows, but the damaged batch is not a partial write "
                f"({file_size - pos} bytes from the damage to the end of the file)"
            )
        raise CorruptLog(
            f"{where} ({reason}); {what}: not a torn tail, so the partition is not opened and nothing was "
            "truncated (docs/operations.md, 'Partition log corruption')",
            seg.path,
            pos,
        )

    def _index(self, seg: Segment, pos: int, header: BatchHeader) -> None:
        seg.positions.append(pos)
        seg.last_offsets.append(header.last_offset)
        seg.max_timestamps.append(header.max_timestamp)
        if header.producer_id >= 0 and header.base_sequence >= 0:
            self._remember_producer(header, header.base_offset)

    def _remember_producer(self, header: BatchHeader, base_offset: int) -> None:
        state = self._producers.get(header.producer_id)
        last_seq = header.base_sequence + header.last_offset_delta
        if state is None or header.producer_epoch != state.epoch:
            state = _ProducerState(header.producer_epoch, last_seq)
            self._producers[header.producer_id] = state
        state.last_seq = last_seq
        state.recent.append((header.base_sequence, last_seq, base_offset))
        del state.recent[:-5]

    def close(self) -> None:
        if self._dirty:
            self.flush()
        for seg in self._segments:
            seg.close()

    # -- writing --------------------------------------------------------------------------------------------

    def check_sequence(self, header: BatchHeader) -> tuple[int, int | None]:
        """(error code, duplicate's original base offset or None) for an idempotent producer's batch."""
        if header.producer_id < 0 or header.base_sequence < 0:
            return ErrorCode.NONE, None
        state = self.producers.get(header.producer_id)
        if state is None:
            return ErrorCode.NONE, None
        if header.producer_epoch < state.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if header.producer_epoch > state.epoch:
            return ErrorCode.NONE, None
        for base_seq, _last_seq, base_offset in state.recent:
            if base_seq == header.base_sequence:
                return ErrorCode.NONE, base_offset
        expected = (state.last_seq + 1) & 0x7FFFFFFF
        if header.base_sequence != expected:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return ErrorCode.NONE, None

    def append(self, batches: list[tuple[BatchHeader, memoryview]], now_ms: int | None = None) -> int:
        """Append validated batches, assigning offsets; returns the first batch's base offset. fsyncs after
        `flush.messages` records, or when the oldest unflushed data is `flush.ms` old at `now_ms`."""
        first = self.next_offset
        seg = self.segments[-1]
        if seg.size >= self.segment_bytes:
            seg = Segment(self.directory / f"{self.next_offset:020d}.log", self.next_offset, self._files)
            self.segments.append(seg)
        chunks: list[bytes | memoryview] = []
        pos = seg.size
        for header, data in batches:
            base = self.next_offset
            chunks.append(_BASE_OFFSET.pack(base))
            chunks.append(data[8:])
            seg.positions.append(pos)
            pos += len(data)
            seg.last_offsets.append(base + header.last_offset_delta)
            seg.max_timestamps.append(header.max_timestamp)
            if header.producer_id >= 0 and header.base_sequence >= 0:
                self._remember_producer(header, base)
            self.next_offset = base + header.last_offset_delta + 1
        blob = b"".join(chunks)
        written = os.write(seg.fd, blob)
        while written < len(blob):  # short writes only on odd filesystems; finish them
            written += os.write(seg.fd, blob[written:])
        seg.size += len(blob)
        self._dirty.add(seg)
        self._unflushed += sum(h.records_count for h, _ in batches)
        if now_ms is not None and self._flushed_at_ms is None:
            self._flushed_at_ms = now_ms  # the clock of flush.ms starts with the first unflushed write
        if self._unflushed >= self.config.flush_messages:
            self.flush(now_ms)
        elif now_ms is not None:
            self.maybe_flush(now_ms)
        return first

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment written since the last flush."""
        for seg in sorted(self._dirty, key=lambda s: s.base_offset):
            os.fsync(seg.fd)
        self._dirty.clear()
        self._unflushed = 0
        self._flushed_at_ms = now_ms

    def maybe_flush(self, now_ms: int) -> None:
        """fsync when unflushed data has waited `flush.ms` (Kafka's flush scheduler, run from the node's tick)."""
        if not self._dirty:
            return
        if self._flushed_at_ms is None:
            self._flushed_at_ms = now_ms
        elif now_ms - self._flushed_at_ms >= self.config.flush_ms:
            self.flush(now_ms)

    # -- retention ------------------------------------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Delete the oldest whole segments that `retention.ms` / `retention.bytes` no longer keep, never the
        active one; the log start offset moves to the first segment left. Returns how many went. A log that
        refuses to open (CorruptLog) is left alone."""
        if self.open_error() is not None:
            return 0
        segs = self._segments
        cfg = self.config
        doomed = 0
        if cfg.retention_ms >= 0:
            while (
                doomed < len(segs) - 1
                and segs[doomed].max_timestamps
                and _largest_timestamp(segs[doomed]) < now_ms - cfg.retention_ms
            ):
                doomed += 1
        if cfg.retention_bytes >= 0:
            excess = sum(seg.size for seg in segs) - cfg.retention_bytes
            by_size = 0
            while by_size < len(segs) - 1 and excess - segs[by_size].size >= 0:
                excess -= segs[by_size].size
                by_size += 1
            doomed = max(doomed, by_size)
        if doomed == 0:
            return 0
        gone = segs[:doomed]
        del segs[:doomed]
        self._log_start_offset = segs[0].base_offset
        for seg in gone:
            self._dirty.discard(seg)
            seg.close()
            # Renamed first (Kafka's .deleted suffix): a crash leaves a file recovery never reads as a segment.
            doomed_path = seg.path.with_name(seg.path.name + ".deleted")
            os.rename(seg.path, doomed_path)
            doomed_path.unlink()
        log.info(
            "log %s-%d: retention deleted %d segment(s); log start offset now %d",
            self.topic,
            self.partition,
            len(gone),
            self._log_start_offset,
        )
        return len(gone)

    # -- reading --------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing `offset`, up to max_bytes (always at least one batch)."""
        if offset >= self.next_offset or offset < self.log_start_offset:
            return b""
        starts = [s.base_offset for s in self.segments]
        si = max(0, bisect.bisect_right(starts, offset) - 1)
        out: list[bytes] = []
        total = 0
        while si < len(self.segments) and total < max_bytes:
            seg = self.segments[si]
            si += 1
            bi = bisect.bisect_left(seg.last_offsets, offset)
            n = len(seg.positions)
            if bi >= n:
                continue
            start = seg.positions[bi]
            end = start
            i = bi
            while i < n:
                nxt = seg.positions[i + 1] if i + 1 < n else seg.size
                if total + nxt - start > max_bytes and (out or i > bi):
                    break
                end = nxt
                i += 1
            if end > start:
                out.append(os.pread(seg.fd, end - start, start))
                total += end - start
            if i < n:
                break
        return b"".join(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) of the first batch whose max timestamp >= `timestamp`; (-1, -1) if none.

        The offset returned is the batch's base offset, which is where a consumer must start reading anyway.
        """
        for seg in self.segments:
            for i, max_ts in enumerate(seg.max_timestamps):
                if max_ts >= timestamp:
                    base = seg.last_offsets[i - 1] + 1 if i > 0 else seg.base_offset
                    return base, max_ts
        return -1, -1


def _largest_timestamp(seg: Segment) -> int:
    """Kafka's LogSegment.largestTimestamp: the newest record timestamp, or the file's modification time when
    no record carries one (magic 0 producers: -1), so records without timestamps are not taken for ancient."""
    newest = max(seg.max_timestamps)
    return newest if newest >= 0 else int(os.stat(seg.path).st_mtime * 1000)


def _check_batch(view: memoryview, pos: int, file_size: int, expected: int) -> tuple[BatchHeader | None, str]:
    """The batch at `pos` of a mapped segment if it is whole, intact and at the offset the log expects; else
    None and why."""
    if file_size - pos < HEADER_SIZE:
        return None, f"truncated header: {file_size - pos} bytes, need {HEADER_SIZE}"
    try:
        header = parse_header(view, pos)
    except CorruptBatch as exc:
        return None, exc.reason
    end = pos + header.size
    if end > file_size:
        return (
            None,
            f"batch of {header.size} bytes cut short by the end of the file ({file_size - pos} bytes left)",
        )
    actual = crc32c(view[pos + CRC_START : end])
    if actual != header.crc:
        return None, f"CRC-32C mismatch: header says {header.crc:#010x}, data gives {actual:#010x}"
    if header.base_offset != expected:
        return None, f"base offset {header.base_offset} where the log expects offset {expected}"
    return header, ""


_MAGIC_AT = 16  # the magic byte's position in a batch header: where a search for the next batch looks first


def _find_batch(seg: Segment, start: int, file_size: int) -> tuple[int, BatchHeader] | None:
    """The first position >= `start` where a whole batch with a matching CRC-32C sits (the file mapped, not
    read: memory stays bounded whatever the segment size), or None."""
    if file_size - start < HEADER_SIZE:
        return None
    with mmap.mmap(seg.fd, file_size, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
        q = start
        while True:
            i = mm.find(b"\x02", q + _MAGIC_AT)
            if i < 0 or i - _MAGIC_AT + HEADER_SIZE > file_size:
                return None
            q = i - _MAGIC_AT
            try:
                return q, validate_batch(view, q)
            except CorruptBatch:
                q += 1


def _inside_torn_batch(seg: Segment, pos: int, found: int, file_size: int) -> bool:
    """Is the valid batch found at `found` inside a batch at `pos` that a crash cut short: its header parses and
    its length runs past the end of the file, and it does not end at `found` (its CRC-32C does not match the bytes
    up to there, as it would had only its length been damaged)? Its records are a client's bytes, which may hold
    a whole batch: that is then no batch following the damage."""
    try:
        header = parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
    except CorruptBatch:
        return False
    if pos + header.size <= file_size or found >= pos + header.size:
        return False
    with mmap.mmap(seg.fd, file_size, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
        return crc32c(view[pos + CRC_START : found]) != header.crc


def _torn_tail(seg: Segment, pos: int, file_size: int) -> bool:
    """Whether the damaged end of a file from `pos` is a partial write: shorter than a header, zero-filled
    (blocks allocated but never written), or a batch cut short whose present bytes do not hold it whole (if
    they do, its length field was damaged and the batch is data, not a torn write)."""
    if file_size - pos < HEADER_SIZE:
        return True
    chunk = 1 << 20
    if all(
        not os.pread(seg.fd, min(chunk, file_size - at), at).strip(b"\0")
        for at in range(pos, file_size, chunk)
    ):
        return True
    try:
        header = parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
    except CorruptBatch:
        return False
    if pos + header.size <= file_size:
        return False
    with mmap.mmap(seg.fd, file_size, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
        whole_anyway = crc32c(view[pos + CRC_START : file_size]) == header.crc
    return not whole_anyway


class LogManager:
    """All partition logs under one data directory; topics are discovered from the directory names, each with
    its TopicConfig (the node's `defaults` with the overrides stored in its partition-0 directory). `tick(now)`
    carries out time-based flushes, and retention every `retention_check_interval_ms`."""

    def __init__(
        self,
        data_dir: Path,
        segment_bytes: int = 64 * 1024 * 1024,
        limits: LogLimits | None = None,
        defaults: TopicConfig | None = None,
        retention_check_interval_ms: int = 300_000,  # log.retention.check.interval.ms (Kafka's default)
    ) -> None:
        self.root = data_dir / "logs"
        self.root.mkdir(parents=True, exist_ok=True)
        self.defaults = defaults if defaults is not None else TopicConfig(segment_bytes=segment_bytes)
        self.segment_bytes = self.defaults.segment_bytes
        self.retention_check_interval_ms = retention_check_interval_ms
        self._retention_checked_ms: int | None = None
        self.limits = limits if limits is not None else LogLimits()
        self.files = OpenFiles(self.limits.log_max_open_files)
        self.topics: dict[str, list[PartitionLog]] = {}
        # Moves whenever `topics` or `topic_ids` change (a topic created, grown, deleted or set aside, an id stored):
        # what the consumer-group heartbeat keys its subscribed-topic lookups on (zkcoord.group.consumer).
        self.topics_version = 0
        self._configs: dict[str, TopicConfig] = {}
        self._cluster_topics: set[str] = set()
        # KIP-516 ids (zkcoord.server.topic_ids): stored in partition 0's `partition.metadata`
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.unreadable_ids: set[str] = set()  # topics whose stored id does not parse: served without an id
        found: dict[str, set[int]] = {}
        for d in sorted(self.root.iterdir()):
            if d.name.endswith(DELETED_SUFFIX) and d.is_dir():
                log.info("removing %s, a partition deleted before the last stop", d.name)
                shutil.rmtree(d)
                continue
            name, sep, part = d.name.rpartition("-")
            if not sep or not part.isdigit() or not d.is_dir():
                continue
            found.setdefault(name, set()).add(int(part))
        for name in sorted(found):
            self._configs[name] = self._load_config(name)
            self._load_topic_id(name)
            count = max(found[name]) + 1
            self.topics[name] = [self._log(name, p) for p in range(count)]

    def _id_file(self, name: str) -> Path:
        return self.root / f"{name}-0" / PARTITION_METADATA_FILE

    def _load_topic_id(self, name: str) -> None:
        path = self._id_file(name)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        try:
            self.topic_ids[name] = decode_partition_metadata(raw)
        except ValueError as exc:
            self.unreadable_ids.add(name)
            log.error(
                "topic %s: unreadable %s (%s): the topic has no id until it is repaired", name, path, exc
            )

    def set_topic_id(self, name: str, topic_id: uuid.UUID) -> None:
        """Store `name`'s KIP-516 id (durably, before it is served). ValueError when the topic already has another
        id or an unreadable one: its logs belong to another topic of that name, which the caller decides about."""
        if name not in self.topics:
            raise ValueError(f"no topic {name!r} here")
        known = self.topic_ids.get(name)
        if known == topic_id:
            return
        if known is not None or name in self.unreadable_ids:
            raise ValueError(f"topic {name!r} is stored with id {known or 'unreadable'}, not {topic_id}")
        path = self._id_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(encode_partition_metadata(topic_id))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename too: an id once served survives a crash
        finally:
            os.close(fd)
        self.topic_ids[name] = topic_id
        self.topics_version += 1  # a topic the lookup skipped (no id yet) is now found

    def assign_missing_ids(self, new_id: Callable[[], uuid.UUID]) -> list[str]:
        """A single node is its own controller: every topic stored without an id (logs older than ids) gets one,
        as Kafka's controller gives one to a topic znode without; an unreadable id is left alone. Returns the
        topics given one."""
        given = [n for n in sorted(self.topics) if n not in self.topic_ids and n not in self.unreadable_ids]
        for name in given:
            self.set_topic_id(name, new_id())
            log.info("topic %s: assigned topic id %s", name, self.topic_ids[name])
        return given

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        """The topic stored with `topic_id`, if this node has it."""
        return next(
            (n for n, t in sorted(self.topic_ids.items()) if t == topic_id and n in self.topics), None
        )

    def _config_file(self, name: str) -> Path:
        return self.root / f"{name}-0" / TOPIC_CONFIG_FILE

    def _load_config(self, name: str) -> TopicConfig:
        """A topic's stored overrides over the defaults. A file that cannot be read turns retention off for the
        topic (never a shorter retention than it asked for) and says so."""
        path = self._config_file(name)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return self.defaults
        try:
            doc = json.loads(raw)
            configs = doc["config"]
            if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
                raise InvalidConfig("config must be an object of strings")
            return self.defaults.with_overrides(configs)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            log.error(
                "topic %s: unreadable %s (%r): retention is off for the topic until it is repaired",
                name,
                path,
                exc,
            )
            return replace(self.defaults, retention_ms=-1, retention_bytes=-1)

    def topic_config(self, name: str) -> TopicConfig:
        return self._configs.get(name, self.defaults)

    def _log(self, name: str, partition: int) -> PartitionLog:
        return PartitionLog(
            self.root / f"{name}-{partition}",
            name,
            partition,
            files=self.files,
            lazy=True,
            config=self.topic_config(name),
        )

    def tick(self, now_ms: int) -> None:
        """Time-based flushes, and retention once per retention check interval (the first one interval after
        the first tick, as Kafka delays its first run), of the logs opened since the start: a log nobody has
        used is not opened (scanned) just for retention; it is kept from its first use on."""
        if self._retention_checked_ms is None:
            self._retention_checked_ms = now_ms
        check = now_ms - self._retention_checked_ms >= self.retention_check_interval_ms
        if check:
            self._retention_checked_ms = now_ms
        for name in sorted(self.topics):
            for plog in self.topics.get(name, ()):
                if not plog.opened:
                    continue
                if check:
                    plog.apply_retention(now_ms)
                plog.maybe_flush(now_ms)

    def partition_count(self) -> int:
        return sum(len(logs) for logs in self.topics.values())

    def partition_limit_error(self, name: str, partitions: int) -> str | None:
        """Why `name` may not have `partitions` partitions (max.partitions.per.topic, max.broker.partitions),
        or None when it may."""
        lim = self.limits
        if partitions > lim.max_partitions_per_topic:
            return (
                f"topic {name!r}: {partitions} partitions exceed max.partitions.per.topic "
                f"{lim.max_partitions_per_topic}"
            )
        total = self.partition_count() - len(self.topics.get(name, ())) + partitions
        if total > lim.max_broker_partitions:
            return f"topic {name!r}: {total} partitions on this node would exceed max.broker.partitions {lim.max_broker_partitions}"
        return None

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> list[PartitionLog]:
        """A new topic (or the existing one, unchanged); `configs` are its topic-level overrides (InvalidConfig
        when Kafka or zkcoord would refuse one), stored beside its partition 0, as is `topic_id` (a cluster node
        learns it from ZooKeeper, maybe later: None)."""
        if not LEGAL_TOPIC.match(name) or name in (".", ".."):
            raise InvalidTopic(f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-]")
        if partitions < 1:
            raise InvalidTopic(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        if name in self.topics:
            return self.topics[name]
        refused = self.partition_limit_error(name, partitions)
        if refused is not None:
            raise PartitionLimitExceeded(refused)
        config = self.defaults.with_overrides(configs or {})
        overrides = config.overrides(self.defaults)
        if overrides:
            path = self._config_file(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": 1, "config": overrides}, sort_keys=True))
            os.replace(tmp, path)
        self._configs[name] = config
        logs = [self._log(name, p) for p in range(partitions)]
        self.topics[name] = logs
        self.topics_version += 1
        if topic_id is not None:
            self.set_topic_id(name, topic_id)
        log.info("created topic %s with %d partitions (id %s)", name, partitions, topic_id)
        return logs

    def ensure_partitions(
        self, name: str, partitions: int, configs: Mapping[str, str | None] | None = None
    ) -> list[PartitionLog]:
        """Create the topic, or add partitions up to `partitions` (never removes any): a cluster node follows
        the partition count in ZooKeeper even when it auto-created the topic locally first."""
        logs = self.create_topic(name, partitions, configs)
        if len(logs) < partitions:
            refused = self.partition_limit_error(name, partitions)
            if refused is not None:
                raise PartitionLimitExceeded(refused)
            logs = logs + [self._log(name, p) for p in range(len(logs), partitions)]
            self.topics[name] = logs
            self.topics_version += 1
            log.info("topic %s now has %d partitions", name, partitions)
        return logs

    def delete_topic(self, name: str) -> int:
        """Remove a deleted topic's partition logs (closed, renamed out of the way, then removed); returns how
        many partitions it had (0: no such topic here)."""
        logs = self.topics.pop(name, None)
        self.topics_version += 1
        self._cluster_topics.discard(name)
        self._configs.pop(name, None)
        self.topic_ids.pop(name, None)
        self.unreadable_ids.discard(name)
        if logs is None:
            return 0
        doomed = []
        for plog in logs:
            plog.close()
            if plog.directory.exists():
                target = plog.directory.with_name(f"{plog.directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
                os.rename(plog.directory, target)
                doomed.append(target)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(
                fd
            )  # the renames are durable before any file goes: a crash never half-deletes a live log
        finally:
            os.close(fd)
        for target in doomed:
            shutil.rmtree(target)
        log.info("deleted topic %s (%d partitions)", name, len(logs))
        return len(logs)

    def note_cluster_topic(self, name: str) -> None:
        """Remember on disk that `name` was learned from a cluster's ZooKeeper (a `cluster-topic` file in its
        partition 0 directory): after a restart, such a topic missing from ZooKeeper was deleted while this node
        was away and is not published again from local logs."""
        if name in self._cluster_topics or name not in self.topics:
            return
        marker = self.root / f"{name}-0" / CLUSTER_TOPIC_FILE
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        self._cluster_topics.add(name)

    def is_cluster_topic(self, name: str) -> bool:
        return name in self._cluster_topics or (self.root / f"{name}-0" / CLUSTER_TOPIC_FILE).exists()

    def set_aside(self, name: str) -> list[Path]:
        """Stop serving a topic and move its partition directories out of the way, renamed
        `<topic>-<partition>.<uuid>.stale` (never read again, never deleted: an operator inspects or removes
        them), so a topic created later under the name starts empty; returns the new paths."""
        moved: list[Path] = []
        self.topics_version += 1
        for plog in self.topics.pop(name, ()):
            plog.close()
            if plog.directory.exists():
                target = plog.directory.with_name(f"{plog.directory.name}.{uuid.uuid4().hex}{STALE_SUFFIX}")
                os.rename(plog.directory, target)
                moved.append(target)
        self._configs.pop(name, None)
        self._cluster_topics.discard(name)
        self.topic_ids.pop(name, None)
        self.unreadable_ids.discard(name)
        return moved

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        logs = self.topics.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            return None
        return logs[partition]

    def close(self) -> None:
        for logs in self.topics.values():
            for plog in logs:
                plog.close()


class OffsetsTopicLog:
    """A read-only view of one `__consumer_offsets` partition in cluster mode, over its ZooKeeper record store.

    Every batch znode becomes one RecordBatch v2 whose records carry exactly the key/value bytes the coordinator
    wrote (`zkcoord.records.offsets` codecs), at the store's offsets (`ZkRecordStore.log_batches`: sequence *
    2^20 + index). The log is compacted-shaped: offsets have gaps, and a fetch below the first batch starts at
    the first batch (Kafka's compacted topics never report OFFSET_OUT_OF_RANGE for a gap either), so the log
    start offset is always 0. `store` is duck-typed: `log_batches()`, `log_end_offset()`, `fence.leader_epoch`.
    """

    log_start_offset = 0

    def __init__(self, store: Any) -> None:
        self.store = store
        self._encoded: dict[int, bytes] = {}

    @property
    def next_offset(self) -> int:
        end: int = self.store.log_end_offset()
        return end

    def _batch_bytes(self, batch: Any) -> bytes:
        data = self._encoded.get(batch.seq)
        if data is None:
            data = build_batch(
                list(batch.records),
                base_offset=batch.base_offset,
                base_timestamp=batch.timestamp_ms,
                partition_leader_epoch=self.store.fence.leader_epoch,
            )
            self._encoded[batch.seq] = data
        return data

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the first one holding an offset >= `offset`, up to max_bytes (at least one)."""
        batches = self.store.log_batches()
        if len(self._encoded) > 2 * len(batches) + 16:  # compaction dropped batches: forget their bytes
            live = {b.seq for b in batches}
            self._encoded = {s: d for s, d in self._encoded.items() if s in live}
        ends = [b.next_offset for b in batches]
        i = bisect.bisect_right(ends, offset)
        out: list[bytes] = []
        total = 0
        for batch in batches[i:]:
            if not batch.records:
                continue
            data = self._batch_bytes(batch)
            if out and total + len(data) > max_bytes:
                break
            out.append(data)
            total += len(data)
        return b"".join(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """(base offset, write time) of the first batch written at or after `timestamp`; (-1, -1) if none."""
        for batch in self.store.log_batches():
            if batch.records and batch.timestamp_ms >= timestamp:
                return batch.base_offset, batch.timestamp_ms
        return -1, -1
