"""The legacy member's rebalance planner and offset-commit planner: pure functions from what ZooKeeper said to
what the member must write, with no I/O, clock or randomness, and outputs in a fixed order.

One rebalance attempt of the 0.8-era consumer (reference §3.5), as data:

1. `resolve_subscriptions` turns every registration read from `/consumers/G/ids` into topic -> stream count
   (wildcards are matched against the children of `/brokers/topics`, with `exclude.internal.topics`).
2. `topics_to_read` says whose partition lists to read (0.10.2: every topic any member subscribes to; the range
   assignor and older round-robin only need mine, but reading all is harmless and keeps one code path).
3. `plan_rebalance` computes the global assignment with `zkcoord.legacy.assign` and returns the plan: release
   every owner znode the member holds (eager release-all, as the original), claim its share (owner znode payload
   = thread id), and read the offsets of the claimed partitions (after the claim succeeded: the fix of the
   original's stale start offset, §12). Given `keeping` (fast mode's incremental hand-over, KIP-429's idea), it
   keeps the owner znodes of the partitions the new assignment leaves to this member (`retag` names those now
   under another of its threads: their payload is rewritten in place): only the rest is released, only the new
   ones are claimed and have their offsets read.

Offsets: `plan_offset_commit` keeps only offsets that moved since the last checkpoint (the original skips
unchanged ones) and `batch_by_size` splits the writes into multi-op requests under a byte budget so a batch
never reaches ZooKeeper's 1 MiB request limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from zkcoord.legacy import paths
from zkcoord.legacy.assignment import assign
from zkcoord.legacy.codecs import ConsumerRegistration, encode_offset, encode_owner
from zkcoord.legacy.ids import consumer_of_thread, is_classic_id, utf16_key
from zkcoord.topic_partition import TopicPartition

T = TypeVar("T")

# A ZooKeeper request carries per-op framing (type, path length, data length, ACL, flags) besides path and
# data; 64 bytes over-estimates it, so the byte budget is conservative.
OP_OVERHEAD_BYTES: Final = 64


@dataclass(frozen=True, slots=True)
class Claim:
    """One owner znode to create: `/consumers/G/owners/T/P` with payload `thread_id`."""

    tp: TopicPartition
    thread_id: str


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What one rebalance attempt read from ZooKeeper (all sequences in the order ZooKeeper gave them; the
    planner sorts what it uses)."""

    registrations: tuple[tuple[str, ConsumerRegistration], ...]
    topic_partitions: tuple[tuple[str, tuple[int, ...]], ...]
    all_topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RebalancePlan:
    """What the member must do in this attempt, in order: release, claim, then read offsets. `keep` (incremental
    hand-over only) are owner znodes the member already holds with the right payload and goes on holding: never
    released, never claimed, their consume positions kept in memory."""

    consumer_id: str
    release: tuple[TopicPartition, ...]
    claims: tuple[Claim, ...]
    fetch_offsets: tuple[TopicPartition, ...]
    assignment: tuple[tuple[TopicPartition, str], ...]
    my_topics: tuple[str, ...]
    keep: tuple[Claim, ...] = ()
    retag: tuple[Claim, ...] = ()  # kept, but under another of my threads: the owner payload is rewritten

    @property
    def owned_after(self) -> frozenset[TopicPartition]:
        return frozenset(c.tp for c in self.claims) | frozenset(c.tp for c in self.keep)

    def by_topic(self) -> dict[str, tuple[int, ...]]:
        """Partitions per topic the member owns after this plan (the rebalance listener's view)."""
        out: dict[str, list[int]] = {}
        for tp in _sorted_tps(self.owned_after):
            out.setdefault(tp.topic, []).append(tp.partition)
        return {t: tuple(ps) for t, ps in out.items()}


def _sorted_tps(tps: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(set(tps), key=lambda tp: (utf16_key(tp.topic), tp.partition)))


TopicMatcher = Callable[[ConsumerRegistration, Sequence[str], bool], tuple[str, ...]]


def wildcard_topics(
    registration: ConsumerRegistration, all_topics: Sequence[str], exclude_internal: bool
) -> tuple[str, ...]:
    """Topics a wildcard registration matches among `all_topics` (TopicFilter semantics), in Java order."""
    from zkcoord.legacy.filters import TopicFilter

    topic_filter = TopicFilter.of_registration(registration)
    return tuple(topic_filter.matching(all_topics, exclude_internal_topics=exclude_internal))


