"""The dual-commit bridge policy: which offset stores a commit writes and in what order, how per-store
replies combine into one result that hides no failure, how a fetch reads the per-partition max of both
stores, and where the two stores disagree. Pure: no I/O, no clock, deterministic output order.

Legacy semantics (0.8.2 `ZookeeperConsumerConnector.commitOffsets` / `fetchOffsets`) are the default:
`offsets.storage=kafka` + `dual.commit.enabled` writes the broker first and then ZooKeeper only for the
partitions the broker accepted; a fetch returns max(zk, broker). zkcoord makes three things explicit:
the order is configurable (`CommitOrder`), every per-store error is reported next to the merged value
(the original forced the error to NoError), and a divergence report lists each disagreement.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from zkcoord.errors import ConfigError
from zkcoord.topic_partition import TopicPartition as TopicPartition  # re-exported: the one pair type


def as_tp(value: Any) -> TopicPartition:
    """Accept a TopicPartition, a `(topic, partition)` pair, or any object with `.topic` and `.partition`.

    Only for the edges where foreign values enter (a commit's offsets in `plan_commit`, the committer's fetch,
    a client library's partitions); everything else in the bridge is typed `TopicPartition`."""
    if isinstance(value, TopicPartition):
        return value
    if hasattr(value, "topic") and hasattr(value, "partition"):
        return TopicPartition(str(value.topic), int(value.partition))
    topic, partition = value
    return TopicPartition(str(topic), int(partition))


class OffsetsStorage(enum.Enum):
    """`offsets.storage`: where a member keeps its offsets of record."""

    ZOOKEEPER = "zookeeper"
    KAFKA = "kafka"

    @classmethod
    def parse(cls, value: str) -> OffsetsStorage:
        # The original lower-cases then validates (ConsumerConfig.validateOffsetsStorage).
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise ConfigError(f"offsets.storage must be 'zookeeper' or 'kafka', not {value!r}") from None


class CommitOrder(enum.Enum):
    """Which store a dual commit writes first; the second store gets only what the first accepted."""

    BROKER_FIRST = "broker-first"  # the original 0.8.2 order
    ZOOKEEPER_FIRST = "zookeeper-first"

    @classmethod
    def parse(cls, value: str) -> CommitOrder:
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise ConfigError(
                f"dual.commit.order must be 'broker-first' or 'zookeeper-first', not {value!r}"
            ) from None


class Store(enum.Enum):
    """An offset store."""

    ZOOKEEPER = "zookeeper"
    BROKER = "broker"

    @property
    def other(self) -> Store:
        return Store.BROKER if self is Store.ZOOKEEPER else Store.ZOOKEEPER


def _primary(storage: OffsetsStorage) -> Store:
    return Store.ZOOKEEPER if storage is OffsetsStorage.ZOOKEEPER else Store.BROKER


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{name} must be 'true' or 'false', not {value!r}")


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """`offsets.storage`, `dual.commit.enabled` (default: storage == kafka, as in 0.8.2) and the order.

    With `offsets_storage=zookeeper` the original ignored `dual.commit.enabled`; zkcoord honours it (writes
    the broker too), which is what a safe rollback needs: ZooKeeper of record, the broker kept current.
    """

    offsets_storage: OffsetsStorage = OffsetsStorage.ZOOKEEPER
    dual_commit_enabled: bool | None = None
    commit_order: CommitOrder = CommitOrder.BROKER_FIRST

    def __post_init__(self) -> None:
        if not isinstance(self.offsets_storage, OffsetsStorage):
            raise ConfigError(f"offsets_storage must be an OffsetsStorage, not {self.offsets_storage!r}")
        if not isinstance(self.commit_order, CommitOrder):
            raise ConfigError(f"commit_order must be a CommitOrder, not {self.commit_order!r}")
        if self.dual_commit_enabled is None:
            object.__setattr__(self, "dual_commit_enabled", self.offsets_storage is OffsetsStorage.KAFKA)
        elif not isinstance(self.dual_commit_enabled, bool):
            raise ConfigError(f"dual_commit_enabled must be a bool, not {self.dual_commit_enabled!r}")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> BridgeConfig:
        """From Kafka-named properties: offsets.storage, dual.commit.enabled, dual.commit.order (zkcoord's)."""
        storage = OffsetsStorage.parse(str(props.get("offsets.storage", "zookeeper")))
        dual = props.get("dual.commit.enabled")
        order = CommitOrder.parse(str(props.get("dual.commit.order", "broker-first")))
        return cls(
            offsets_storage=storage,
            dual_commit_enabled=None if dual is None else _parse_bool("dual.commit.enabled", dual),
            commit_order=order,
        )

    @property
    def primary(self) -> Store:
        return _primary(self.offsets_storage)

    @property
    def dual(self) -> bool:
        return bool(self.dual_commit_enabled)

    def write_order(self) -> tuple[Store, ...]:
        """The stores a commit writes, in order."""
        if not self.dual:
            return (self.primary,)
        if self.commit_order is CommitOrder.BROKER_FIRST:
            return (Store.BROKER, Store.ZOOKEEPER)
        return (Store.ZOOKEEPER, Store.BROKER)

    def read_stores(self) -> tuple[Store, ...]:
        """The stores a fetch reads (both when dual commit is on: the max is taken)."""
        if not self.dual:
            return (self.primary,)
        return (Store.ZOOKEEPER, Store.BROKER)


@dataclass(frozen=True, slots=True)
class StoreError:
    """One store's failure for one partition (or for the whole request, copied to each partition)."""

    store: Store
    error: str  # Kafka error name (e.g. NOT_COORDINATOR) or exception class name
    message: str = ""
    retriable: bool = False

    def __str__(self) -> str:
        detail = f": {self.message}" if self.message else ""
        return f"{self.store.value} {self.error}{detail}"


# ----------------------------------------------------------------------------------------------- commit


@dataclass(frozen=True, slots=True)
class StoreWrite:
    """One step of a commit: write `offsets` to `store`; when `gated_by` is set, write only the partitions
    that store accepted (the original wrote ZooKeeper only for partitions the broker accepted)."""

    store: Store
    offsets: tuple[tuple[TopicPartition, int], ...]
    gated_by: Store | None = None


@dataclass(frozen=True, slots=True)
class CommitPlan:
    writes: tuple[StoreWrite, ...]

    @property
    def stores(self) -> tuple[Store, ...]:
        return tuple(w.store for w in self.writes)


def _sorted_offsets(offsets: Mapping[TopicPartition, int]) -> tuple[tuple[TopicPartition, int], ...]:
    items: dict[TopicPartition, int] = {}
    for key, value in offsets.items():
        tp = as_tp(key)  # the one place a commit's partitions enter the policy: a plain pair is accepted too
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"offset for {tp.topic}-{tp.partition} must be an int, not {value!r}")
        if value < 0:
            raise ValueError(f"offset for {tp.topic}-{tp.partition} must be >= 0, not {value}")
        items[tp] = value
    return tuple(sorted(items.items()))


