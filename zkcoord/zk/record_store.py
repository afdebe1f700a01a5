"""Durable coordinator records for one `__consumer_offsets` partition, kept in ZooKeeper so that whichever node
leads the partition next can load them; every append is fenced by the partition's leadership.

Layout: `/zkcoord/offsets/<partition>/records/batch-<seq>` persistent sequential znodes, one per batch of
records, read back in sequence order. A batch is `b"ZKR1"`, an int32 record count, then per record an int32
key length + key and an int32 value length (-1 for a tombstone) + value, all big-endian.

Fencing: the node that leads partition p with leader epoch E read `/brokers/topics/__consumer_offsets/
partitions/p/state` at znode version V. Each append is one multi: `check(state, V)` + the batch creates. A new
leader is installed only by rewriting that state znode (the controller bumps the leader epoch), so from that
moment a deposed leader's appends fail as a whole (`StoreFenced`, NOT_COORDINATOR) and nothing it was not
allowed to write reaches the store. An acknowledged append is on a ZooKeeper quorum before `append` returns.

Limits: ZooKeeper keeps everything in memory and refuses requests over `jute.maxbuffer` (1 MB by default).
One append is split into batches of at most `max_batch_bytes` and into multis of at most `max_multi_bytes`;
an append larger than one multi is atomic per multi only. `compact()` rewrites the partition as one snapshot
(the last value per key, tombstones dropped) in a single fenced multi when that fits, so the znode count and
the load time stay proportional to the live keys, not to the commit history.

Compaction schedule: a store counts its batch znodes (from `load()`, then every committed append) and is due
once that count reaches `compact_after_batches` (default 100: a compaction multi then deletes ~100 znodes, a
few KiB, far below one request). Only the leader that loaded the partition runs it (`maybe_compact`, called
by the node's worker after a load and after an append made it due, via `on_compaction_due`); it is one
multi behind the same `check(state, V)` as every append, so a deposed leader's compaction fails as a whole
(`StoreFenced`) and deletes nothing. A compaction refused for size (the live keys exceed one request) is
retried only after the batch count has doubled, never on every append.

Loading: `load()` keeps LOAD_WINDOW batch reads in flight (kazoo `get_async`: one connection, answers in
order) and yields each batch's records once it is decoded and checked; the log view keeps each batch as its
znode's bytes (`BatchRecords`, decoded again only when `__consumer_offsets` is fetched), so the memory a load
adds beyond the caller's state is the partition's encoded size plus one window of replies.

Bad data: a batch znode that does not decode (or whose records the node's `check_record` refuses) makes `load`
raise `MalformedZnode` naming its path, the byte offset and why; the store never deletes or rewrites it (only
`compact`, after every batch decoded, deletes batches). A child whose name is not `batch-<digits>` cannot have
been written by a store and is ignored. The node keeps such a partition unserved and retries its load
(`zkcoord.cluster.node`), so a repaired or removed znode is picked up without a restart.

Log offsets (for serving `__consumer_offsets` as a fetchable topic): record i of the batch znode with sequence
number s has offset `s * OFFSETS_PER_BATCH + i`. ZooKeeper assigns s from the parent's child-change counter
(`cversion`), which only grows, whoever the writer is, so offsets stay monotonic across failover and restarts
without any extra state. A compaction snapshot is a new batch: its records reappear at higher offsets (as
copies, not moves), and nothing below the first surviving batch can be read again.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

from zkcoord.errors import ErrorCode, MalformedZnode, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.ratelog import RateLimitedLog

log = logging.getLogger(__name__)
_say = RateLimitedLog(log)

RECORDS_ROOT = "/zkcoord/offsets"
BATCH_PREFIX = "batch-"
MAGIC = b"ZKR1"
# Leave room under jute.maxbuffer (1,048,575 bytes) for paths and per-op framing.
DEFAULT_MAX_BATCH_BYTES = 512 * 1024
DEFAULT_MAX_MULTI_BYTES = 900 * 1024
_OP_OVERHEAD = 64
DEFAULT_COMPACT_AFTER_BATCHES = 100
# Batch reads a load keeps in flight (kazoo `get_async`): one round trip per window instead of per znode, and at
# most this many batches (<= 512 KiB each, ~7 KiB for a typical commit) received and not yet decoded.
LOAD_WINDOW = 128
_I32 = struct.Struct(">i")
# A batch of at most 512 KiB holds fewer than 2^16 records (each costs >= 8 bytes), so 2^20 offsets per
# sequence number never collide; with ZooKeeper's int32 sequence the largest offset stays below 2^51.
OFFSETS_PER_BATCH = 1 << 20

Record = tuple[bytes, bytes | None]


class BatchRecords(Sequence[Record]):
    """The records of one batch znode, kept as its encoded bytes (one object, about a third of the memory of
    the records as tuples of bytes) and decoded only when a reader of `__consumer_offsets` walks them. The bytes
    were decoded once when they were loaded or encoded by this store, so decoding them again cannot fail."""

    __slots__ = ("_count", "_data")

    def __init__(self, data: bytes, count: int) -> None:
        self._data = data
        self._count = count

    def __len__(self) -> int:
        return self._count

    def _records(self) -> list[Record]:
        return decode_batch("(indexed batch)", self._data)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records())

    def __getitem__(self, index: Any) -> Any:
        return self._records()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BatchRecords):
            return self._data == other._data
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchRecords({self._count} records, {len(self._data)} bytes)"


@dataclass(frozen=True, slots=True)
class IndexedBatch:
    """One batch znode as the `__consumer_offsets` log sees it: sequence, write time, records (decoded lazily)."""

    seq: int
    timestamp_ms: int
    records: BatchRecords

    @property
    def base_offset(self) -> int:
        return self.seq * OFFSETS_PER_BATCH

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


def seq_of(name: str) -> int:
    """The sequence number of a batch znode name (`batch-0000000042` -> 42)."""
    return int(name.rsplit("/", 1)[-1][len(BATCH_PREFIX) :])


def _is_batch_name(name: str) -> bool:
    """A name ZooKeeper gives a sequential child of prefix `batch-`: ten digits (a wrapped int32 counter gives a
    signed number). Only such names can hold this store's batches; any other child is not ours."""
    suffix = name[len(BATCH_PREFIX) :]
    return name.startswith(BATCH_PREFIX) and suffix.lstrip("-").isdigit() and suffix.isascii()