def resolve_subscription(
    registration: ConsumerRegistration,
    all_topics: Sequence[str],
    *,
    exclude_internal_topics: bool,
    matcher: TopicMatcher = wildcard_topics,
) -> dict[str, int]:
    """topic -> stream count of one member. A wildcard member uses its stream count for every matched topic;
    `exclude.internal.topics` filters wildcard matches only (static subscriptions are taken as written)."""
    if not registration.is_wildcard:
        return dict(registration.subscription)
    ((_regex, streams),) = registration.subscription
    return {t: streams for t in matcher(registration, all_topics, exclude_internal_topics)}


def resolve_subscriptions(
    snapshot: GroupSnapshot, *, exclude_internal_topics: bool, matcher: TopicMatcher = wildcard_topics
) -> dict[str, dict[str, int]]:
    """consumer id -> topic -> streams, consumers in Java string order."""
    resolved = {
        cid: resolve_subscription(
            reg, snapshot.all_topics, exclude_internal_topics=exclude_internal_topics, matcher=matcher
        )
        for cid, reg in snapshot.registrations
    }
    return {cid: resolved[cid] for cid in sorted(resolved, key=utf16_key)}


def topics_to_read(subscriptions: Mapping[str, Mapping[str, int]]) -> tuple[str, ...]:
    """Every topic any member subscribes to, in Java order."""
    return tuple(sorted({t for sub in subscriptions.values() for t in sub}, key=utf16_key))


def plan_rebalance(
    *,
    consumer_id: str,
    snapshot: GroupSnapshot,
    owned: Iterable[TopicPartition],
    strategy: str,
    roundrobin_generation: str = "0.10.2",
    exclude_internal_topics: bool = True,
    matcher: TopicMatcher = wildcard_topics,
    keeping: Mapping[TopicPartition, str] | None = None,
) -> RebalancePlan:
    """The plan of one attempt. Raises whatever the assignor raises (e.g. round-robin 0.8.2 with
    differing subscriptions), which the caller counts as a failed attempt, as the original does.

    `keeping` = None: eager (the original): release everything in `owned`, claim the whole share.
    `keeping` = partition -> thread id of the owner znodes the member holds and may keep (incremental): a
    partition the new assignment gives to this member again is kept (in `retag` too when it goes to another
    of its threads); every other partition of `owned` or `keeping` is released; only the rest of the share is
    claimed.

    >>> from zkcoord.legacy.codecs import ConsumerRegistration
    >>> reg = ConsumerRegistration.static({"t": 1}, timestamp_ms=0)
    >>> snap = GroupSnapshot(registrations=(("a", reg), ("b", reg)), topic_partitions=(("t", (0, 1, 2, 3)),))
    >>> held = {TopicPartition("t", p): "a-0" for p in range(4)}      # a owned all four; b joined
    >>> plan = plan_rebalance(consumer_id="a", snapshot=snap, owned=held, strategy="range", keeping=held)
    >>> [c.tp.partition for c in plan.keep], [tp.partition for tp in plan.release], plan.claims
    ([0, 1], [2, 3], ())
    """
    subs = resolve_subscriptions(snapshot, exclude_internal_topics=exclude_internal_topics, matcher=matcher)
    known = dict(snapshot.topic_partitions)
    partitions = {t: tuple(sorted(known.get(t, ()))) for t in topics_to_read(subs)}
    decision = assign(strategy, subs, partitions, roundrobin_generation=roundrobin_generation)
    assignment = tuple(
        sorted(
            decision.items(),
            key=lambda item: (utf16_key(item[0].topic), item[0].partition),
        )
    )
    share = tuple(Claim(tp, th) for tp, th in assignment if consumer_of_thread(th) == consumer_id)
    kept = keeping or {}
    keep = tuple(c for c in share if c.tp in kept)
    retag = tuple(c for c in keep if kept[c.tp] != c.thread_id)
    kept_tps = {c.tp for c in keep}
    claims = tuple(c for c in share if c.tp not in kept_tps)
    release = _sorted_tps(tp for tp in (*owned, *kept) if tp not in kept_tps)
    my_topics = tuple(sorted(subs.get(consumer_id, {}), key=utf16_key))
    return RebalancePlan(
        consumer_id=consumer_id,
        release=release,
        claims=claims,
        fetch_offsets=tuple(c.tp for c in claims),
        assignment=assignment,
        my_topics=my_topics,
        keep=keep,
        retag=retag,
    )