def plan_commit(config: BridgeConfig, offsets: Mapping[TopicPartition, int]) -> CommitPlan:
    """The ordered store writes for committing `offsets` (partition -> next offset to consume)."""
    ordered = _sorted_offsets(offsets)
    stores = config.write_order()
    writes = [StoreWrite(stores[0], ordered)]
    for previous, store in itertools.pairwise(stores):
        writes.append(StoreWrite(store, ordered, gated_by=previous))
    return CommitPlan(tuple(writes))


@dataclass(frozen=True, slots=True)
class StoreReply:
    """What one store said about a write: per-partition error (None = accepted), and for a versioned
    (ZooKeeper) write the new version of each znode written, which the writer's next fenced write expects."""

    store: Store
    errors: tuple[tuple[TopicPartition, StoreError | None], ...]
    versions: tuple[tuple[TopicPartition, int], ...] = ()

    @classmethod
    def of(
        cls,
        store: Store,
        errors: Mapping[TopicPartition, StoreError | None],
        versions: Mapping[TopicPartition, int] | None = None,
    ) -> StoreReply:
        return cls(store, tuple(sorted(errors.items())), tuple(sorted((versions or {}).items())))

    @classmethod
    def all_failed(cls, store: Store, tps: Iterable[TopicPartition], error: StoreError) -> StoreReply:
        """A request-level failure (connection lost, no coordinator): every partition failed with it."""
        return cls(store, tuple(sorted((tp, error) for tp in tps)))

    @classmethod
    def all_ok(cls, store: Store, tps: Iterable[TopicPartition]) -> StoreReply:
        return cls(store, tuple(sorted((tp, None) for tp in tps)))

    def accepted(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, err in self.errors if err is None)