class StoreFenced(ZkcoordError):
    """The partition's leadership moved since this store was opened: the append was refused as a whole."""

    code = ErrorCode.NOT_COORDINATOR  # the client rediscovers the coordinator and retries there
    retriable = True


@dataclass(frozen=True, slots=True)
class PartitionFence:
    """The leadership a store writes under: the state znode version read when this node took the partition."""

    partition: int
    leader_epoch: int
    state_version: int

    @property
    def state_path(self) -> str:
        return paths.partition_state_path(OFFSETS_TOPIC, self.partition)


def records_path(partition: int) -> str:
    return f"{RECORDS_ROOT}/{partition}/records"


def encode_batch(records: Sequence[Record]) -> bytes:
    out = [MAGIC, struct.pack(">i", len(records))]
    for key, value in records:
        out.append(struct.pack(">i", len(key)))
        out.append(key)
        if value is None:
            out.append(struct.pack(">i", -1))
        else:
            out.append(struct.pack(">i", len(value)))
            out.append(value)
    return b"".join(out)


def decode_batch(path: str, data: bytes) -> list[Record]:
    """The records of one batch znode; MalformedZnode naming the byte offset when anything is off."""
    records = _decode_batch_fast(data)
    return records if records is not None else _decode_batch_checked(path, data)


def _decode_batch_fast(data: bytes) -> list[Record] | None:
    """`_decode_batch_checked` for a well-formed batch (one `unpack_from` per length, no closure); None when
    anything is off, for the checked decoder to name it."""
    if data[:4] != MAGIC or len(data) < 8:
        return None
    unpack = _I32.unpack_from
    end = len(data)
    (count,) = unpack(data, 4)
    if count < 0 or count > (end - 8) // 8:
        return None
    pos = 8
    records: list[Record] = []
    append = records.append
    for _ in range(count):
        if pos + 4 > end:
            return None
        (klen,) = unpack(data, pos)
        pos += 4
        if klen < 0 or pos + klen + 4 > end:
            return None
        key = data[pos : pos + klen]
        pos += klen
        (vlen,) = unpack(data, pos)
        pos += 4
        if vlen == -1:
            append((key, None))
            continue
        if vlen < 0 or pos + vlen > end:
            return None
        append((key, data[pos : pos + vlen]))
        pos += vlen
    return records if pos == end else None