def successors_waiting_on_hints(
    *,
    group: str,
    consumer_id: str,
    snapshot: GroupSnapshot,
    owned: Iterable[TopicPartition],
    strategy: str,
    roundrobin_generation: str = "0.10.2",
    exclude_internal_topics: bool = True,
    matcher: TopicMatcher = wildcard_topics,
) -> tuple[TopicPartition, ...]:
    """Fast mode's make-before-break exit (`LegacyConsumer.leave`): of the partitions a leaving member still
    owns, those whose next owner (the assignment over the group without it, as every member computes it) is a
    broker-protocol member a zkcoord coordinator registered. The coordinator announces with a hint znode when
    its hand-over waits for such a partition, so the leaving member consumes it until then. Partitions going
    to legacy members are not listed: those are released at once, as today (an unmodified 0.8 member retries
    after its backoff and no hint ever comes).

    >>> from zkcoord.legacy.codecs import ConsumerRegistration
    >>> reg = ConsumerRegistration.static({"t": 1}, timestamp_ms=0)
    >>> snap = GroupSnapshot(registrations=(("g_classic-0000000012345678", reg), ("g_b", reg)),
    ...                      topic_partitions=(("t", (0, 1, 2, 3)),))
    >>> tps = [TopicPartition("t", p) for p in range(4)]
    >>> [tp.partition for tp in successors_waiting_on_hints(group="g", consumer_id="g_a", snapshot=snap,
    ...                                                   owned=tps, strategy="range")]
    [2, 3]
    """
    others = GroupSnapshot(
        registrations=tuple((cid, reg) for cid, reg in snapshot.registrations if cid != consumer_id),
        topic_partitions=snapshot.topic_partitions,
        all_topics=snapshot.all_topics,
    )
    subs = resolve_subscriptions(others, exclude_internal_topics=exclude_internal_topics, matcher=matcher)
    known = dict(others.topic_partitions)
    partitions = {t: tuple(sorted(known.get(t, ()))) for t in topics_to_read(subs)}
    decision = assign(strategy, subs, partitions, roundrobin_generation=roundrobin_generation)
    return _sorted_tps(
        tp for tp in owned if tp in decision and is_classic_id(group, consumer_of_thread(decision[tp]))
    )


# --- offsets -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetWrite:
    """`/consumers/G/offsets/T/P` := decimal `offset`; `create` when the znode does not exist yet."""

    path: str
    data: bytes
    tp: TopicPartition
    offset: int
    create: bool = False


def plan_offset_commit(
    group: str,
    consumed: Mapping[TopicPartition, int],
    checkpoints: Mapping[TopicPartition, int],
    existing: frozenset[TopicPartition] | None = None,
) -> tuple[OffsetWrite, ...]:
    """The writes of one commit: every consumed offset that differs from its checkpoint (the original's
    `checkpointedZkOffsets` skip), in (topic, partition) order. `existing`, when given, names the offset
    znodes known to exist; the others are created."""
    writes = []
    for tp in sorted(consumed, key=lambda tp: (utf16_key(tp.topic), tp.partition)):
        offset = consumed[tp]
        if checkpoints.get(tp) == offset:
            continue
        create = existing is not None and tp not in existing
        writes.append(
            OffsetWrite(
                paths.offset_path(group, tp.topic, tp.partition), encode_offset(offset), tp, offset, create
            )
        )
    return tuple(writes)


def op_size(path: str, data: bytes) -> int:
    return len(path.encode("utf-8")) + len(data) + OP_OVERHEAD_BYTES


def batch_by_size(items: Sequence[T], size: Callable[[T], int], budget: int) -> tuple[tuple[T, ...], ...]:
    """Split `items` (order kept) into consecutive batches whose summed `size` stays within `budget`; an item
    larger than the budget on its own gets a batch of its own (ZooKeeper will judge it)."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    batches: list[tuple[T, ...]] = []
    current: list[T] = []
    used = 0
    for item in items:
        n = size(item)
        if current and used + n > budget:
            batches.append(tuple(current))
            current, used = [], 0
        current.append(item)
        used += n
    if current:
        batches.append(tuple(current))
    return tuple(batches)


def claim_payloads(group: str, claims: Sequence[Claim]) -> tuple[tuple[str, bytes], ...]:
    """(owner path, payload) of every claim, in plan order."""
    return tuple(
        (paths.owner_path(group, c.tp.topic, c.tp.partition), encode_owner(c.thread_id)) for c in claims
    )


__all__ = [
    "Claim",
    "GroupSnapshot",
    "OffsetWrite",
    "RebalancePlan",
    "TopicPartition",
    "batch_by_size",
    "claim_payloads",
    "op_size",
    "plan_offset_commit",
    "plan_rebalance",
    "resolve_subscription",
    "resolve_subscriptions",
    "topics_to_read",
]