def gated_offsets(
    write: StoreWrite, replies: Mapping[Store, StoreReply]
) -> tuple[tuple[TopicPartition, int], ...]:
    """The offsets `write` should actually send, given the replies of the steps before it."""
    if write.gated_by is None:
        return write.offsets
    accepted = replies[write.gated_by].accepted() if write.gated_by in replies else frozenset()
    return tuple((tp, off) for tp, off in write.offsets if tp in accepted)


class PartitionCommit(NamedTuple):
    """A partition's outcome in one store: `written`, `failed` (with the error) or `skipped` (gated)."""

    tp: TopicPartition
    store: Store
    offset: int
    status: str
    error: StoreError | None


@dataclass(frozen=True, slots=True)
class CommitResult:
    """Every partition's outcome in every planned store; nothing is folded away.

    `committed` is strict: every partition written to every planned store. `primary_committed` is what
    the member of record relies on. `failures` and `skipped` list every partition that did not get there.
    """

    order: tuple[Store, ...]
    outcomes: tuple[PartitionCommit, ...]
    primary: Store
    versions: tuple[tuple[TopicPartition, int], ...] = ()  # new znode versions of the ZooKeeper writes

    @property
    def failures(self) -> tuple[PartitionCommit, ...]:
        return tuple(o for o in self.outcomes if o.status == "failed")

    @property
    def skipped(self) -> tuple[PartitionCommit, ...]:
        return tuple(o for o in self.outcomes if o.status == "skipped")

    @property
    def committed(self) -> bool:
        return all(o.status == "written" for o in self.outcomes)

    @property
    def primary_committed(self) -> bool:
        return all(o.status == "written" for o in self.outcomes if o.store is self.primary)

    def written(self, store: Store) -> dict[TopicPartition, int]:
        return {o.tp: o.offset for o in self.outcomes if o.store is store and o.status == "written"}

    @property
    def retriable(self) -> bool:
        """Worth retrying: something did not get written and every failure is retriable."""
        bad = [o for o in self.outcomes if o.status != "written"]
        return bool(bad) and all(o.error is None or o.error.retriable for o in bad)

    def describe(self) -> list[str]:
        """One line per partition that is not written everywhere, for logs and the CLI."""
        lines = []
        for o in self.outcomes:
            if o.status == "failed":
                lines.append(f"{o.tp.topic}-{o.tp.partition} offset {o.offset}: {o.error}")
            elif o.status == "skipped":
                lines.append(
                    f"{o.tp.topic}-{o.tp.partition} offset {o.offset}: not written to {o.store.value} "
                    f"({o.error})"
                )
        return lines


def combine_commit(
    plan: CommitPlan, replies: Mapping[Store, StoreReply], primary: Store | None = None
) -> CommitResult:
    """Fold per-store replies into a CommitResult. A partition missing from a store's reply counts as
    failed (the store did not confirm it), a partition gated out counts as skipped with the gating error."""
    outcomes: list[PartitionCommit] = []
    for write in plan.writes:
        sent = dict(gated_offsets(write, replies))
        reply = dict(replies[write.store].errors) if write.store in replies else {}
        gate = (
            dict(replies[write.gated_by].errors)
            if write.gated_by is not None and write.gated_by in replies
            else {}
        )
        for tp, offset in write.offsets:
            if tp not in sent:
                cause = gate.get(tp) or StoreError(
                    write.gated_by or write.store, "NOT_ATTEMPTED", "the earlier store did not reply"
                )
                outcomes.append(PartitionCommit(tp, write.store, offset, "skipped", cause))
            elif tp not in reply:
                missing = StoreError(write.store, "NO_REPLY", "the store did not confirm this partition")
                outcomes.append(PartitionCommit(tp, write.store, offset, "failed", missing))
            elif reply[tp] is None:
                outcomes.append(PartitionCommit(tp, write.store, offset, "written", None))
            else:
                outcomes.append(PartitionCommit(tp, write.store, offset, "failed", reply[tp]))
    order = plan.stores
    zk_reply = replies.get(Store.ZOOKEEPER)
    versions = zk_reply.versions if zk_reply is not None else ()
    return CommitResult(order=order, outcomes=tuple(outcomes), primary=primary or order[0], versions=versions)