def _decode_batch_checked(path: str, data: bytes) -> list[Record]:
    if data[:4] != MAGIC:
        raise MalformedZnode(path, f"batch does not start with {MAGIC!r}", data)
    pos = 4

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise MalformedZnode(path, f"truncated batch: {what} needs {n} bytes at offset {pos}", data)
        chunk = data[pos : pos + n]
        pos += n
        return chunk

    (count,) = struct.unpack(">i", take(4, "record count"))
    if count < 0:
        raise MalformedZnode(path, f"negative record count {count}", data)
    if count > (len(data) - pos) // 8:  # every record costs at least its two int32 lengths
        raise MalformedZnode(
            path, f"record count {count} cannot fit in the {len(data) - pos} bytes left", data
        )
    records: list[Record] = []
    for i in range(count):
        (klen,) = struct.unpack(">i", take(4, f"key length of record {i}"))
        key = take(klen, f"key of record {i}")
        (vlen,) = struct.unpack(">i", take(4, f"value length of record {i}"))
        value = None if vlen == -1 else take(vlen, f"value of record {i}")
        records.append((key, value))
    if pos != len(data):
        raise MalformedZnode(path, f"{len(data) - pos} trailing bytes after {count} records", data)
    return records


def split_batches(records: Sequence[Record], max_batch_bytes: int) -> list[list[Record]]:
    """Consecutive groups of records whose encoded batch stays under `max_batch_bytes` (a single record
    larger than that gets a batch of its own, and is refused later if it cannot fit a znode)."""
    batches: list[list[Record]] = []
    current: list[Record] = []
    size = 8
    for rec in records:
        rec_size = 8 + len(rec[0]) + (len(rec[1]) if rec[1] is not None else 0)
        if current and size + rec_size > max_batch_bytes:
            batches.append(current)
            current, size = [], 8
        current.append(rec)
        size += rec_size
    if current:
        batches.append(current)
    return batches


