"""The one writer of legacy offset znodes /consumers/[group]/offsets/[topic]/[partition] (decimal string of the
next offset to consume), byte-compatible with the 0.8-era consumer and tools. Two ways to write:

* `ZooKeeperOffsetStore.write(offsets, mode)`, the one entry, in one of three modes:
  OVERWRITE or NEVER_REGRESS (tools, import, the mirror, seeding): deciding on what it reads itself and retrying
  a batch that lost to a concurrent writer;
  `Fenced(versions)` (a group member's commit): versioned against what the member itself read or last wrote
  (`write_fenced`), refused (reported `stale`, never retried) when anyone else wrote since, so a member that lost
  a partition cannot move the new owner's offset back; the report carries the new znode versions.

Guarantees of the store: writes go in multi-ops kept under the 1 MB jute.maxbuffer limit; every set is versioned
(`set_data(version=...)`, `create` for new nodes), so a concurrent writer is detected and the batch is
re-read and re-decided instead of overwritten blindly; in NEVER_REGRESS mode no stored offset ever
goes down; a retried batch after ConnectionLoss is idempotent (a node already at its target is left alone).
Malformed offset znodes are reported per partition and never overwritten by a read path.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)

from zkcoord.errors import MalformedZnode, ZkcoordError
from zkcoord.legacy import codecs, paths
from zkcoord.legacy.paths import CONSUMERS, InvalidName, group_path, offset_path, offsets_path
from zkcoord.legacy.rebalance import OffsetWrite, TopicPartition, batch_by_size, op_size, plan_offset_commit
from zkcoord.ratelog import RateLimitedLog
from zkcoord.zk.member_zk import Client, _gather
from zkcoord.zk.session import wait_for

log = logging.getLogger(__name__)
# Every read of a group's offsets (each OffsetFetch of all partitions, each client retry) meets the same bad
# child again: log a few lines a minute, count the rest.
_say = RateLimitedLog(log)

# jute.maxbuffer is 1,048,575 bytes; stay well under it with room for the multi framing.
DEFAULT_MAX_BATCH_BYTES = 512 * 1024
DEFAULT_MAX_BATCH_OPS = 2000
_OP_OVERHEAD = 40  # opcode, path length, data length, version, acl/flags: generous per-op framing


class OffsetWriteConflict(ZkcoordError):
    """A batch kept losing to a concurrent writer after the allowed attempts."""

    retriable = True


class WriteMode(enum.Enum):
    OVERWRITE = "overwrite"  # the value given is written, whatever is there (still versioned)
    NEVER_REGRESS = "never-regress"  # a stored offset higher than the given one is kept


@dataclass(frozen=True, slots=True)
class Fenced:
    """A group member's write mode: a znode is written only while it is still at the version this member read
    or last wrote (`versions[tp]`; -1 or absent: it must not exist yet and is created). A znode anyone else
    wrote since is reported `stale`, never overwritten and never retried."""

    versions: Mapping[TopicPartition, int]


OffsetWriteMode = WriteMode | Fenced


# Paths and payloads have one source of truth, zkcoord.legacy.paths / codecs; these two keep the store's names.


def parse_offset(path: str, data: bytes) -> int:
    """The 0.8 reader does `offsetStr.toLong`: a signed decimal, nothing else (MalformedZnode otherwise)."""
    return codecs.decode_offset(path, data)


def encode_offset(offset: int) -> bytes:
    return codecs.encode_offset(int(offset))


@dataclass
class OffsetsRead:
    """Offsets found (partition -> offset), malformed znodes (partition -> error), and znode versions."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    errors: dict[TopicPartition, MalformedZnode] = field(default_factory=dict)
    versions: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass
class WriteReport:
    """What a write did to every partition given to it; nothing silently dropped."""

    written: dict[TopicPartition, int] = field(default_factory=dict)
    unchanged: dict[TopicPartition, int] = field(default_factory=dict)  # already at the target value
    kept_higher: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)  # (stored, refused)
    errors: dict[TopicPartition, str] = field(default_factory=dict)
    stale: dict[TopicPartition, int] = field(default_factory=dict)  # Fenced: refused, someone else wrote it
    refused: dict[TopicPartition, str] = field(
        default_factory=dict
    )  # never writable (the caller's judgement)
    versions: dict[TopicPartition, int] = field(
        default_factory=dict
    )  # Fenced: new znode version of each written
    conflicts: int = 0  # concurrent writes detected (each cost one re-read of a batch)
    batches: int = 0

    def merge(self, other: WriteReport) -> None:
        self.written.update(other.written)
        self.unchanged.update(other.unchanged)
        self.kept_higher.update(other.kept_higher)
        self.errors.update(other.errors)
        self.stale.update(other.stale)
        self.refused.update(other.refused)
        self.versions.update(other.versions)
        self.conflicts += other.conflicts
        self.batches += other.batches

    @property
    def ok(self) -> bool:
        return not self.errors


def _sorted_items(offsets: Mapping[Any, int]) -> list[tuple[TopicPartition, int]]:
    items = []
    for key, value in offsets.items():
        topic, partition = (key.topic, key.partition) if hasattr(key, "topic") else key
        items.append((TopicPartition(str(topic), int(partition)), int(value)))
    return sorted(items)