# ------------------------------------------------------------------------------------------------ fetch


@dataclass(frozen=True, slots=True)
class StoreRead:
    """One store's answer to a fetch: offsets found, per-partition errors, or one request-level error.

    A partition absent from both `offsets` and `errors` has no committed offset in that store. `versions`: the
    znode version of each partition read (ZooKeeper; absent = no znode), what a fenced write then expects."""

    store: Store
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    errors: Mapping[TopicPartition, StoreError] = field(default_factory=dict)
    request_error: StoreError | None = None
    versions: Mapping[TopicPartition, int] = field(default_factory=dict)


class PartitionFetch(NamedTuple):
    """The merged view of one partition: `offset` = max over stores that answered (None: none has one),
    `source` = the store it came from (ZOOKEEPER on a tie), plus every store's offset and error."""

    tp: TopicPartition
    offset: int | None
    source: Store | None
    zookeeper: int | None
    broker: int | None
    errors: tuple[StoreError, ...]


@dataclass(frozen=True, slots=True)
class FetchResult:
    partitions: tuple[PartitionFetch, ...]
    versions: Mapping[TopicPartition, int] = field(default_factory=dict)  # ZooKeeper's znode versions read

    @property
    def errors(self) -> tuple[tuple[TopicPartition, StoreError], ...]:
        return tuple((p.tp, e) for p in self.partitions for e in p.errors)

    @property
    def complete(self) -> bool:
        """Every store read answered for every partition (so the max is over everything there is)."""
        return not self.errors

    def offsets(self) -> dict[TopicPartition, int]:
        return {p.tp: p.offset for p in self.partitions if p.offset is not None}


def combine_fetch(partitions: Iterable[TopicPartition], reads: Iterable[StoreRead]) -> FetchResult:
    """Per partition: the max over the stores that returned an offset, and every error beside it.

    Unlike the original (which forced the error to NoError), an error is never dropped: a partition can
    have an offset from one store and an error from the other, and the caller decides what to do."""
    by_store = {r.store: r for r in reads}
    zk_read = by_store.get(Store.ZOOKEEPER)
    result = []
    for tp in sorted(set(partitions)):
        found: dict[Store, int] = {}
        errors: list[StoreError] = []
        for store in (Store.ZOOKEEPER, Store.BROKER):
            read = by_store.get(store)
            if read is None:
                continue
            if read.request_error is not None:
                errors.append(read.request_error)
            elif tp in read.errors:
                errors.append(read.errors[tp])
            elif tp in read.offsets and read.offsets[tp] >= 0:
                found[store] = read.offsets[tp]
        offset = max_of_stores(found.get(Store.ZOOKEEPER), found.get(Store.BROKER))
        source = None
        if offset is not None:
            source = Store.ZOOKEEPER if found.get(Store.ZOOKEEPER) == offset else Store.BROKER
        result.append(
            PartitionFetch(
                tp,
                offset,
                source,
                found.get(Store.ZOOKEEPER),
                found.get(Store.BROKER),
                tuple(errors),
            )
        )
    return FetchResult(tuple(result), dict(zk_read.versions) if zk_read is not None else {})


# ------------------------------------------------------------------------------------------- divergence


class Agreement(enum.Enum):
    AGREE = "agree"
    ZOOKEEPER_AHEAD = "zookeeper-ahead"
    BROKER_AHEAD = "broker-ahead"
    MISSING_IN_ZOOKEEPER = "missing-in-zookeeper"
    MISSING_IN_BROKER = "missing-in-broker"


class PartitionDivergence(NamedTuple):
    tp: TopicPartition
    zookeeper: int | None
    broker: int | None
    agreement: Agreement
    lag: int  # |zk - broker|, 0 when one side is missing

    @property
    def ahead(self) -> Store | None:
        if self.agreement is Agreement.ZOOKEEPER_AHEAD:
            return Store.ZOOKEEPER
        if self.agreement is Agreement.BROKER_AHEAD:
            return Store.BROKER
        return None

    @property
    def missing(self) -> Store | None:
        if self.agreement is Agreement.MISSING_IN_ZOOKEEPER:
            return Store.ZOOKEEPER
        if self.agreement is Agreement.MISSING_IN_BROKER:
            return Store.BROKER
        return None