class ZkRecordStore:
    """A RecordStore (append / load) for one offsets partition, fenced by `fence`. Thread-safe."""

    def __init__(
        self,
        client: KazooClient,
        fence: PartitionFence,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_multi_bytes: int = DEFAULT_MAX_MULTI_BYTES,
        compact_after_batches: int = DEFAULT_COMPACT_AFTER_BATCHES,
        check_record: Callable[[bytes, bytes | None], object] | None = None,
        on_append: Callable[[], None] | None = None,
        on_compaction_due: Callable[[], None] | None = None,
    ) -> None:
        if max_batch_bytes > max_multi_bytes:
            raise ValueError("max_batch_bytes must not exceed max_multi_bytes")
        if compact_after_batches < 2:
            raise ValueError(f"compact_after_batches must be >= 2, got {compact_after_batches}")
        self.client = client
        self.fence = fence
        # Called on every loaded record (the node gives the `__consumer_offsets` decoder): a record it refuses
        # makes its batch znode malformed, named by path, instead of an error that names no znode later.
        self._check_record = check_record
        self.max_batch_bytes = max_batch_bytes
        self.max_multi_bytes = max_multi_bytes
        self.path = records_path(fence.partition)
        self._lock = threading.Lock()
        # The log view: filled by load(), extended by each committed append; replaced whole, never mutated.
        self._index: tuple[IndexedBatch, ...] = ()
        self._log_end = 0
        self.indexed = False
        self.on_append = on_append  # called after each committed multi (any thread)
        self.compact_after_batches = compact_after_batches
        # Batch znodes as of the last load/commit; compaction is due at _compact_at (None until loaded:
        # only a leader that has read the partition schedules compaction).
        self._batches = 0
        self._compact_at: int | None = None
        self.compactions = 0
        self._loads = 0  # loads being read (under _lock): compaction waits for them
        # Called under the store's lock, on the appending thread, when an append made compaction due: it must
        # only signal (the node's worker then calls maybe_compact), never call back into the store.
        self.on_compaction_due = on_compaction_due
        self.client.ensure_path(self.path)

    def append(self, records: Iterable[Record]) -> None:
        """Durably append `records` (in order) or raise StoreFenced / a ZooKeeper error with nothing written
        by the failing multi."""
        chunks = split_batches(list(records), self.max_batch_bytes)
        batches = [encode_batch(b) for b in chunks]
        for data in batches:
            if len(data) + _OP_OVERHEAD > self.max_multi_bytes:
                raise ValueError(f"a single record of {len(data)} bytes cannot fit in one ZooKeeper request")
        with self._lock:
            group: list[bytes] = []
            group_records: list[list[Record]] = []
            size = 0
            for data, recs in zip(batches, chunks, strict=True):
                if group and size + len(data) + _OP_OVERHEAD > self.max_multi_bytes:
                    self._commit(group, (), group_records)
                    group, group_records, size = [], [], 0
                group.append(data)
                group_records.append(recs)
                size += len(data) + _OP_OVERHEAD
            if group:
                self._commit(group, (), group_records)

    def load(self) -> Iterator[Record]:
        """Every record of the partition in append order (the reader replays; later values win). Also
        (re)builds the log view that `log_batches` serves.

        The batch znodes are read LOAD_WINDOW at a time in flight (the same reads, pipelined on the session's
        one connection, answered in order), each decoded once; the records are yielded as each batch is
        decoded and checked, and only the batches' bytes are kept for the log view. The caller replays into a
        state of its own and serves nothing before the load returns, so a malformed batch found late still
        fails the whole load. The store's lock is not held while records are yielded (a reader that stops
        early leaves nothing locked); the log view is installed under it at the end. No compaction runs while a
        load is read (`compact` returns False): it would delete batches the load has not read yet and write
        its snapshot after the load's listing, where the load never looks."""
        with self._lock:
            names, cversion = self._batch_names_and_cversion()
            self._loads += 1  # no compaction until this load is read: its snapshot would miss the load
        try:
            yield from self._read_batches(names, cversion)
        finally:
            with self._lock:
                self._loads -= 1

    def _read_batches(self, names: list[str], cversion: int) -> Iterator[Record]:
        batches: list[IndexedBatch] = []
        pending: deque[tuple[str, Any]] = deque()
        todo = iter(names)
        while True:
            while len(pending) < LOAD_WINDOW:
                name = next(todo, None)
                if name is None:
                    break
                pending.append((name, self.client.get_async(f"{self.path}/{name}")))
            if not pending:
                break
            name, reply = pending.popleft()
            path = f"{self.path}/{name}"
            try:
                data, stat = reply.get()
            except NoNodeError:
                continue  # compacted away under us; the snapshot that replaced it is later in the order
            records = decode_batch(path, data)
            if self._check_record is not None:
                self._check_records(path, data, records)
            batches.append(IndexedBatch(seq_of(name), stat.ctime, BatchRecords(data, len(records))))
            yield from records
        with self._lock:
            # A batch this store committed after the listing above (seq beyond every listed one) stays indexed.
            listed = seq_of(names[-1]) if names else -1
            later = [b for b in self._index if b.seq > listed]
            self._index = tuple(batches + later)
            end = self._index[-1].next_offset if self._index else cversion * OFFSETS_PER_BATCH
            self._log_end = max(self._log_end, end)
            self.indexed = True
            self._batches = len(self._index)
            if self._compact_at is None:
                self._compact_at = self.compact_after_batches

    def _check_records(self, path: str, data: bytes, records: Sequence[Record]) -> None:
        assert self._check_record is not None
        for i, (key, value) in enumerate(records):
            try:
                self._check_record(key, value)
            except Exception as exc:  # whatever the decoder raises, the item is malformed, named by its path
                raise MalformedZnode(path, f"record {i} does not decode: {exc}", data) from None

    def log_batches(self) -> tuple[IndexedBatch, ...]:
        """The batches in sequence order as of the last load plus every append committed since."""
        return self._index

    def log_end_offset(self) -> int:
        """One past the last record's offset; for a partition loaded empty, the first offset the next batch
        can have (the parent's cversion). Never goes backwards, also when compaction leaves nothing."""
        return self._log_end

    def close(self) -> None:
        """Nothing to release: the kazoo client belongs to the node."""

    def batch_count(self) -> int:
        return len(self._batch_names())

    def compaction_due(self) -> bool:
        """True once the partition holds `compact_after_batches` batch znodes since it was loaded or last
        compacted (never before `load()`, nor while a load is being read)."""
        at = self._compact_at
        return at is not None and self._batches >= at and not self._loads

    def maybe_compact(self) -> bool:
        """Compact if due. True when a compaction ran; StoreFenced when this store's leadership is gone."""
        if not self.compaction_due():
            return False
        try:
            if self.compact():
                return True
        except (
            MalformedZnode
        ) as exc:  # written after the load; compact deleted nothing, the next load reports it
            _say.log(logging.WARNING, "compact-malformed", "partition=%d compaction skipped: %s",
                     self.fence.partition, exc)  # fmt: skip
        with self._lock:  # refused for size (or a malformed batch): back off until the history has doubled
            self._compact_at = max(self._batches * 2, self.compact_after_batches)
        return False

    def compact(self) -> bool:
        """Replace every batch by one snapshot of the live keys, atomically and fenced. False when the
        snapshot or the delete list would not fit one request (the store is left as it was)."""
        with self._lock:
            if self._loads:
                return False  # a load reading the batches would meet NoNode and never see the snapshot
            names = self._batch_names()
            if len(names) <= 1:
                return False
            latest: dict[bytes, bytes | None] = {}
            for name in names:
                path = f"{self.path}/{name}"
                data, _ = self.client.get(path)
                for key, value in decode_batch(path, data):
                    latest[key] = value
            live = [(k, v) for k, v in latest.items() if v is not None]
            chunks = split_batches(live, self.max_batch_bytes) if live else []
            snapshot = [encode_batch(b) for b in chunks]
            size = sum(len(d) + _OP_OVERHEAD for d in snapshot) + len(names) * (_OP_OVERHEAD + len(self.path))
            if size > self.max_multi_bytes:
                log.info(
                    "partition=%d compaction skipped: %d bytes exceed one request", self.fence.partition, size
                )
                return False
            self._commit(snapshot, names, chunks)
            self._batches = len(snapshot)
            # Due again at the same absolute count; a snapshot that alone needs many batches waits for as
            # many new ones, so compactions never run back to back.
            self._compact_at = max(self.compact_after_batches, 2 * len(snapshot))
            self.compactions += 1
            log.info(
                "partition=%d compacted %d batches into %d (%d live keys)",
                self.fence.partition,
                len(names),
                len(snapshot),
                len(live),
            )
            return True

    def _batch_names(self) -> list[str]:
        return self._batch_names_and_cversion()[0]

    def _batch_names_and_cversion(self) -> tuple[list[str], int]:
        children, stat = self.client.get_children(self.path, include_data=True)
        names = [n for n in children if _is_batch_name(n)]
        return sorted(names, key=seq_of), stat.cversion

    def _commit(
        self, creates: Sequence[bytes], deletes: Sequence[str], records: Sequence[Sequence[Record]] = ()
    ) -> None:
        tx = self.client.transaction()
        tx.check(self.fence.state_path, self.fence.state_version)
        for data in creates:
            tx.create(f"{self.path}/{BATCH_PREFIX}", data, sequence=True)
        for name in deletes:
            tx.delete(f"{self.path}/{name}")
        results = tx.commit()
        failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failures:
            due_before = self.compaction_due()
            self._batches += len(creates) - len(deletes)
            self._index_committed(results[1 : 1 + len(creates)], creates, records, deletes)
            if (
                not deletes
                and not due_before
                and self.compaction_due()
                and self.on_compaction_due is not None
            ):
                try:
                    self.on_compaction_due()
                except Exception:
                    log.exception("partition=%d on_compaction_due callback failed", self.fence.partition)
            return
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise StoreFenced(
                f"offsets partition {self.fence.partition}: leadership moved past epoch {self.fence.leader_epoch}"
            )
        raise failures[0]

    def _index_committed(
        self,
        created: Sequence[object],
        encoded: Sequence[bytes],
        records: Sequence[Sequence[Record]],
        deletes: Sequence[str],
    ) -> None:
        now = int(time.time() * 1000)
        gone = {seq_of(n) for n in deletes}
        kept = [b for b in self._index if b.seq not in gone]
        added = [
            IndexedBatch(seq_of(str(path)), now, BatchRecords(data, len(recs)))
            for path, data, recs in zip(created, encoded, records, strict=True)
        ]
        self._index = tuple(kept + added)
        if added:
            self._log_end = max(self._log_end, added[-1].next_offset)
        if self.on_append is not None:
            try:
                self.on_append()
            except Exception:
                log.exception("partition=%d on_append callback failed", self.fence.partition)