class ZooKeeperOffsetStore:
    """Offsets of one group in ZooKeeper, through a started kazoo client (which may be chrooted, or a member's
    `Deadlined` client, whose deadline then bounds every read).

    `batched` and `fenced_budget_bytes` shape `Fenced` writes as a legacy member's commits (multi-ops within
    multi.budget.bytes, measured as `zkcoord.legacy.rebalance.op_size` does; or one set per znode)."""

    def __init__(
        self,
        client: Client,
        group: str,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
        max_attempts: int = 6,
        reconnect_timeout_s: float = 30.0,
        batched: bool = True,
        fenced_budget_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        paths.validate_group(group)  # InvalidName (a ConfigError) naming the rule
        if max_batch_bytes > 1_000_000:
            raise ValueError("max_batch_bytes must stay under jute.maxbuffer (1,048,575 bytes)")
        if fenced_budget_bytes <= 0:
            raise ValueError(f"fenced_budget_bytes must be positive, got {fenced_budget_bytes}")
        self.client = client
        self.group = group
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_ops = max_batch_ops
        self.max_attempts = max_attempts
        self.reconnect_timeout_s = reconnect_timeout_s
        self.batched = batched
        self.fenced_budget_bytes = fenced_budget_bytes
        self._ensured_topics: set[str] = set()

    # ------------------------------------------------------------------------------------------ reads

    def path(self, topic: str, partition: int) -> str:
        return offset_path(self.group, topic, partition)

    def exists(self) -> bool:
        return self.client.exists(group_path(self.group)) is not None

    def topics(self) -> list[str]:
        try:
            return sorted(self.client.get_children(offsets_path(self.group)))
        except NoNodeError:
            return []

    def partitions(self) -> list[TopicPartition]:
        """Every (topic, partition) with an offset znode, sorted; children that are no legal topic or
        partition name (no 0.8 consumer could have written them) are logged and skipped."""
        found: list[TopicPartition] = []
        for topic in self.topics():
            try:
                topic_path = paths.offsets_topic_path(self.group, topic)
                children = self.client.get_children(topic_path)
            except NoNodeError:
                continue
            except InvalidName as exc:
                _say.log(
                    logging.WARNING,
                    "offsets-child-name",
                    "group=%s: ignoring offsets child %r: %s",
                    self.group,
                    topic,
                    exc,
                )
                continue
            for child in children:
                try:
                    found.append(TopicPartition(topic, paths.parse_partition(topic_path, child)))
                except InvalidName as exc:
                    _say.log(
                        logging.WARNING,
                        "offsets-child-name",
                        "group=%s topic=%s: ignoring offsets child %r: %s",
                        self.group,
                        topic,
                        child,
                        exc,
                    )
        return sorted(found)

    def read(self, partitions: Iterable[Any] | None = None) -> OffsetsRead:
        """Offsets of `partitions` (all when None); absent znodes are simply absent from the result."""
        if partitions is None:
            tps = self.partitions()
        else:
            tps = sorted(
                {
                    TopicPartition(p.topic, p.partition)
                    if hasattr(p, "topic")
                    else TopicPartition(p[0], int(p[1]))
                    for p in partitions
                }
            )
        result = OffsetsRead()
        for tp, data, stat in self._get_all(tps):
            try:
                result.offsets[tp] = parse_offset(self.path(*tp), data)
                result.versions[tp] = stat.version
            except MalformedZnode as exc:
                result.errors[tp] = exc
                result.versions[tp] = stat.version
        return result

    # ----------------------------------------------------------------------------------------- writes

    def write(self, offsets: Mapping[Any, int], mode: OffsetWriteMode = WriteMode.OVERWRITE) -> WriteReport:
        """Write `offsets` in batches; each batch is one versioned multi-op (all or nothing). `Fenced` writes
        are the member's (`write_fenced`): what they refuse is in `stale`, their new versions in `versions`;
        a ZooKeeper error of theirs is raised (the member's commit fails), as the original's."""
        if isinstance(mode, Fenced):
            return self._write_fenced(offsets, mode.versions)
        report = WriteReport()
        for batch in self._batches(_sorted_items(offsets)):
            report.merge(self._write_batch(dict(batch), mode))
        return report

    def _write_fenced(
        self, offsets: Mapping[Any, int], versions: Mapping[TopicPartition, int]
    ) -> WriteReport:
        writes = plan_offset_commit(self.group, dict(_sorted_items(offsets)), {})
        result = write_fenced(
            self.client, writes, versions, batched=self.batched, budget=self.fenced_budget_bytes
        )
        report = WriteReport(batches=result.requests)
        for w in writes:
            if w.tp in result.written:
                report.written[w.tp] = w.offset
                report.versions[w.tp] = result.written[w.tp]
            else:
                report.stale[w.tp] = w.offset
        return report

    def _batches(self, items: list[tuple[TopicPartition, int]]) -> Iterator[list[tuple[TopicPartition, int]]]:
        batch: list[tuple[TopicPartition, int]] = []
        size = 0
        for tp, offset in items:
            cost = len(self.path(*tp).encode()) + len(encode_offset(offset)) + _OP_OVERHEAD
            if batch and (size + cost > self.max_batch_bytes or len(batch) >= self.max_batch_ops):
                yield batch
                batch, size = [], 0
            batch.append((tp, offset))
            size += cost
        if batch:
            yield batch

    def _ensure_topic(self, topic: str) -> None:
        if topic not in self._ensured_topics:
            self.client.ensure_path(paths.offsets_topic_path(self.group, topic))
            self._ensured_topics.add(topic)

    def _write_batch(self, batch: dict[TopicPartition, int], mode: WriteMode) -> WriteReport:
        report = WriteReport(batches=1)
        last_error = ""
        for attempt in range(1, self.max_attempts + 1):
            try:
                current = self._read_raw(batch)
                txn = self.client.transaction()
                planned: dict[TopicPartition, int] = {}
                for tp, target in sorted(batch.items()):
                    stored = current.get(tp)
                    if stored is not None and stored[0] == target:
                        report.unchanged[tp] = target
                        continue
                    if mode is WriteMode.NEVER_REGRESS and stored is not None and stored[0] > target:
                        report.kept_higher[tp] = (stored[0], target)
                        continue
                    if stored is None:
                        self._ensure_topic(tp[0])
                        txn.create(self.path(*tp), encode_offset(target))
                    else:
                        txn.set_data(self.path(*tp), encode_offset(target), version=stored[1])
                    planned[tp] = target
                if not planned:
                    return report
                results = txn.commit()
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as exc:
                # The multi may or may not have applied; the next attempt re-reads and finds out.
                last_error = f"{type(exc).__name__} (attempt {attempt})"
                log.info("group=%s offsets batch: %s, retrying", self.group, last_error)
                self._await_connection()
                self._reset_decisions(report, batch)
                continue
            # Ops other than the failing one come back RolledBack (before it) or RuntimeInconsistency (after it).
            failures = [
                r
                for r in results
                if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency)
            ]
            if not failures:
                report.written.update(planned)
                return report
            if all(isinstance(f, BadVersionError | NodeExistsError | NoNodeError) for f in failures):
                report.conflicts += 1
                self._ensured_topics.clear()  # a parent may have been deleted under us
                last_error = f"concurrent writer changed the offsets ({type(failures[0]).__name__})"
                log.info("group=%s offsets batch: %s, re-reading", self.group, last_error)
                self._reset_decisions(report, batch)
                continue
            last_error = f"{type(failures[0]).__name__}: {failures[0]}"
            break
        self._reset_decisions(report, batch)
        for tp in batch:
            report.errors[tp] = last_error or "write failed"
        return report

    @staticmethod
    def _reset_decisions(report: WriteReport, batch: Mapping[TopicPartition, int]) -> None:
        for tp in batch:
            report.unchanged.pop(tp, None)
            report.kept_higher.pop(tp, None)

    def _read_raw(self, batch: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """Current (offset, version) per partition; a malformed node counts as -1 so any write replaces it."""
        found: dict[TopicPartition, tuple[int, int]] = {}
        for tp, data, stat in self._get_all(sorted(batch)):
            try:
                found[tp] = (parse_offset(self.path(*tp), data), stat.version)
            except MalformedZnode:
                found[tp] = (-1, stat.version)
        return found

    def _get_all(self, tps: Iterable[TopicPartition]) -> Iterator[tuple[TopicPartition, bytes, Any]]:
        """(partition, data, stat) of each existing offset znode, in `tps` order. Pipelined gets: one round
        trip's latency for the whole list rather than one per znode (each within a `Deadlined` client's deadline)."""
        wanted = list(tps)
        offset_paths = [self.path(*tp) for tp in wanted]
        got = _gather(self.client, [(p, self.client.get_async(p)) for p in offset_paths])
        for tp, answer in zip(wanted, got, strict=True):
            if isinstance(answer, NoNodeError):
                continue
            data, stat = answer
            yield tp, data, stat

    def _await_connection(self) -> None:
        wait_for(lambda: bool(self.client.connected), self.reconnect_timeout_s, "ZooKeeper to reconnect")


# ---------------------------------------------------------------------------------------------- nodes


def read_node(client: Client, path: str) -> tuple[bytes | None, int]:
    """(data, version) of a znode, or (None, -1) when it does not exist."""
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None, -1
    return data, stat.version


def write_node(client: Client, path: str, data: bytes, expected_version: int) -> int:
    """Create (expected_version == -1) or versioned-set a znode; returns the new version.

    Raises OffsetWriteConflict when another writer got there first (NodeExists / BadVersion)."""
    try:
        if expected_version < 0:
            client.create(path, data, makepath=True)
            return 0
        return int(client.set(path, data, version=expected_version).version)
    except (NodeExistsError, BadVersionError) as exc:
        raise OffsetWriteConflict(f"{path} was changed by another writer ({type(exc).__name__})") from exc


def list_groups(client: Client) -> list[str]:
    try:
        return sorted(client.get_children(CONSUMERS))
    except NoNodeError:
        return []


def list_member_ids(client: Client, group: str) -> list[str]:
    """Registered legacy consumer ids of the group (/consumers/[group]/ids children), sorted."""
    try:
        return sorted(client.get_children(paths.ids_path(group)))
    except NoNodeError:
        return []


def list_owners(client: Client, group: str) -> dict[TopicPartition, str]:
    """Partition -> owning thread id, from /consumers/[group]/owners."""
    owners: dict[TopicPartition, str] = {}
    base = paths.owners_path(group)
    try:
        topics = sorted(client.get_children(base))
    except NoNodeError:
        return owners
    for topic in topics:
        try:
            children = client.get_children(f"{base}/{topic}")
        except NoNodeError:
            continue
        pending = [(int(c), client.get_async(f"{base}/{topic}/{c}")) for c in children if c.isdigit()]
        for partition, res in pending:
            try:
                owners[TopicPartition(topic, partition)] = res.get()[0].decode("utf-8", "replace")
            except NoNodeError:
                continue
    return dict(sorted(owners.items()))


def walk_offsets(
    client: Client, groups: Iterable[str] | None = None, *, skip_malformed: bool = True
) -> Iterator[tuple[str, str, int, int]]:
    """(group, topic, partition, offset) for every readable offset znode of `groups` (default: all);
    malformed znodes are logged and skipped, or with `skip_malformed=False` the first one is raised."""
    for group in list_groups(client) if groups is None else groups:
        read = ZooKeeperOffsetStore(client, group).read()
        for (topic, partition), error in sorted(read.errors.items()):
            if not skip_malformed:
                raise error
            log.error("skipping %s/%d of group %s: %s", topic, partition, group, error)
        for (topic, partition), offset in sorted(read.offsets.items()):
            yield group, topic, partition, offset


# --- a member's fenced offsets ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FencedWrite:
    written: dict[TopicPartition, int]  # tp -> new znode version
    stale: tuple[TopicPartition, ...]  # refused: someone else wrote the znode since I read it
    requests: int


def write_fenced(
    client: Client,
    writes: Sequence[OffsetWrite],
    versions: Mapping[TopicPartition, int],
    *,
    batched: bool,
    budget: int,
) -> FencedWrite:
    """Write offsets fenced by znode version: a write succeeds only if nobody else wrote the znode since this
    member read or last wrote it (so a member that lost a partition cannot move a newer owner's offset
    back). `versions[tp]` = -1 means the znode did not exist: it is created. Batched: multi-ops within
    `budget` bytes; a batch that fails is redone one by one so every good write lands."""
    written: dict[TopicPartition, int] = {}
    stale: list[TopicPartition] = []
    requests = 0
    parents = sorted({w.path.rsplit("/", 1)[0] for w in writes if versions.get(w.tp, -1) < 0})
    for parent in parents:
        client.ensure_path(parent)
        requests += 1
    if batched:
        for batch in batch_by_size(writes, lambda w: op_size(w.path, w.data), budget):
            tx = client.transaction()
            for w in batch:
                v = versions.get(w.tp, -1)
                if v < 0:
                    tx.create(w.path, w.data)
                else:
                    tx.set_data(w.path, w.data, version=v)
            results = tx.commit()
            requests += 1
            if not any(isinstance(r, Exception) for r in results):
                for w in batch:
                    v = versions.get(w.tp, -1)
                    written[w.tp] = v + 1 if v >= 0 else 0
                continue
            one = write_fenced(client, batch, versions, batched=False, budget=budget)
            written.update(one.written)
            stale.extend(one.stale)
            requests += one.requests
        return FencedWrite(written, tuple(stale), requests)
    for w in writes:
        v = versions.get(w.tp, -1)
        requests += 1
        try:
            if v < 0:
                client.create(w.path, w.data)
                written[w.tp] = 0
            else:
                stat = client.set(w.path, w.data, version=v)
                written[w.tp] = stat.version
        except (BadVersionError, NodeExistsError, NoNodeError):
            stale.append(w.tp)
    return FencedWrite(written, tuple(stale), requests)