def classify(zookeeper: int | None, broker: int | None) -> tuple[Agreement, int]:
    if zookeeper is None and broker is None:
        raise ValueError("a partition with no offset in either store is not part of a divergence report")
    if zookeeper is None:
        return Agreement.MISSING_IN_ZOOKEEPER, 0
    if broker is None:
        return Agreement.MISSING_IN_BROKER, 0
    if zookeeper == broker:
        return Agreement.AGREE, 0
    if zookeeper > broker:
        return Agreement.ZOOKEEPER_AHEAD, zookeeper - broker
    return Agreement.BROKER_AHEAD, broker - zookeeper


def divergence_report(
    zookeeper: Mapping[TopicPartition, int], broker: Mapping[TopicPartition, int]
) -> tuple[PartitionDivergence, ...]:
    """One row per partition present in either store, sorted by (topic, partition). Negative offsets
    (-1 = none committed) count as missing."""
    zk = {k: v for k, v in zookeeper.items() if v >= 0}
    br = {k: v for k, v in broker.items() if v >= 0}
    rows = []
    for tp in sorted(zk.keys() | br.keys()):
        agreement, lag = classify(zk.get(tp), br.get(tp))
        # the row's tp is a TopicPartition even where a caller keyed its maps by plain pairs (equal keys)
        rows.append(PartitionDivergence(TopicPartition(*tp), zk.get(tp), br.get(tp), agreement, lag))
    return tuple(rows)


def disagreements(report: Iterable[PartitionDivergence], max_lag: int = 0) -> tuple[PartitionDivergence, ...]:
    """Rows that break the bound: a missing side, or the stores further apart than `max_lag`."""
    if max_lag < 0:
        raise ValueError(f"max_lag must be >= 0, not {max_lag}")
    return tuple(
        row
        for row in report
        if row.agreement in (Agreement.MISSING_IN_BROKER, Agreement.MISSING_IN_ZOOKEEPER) or row.lag > max_lag
    )


def explain(row: PartitionDivergence) -> str:
    """Why the stores disagree on this partition, in an operator's words."""
    name = f"{row.tp.topic}-{row.tp.partition}"
    if row.agreement is Agreement.AGREE:
        return f"{name}: both stores at {row.zookeeper}"
    if row.agreement is Agreement.MISSING_IN_BROKER:
        return (
            f"{name}: zookeeper={row.zookeeper}, no broker offset — no member has dual-committed this "
            f"partition yet (seed it with `migrate dual-commit`, or wait for a commit)"
        )
    if row.agreement is Agreement.MISSING_IN_ZOOKEEPER:
        return (
            f"{name}: broker={row.broker}, no zookeeper offset — committed only to the broker "
            f"(dual.commit.enabled=false on some member?); rollback would copy it to zookeeper"
        )
    if row.agreement is Agreement.ZOOKEEPER_AHEAD:
        return (
            f"{name}: zookeeper={row.zookeeper} ahead of broker={row.broker} by {row.lag} — a member "
            f"still on offsets.storage=zookeeper commits here, or the broker rejected a dual commit"
        )
    return (
        f"{name}: broker={row.broker} ahead of zookeeper={row.zookeeper} by {row.lag} — a member commits "
        f"to the broker without dual commit, or its zookeeper write failed"
    )


def max_of_stores(zookeeper: int | None, broker: int | None) -> int | None:
    """The per-partition max of both stores, the one rule of every bridged read (the dual-commit fetch, the
    coordinator's mirror fetch, rollback and seeding): the higher position, where None or a negative offset
    (-1 = none committed) is no position; None when neither store has one.

    >>> max_of_stores(5, 7), max_of_stores(None, 3), max_of_stores(-1, None)
    (7, 3, None)
    """
    positions = [o for o in (zookeeper, broker) if o is not None and o >= 0]
    return max(positions) if positions else None


def max_merge(
    zookeeper: Mapping[TopicPartition, int], broker: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """`max_of_stores` for every partition of either store (the never-regress target of rollback and seeding)."""
    merged: dict[TopicPartition, int] = {}
    for tp in sorted(zookeeper.keys() | broker.keys()):
        best = max_of_stores(zookeeper.get(tp), broker.get(tp))
        if best is not None:
            merged[tp] = best
    return merged
