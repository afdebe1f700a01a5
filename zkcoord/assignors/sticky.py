"""Kafka's StickyAssignor and CooperativeStickyAssignor: balanced first, then as sticky as balance allows.

Guarantees (checked by the tests): every partition of a subscribed topic is assigned to exactly one subscribed
member (cooperative-sticky withholds the ones that must first be revoked); with equal subscriptions the counts
differ by at most one; with unequal subscriptions no partition could move to an eligible member holding two or
more fewer partitions (Kafka's `isBalanced`); owned partitions stay put wherever balance permits. The result
depends only on the input values, never on dict/set iteration order.

Partitions are handled internally as dense integer ids (topics in sorted order, then partition number) so a
million partitions cost integer lists and arrays rather than tuples and hashed sets.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from zkcoord.assignors._common import Assignment, TopicPartition, member_order, normalise_subscriptions

DEFAULT_GENERATION = -1  # Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: ownership without a generation
_NO_OWNER = -1
_CONFLICT = -2  # claimed by several members of the same (highest) generation: nobody keeps it


@dataclass(frozen=True, slots=True)
class _Layout:
    """Dense ids for every partition of every existing topic: topic `topics[i]` owns ids base[i]..base[i+1]-1."""

    topics: tuple[str, ...]
    base: tuple[int, ...]
    index: Mapping[str, int]

    @staticmethod
    def of(partitions_per_topic: Mapping[str, int]) -> _Layout:
        topics = tuple(sorted(t for t, n in partitions_per_topic.items() if n > 0))
        base = [0]
        for t in topics:
            base.append(base[-1] + partitions_per_topic[t])
        return _Layout(topics, tuple(base), {t: i for i, t in enumerate(topics)})

    @property
    def total(self) -> int:
        return self.base[-1]

    def topic_range(self, topic: str) -> range:
        i = self.index[topic]
        return range(self.base[i], self.base[i + 1])

    def gid(self, tp: TopicPartition) -> int | None:
        """The id of an existing partition, None when its topic is gone or the partition does not exist."""
        topic, p = tp
        i = self.index.get(topic)
        if i is None or not isinstance(p, int) or not 0 <= p < self.base[i + 1] - self.base[i]:
            return None
        return self.base[i] + p

    def to_tuples(self, ids: Sequence[int]) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        topics, base = self.topics, self.base
        ti = 0
        for g in sorted(
            ids
        ):  # ascending ids are ascending (topic, partition), so the topic cursor only advances
            while g >= base[ti + 1]:
                ti += 1
            out.append(TopicPartition(topics[ti], g - base[ti]))
        return out


def _validate_owned(owned: Mapping[str, Collection[TopicPartition]]) -> None:
    for member in sorted(owned):
        for tp in owned[member]:
            if not (
                isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and isinstance(tp[1], int)
            ):
                raise ValueError(f"owned[{member!r}] holds {tp!r}; expected a (topic, partition) tuple")


_NO_CLAIM = -(2**62)


@dataclass(frozen=True, slots=True)
class _Claims:
    """Per partition id: the highest-generation claimant and its generation, and the best generation claimed by
    anybody else (`_NO_CLAIM` when nobody)."""

    top_member: list[int]
    top_gen: list[int]
    runner_up_gen: list[int]

    def owner(self) -> list[int]:
        """Previous owner per partition: the claim of the highest generation wins; two claims at that generation
        cancel each other (Kafka's `partitionsWithMultiplePreviousOwners`)."""
        return [
            (m if r < g else _CONFLICT) if m >= 0 else _NO_OWNER
            for m, g, r in zip(self.top_member, self.top_gen, self.runner_up_gen, strict=True)
        ]


def _collect_claims(
    layout: _Layout,
    members: Sequence[str],
    owned: Mapping[str, Collection[TopicPartition]],
    generations: Mapping[str, int],
) -> _Claims:
    top_member = [_NO_OWNER] * layout.total
    top_gen = [_NO_CLAIM] * layout.total
    runner_up = [_NO_CLAIM] * layout.total
    for mi, member in enumerate(members):
        gen = generations.get(member, DEFAULT_GENERATION)
        for tp in owned.get(member, ()):
            g = layout.gid(tp)
            if g is None or top_member[g] == mi:
                continue
            if gen > top_gen[g]:
                runner_up[g] = top_gen[g]
                top_member[g], top_gen[g] = mi, gen
            elif gen > runner_up[g]:
                runner_up[g] = gen
    return _Claims(top_member, top_gen, runner_up)


def _owned_ids(owner: list[int], n_members: int) -> list[list[int]]:
    per_member: list[list[int]] = [[] for _ in range(n_members)]
    for g, mi in enumerate(owner):
        if mi >= 0:
            per_member[mi].append(g)
    return per_member


def _constrained(
    layout: _Layout, topics: frozenset[str], owned: list[list[int]], pnum: list[int]
) -> list[list[int]]:
    """Kafka's ConstrainedAssignmentBuilder for equal subscriptions, over member indices in member order.

    1. Each member keeps its owned partitions up to its quota: all of them when it owns fewer than minQuota;
       maxQuota while members above minQuota are still needed; otherwise minQuota. Owned partitions are kept in
       (partition, topic) order, as Kafka does.
    2. The rest, in (topic, partition) order, is dealt round-robin to members under minQuota, then one each to
       members at minQuota until the expected number of members hold maxQuota.
    """
    n = len(owned)
    ids = [g for t in sorted(topics) for g in layout.topic_range(t)]
    total = len(ids)
    min_quota, extra = divmod(total, n)
    max_quota = min_quota + (1 if extra else 0)
    over_min = 0  # members holding maxQuota (only counted when maxQuota > minQuota)
    assignment: list[list[int]] = [[] for _ in range(n)]
    taken = bytearray(layout.total)
    under_min: list[int] = []
    exactly_min: list[int] = []
    for mi in range(n):
        mine = owned[mi]
        if len(mine) < min_quota:
            keep = mine
            under_min.append(mi)
        elif len(mine) >= max_quota and over_min < extra:
            over_min += 1
            if over_min == extra:
                exactly_min.clear()
            keep = sorted(mine, key=lambda g: (pnum[g], g))[:max_quota]
        else:
            keep = sorted(mine, key=lambda g: (pnum[g], g))[:min_quota] if len(mine) > min_quota else mine
            if over_min < extra:
                exactly_min.append(mi)
        assignment[mi] = list(keep)
        for g in keep:
            taken[g] = 1
    unassigned = [g for g in ids if not taken[g]]
    ring = deque(under_min)
    spare = deque(exactly_min)
    for g in unassigned:
        if ring:
            mi = ring.popleft()
            mine = assignment[mi]
            mine.append(g)
            if len(mine) < min_quota:
                ring.append(mi)
            elif over_min < extra:
                spare.append(mi)
        else:
            if not spare:
                raise AssertionError("sticky: partitions left over with every member at capacity")
            mi = spare.popleft()
            assignment[mi].append(g)
            over_min += 1
    return assignment


def _general(
    layout: _Layout,
    subs: Sequence[frozenset[str]],
    owned: list[list[int]],
    owner: list[int],
    topic_of: list[int],
) -> list[list[int]]:
    """Balance for unequal subscriptions: keep every owned partition whose topic the owner still subscribes to,
    give the rest one by one to the eligible member with the fewest partitions (topics with fewest potential
    members first), then move partitions from a member to an eligible one holding >= 2 fewer until none can move.
    """
    n = len(subs)
    eligible: dict[str, list[int]] = {}
    for mi in range(n):
        for t in subs[mi]:
            eligible.setdefault(t, []).append(mi)
    assignment: list[list[int]] = [[] for _ in range(n)]
    holder = [_NO_OWNER] * layout.total
    for mi in range(n):
        topics = subs[mi]
        kept = [g for g in owned[mi] if layout.topics[topic_of[g]] in topics]
        assignment[mi] = kept
        for g in kept:
            holder[g] = mi
    count = [len(a) for a in assignment]
    # Fewest potential members first, as Kafka's TopicComparator: they have the fewest places to go.
    order = sorted(eligible, key=lambda t: (len(eligible[t]), t))
    for t in order:
        free = [g for g in layout.topic_range(t) if holder[g] == _NO_OWNER]
        if not free:
            continue
        heap = [(count[mi], mi) for mi in eligible[t]]
        heapq.heapify(heap)
        for g in free:
            c, mi = heapq.heappop(heap)
            assignment[mi].append(g)
            holder[g] = mi
            count[mi] = c + 1
            heapq.heappush(heap, (c + 1, mi))
    _rebalance(layout, eligible, order, assignment, holder, count, owner)
    return assignment


def _rebalance(
    layout: _Layout,
    eligible: Mapping[str, list[int]],
    order: Sequence[str],
    assignment: list[list[int]],
    holder: list[int],
    count: list[int],
    owner: list[int],
) -> None:
    """Per topic, move partitions from its most loaded holder to its least loaded eligible member while they
    differ by two or more; repeat passes until a full pass moves nothing. Every move lowers the sum of squared
    counts, so this terminates; at the end Kafka's `isBalanced` condition holds."""
    moved_any = True
    while moved_any:
        moved_any = False
        for t in order:
            members = eligible[t]
            if len(members) < 2:
                continue
            held: dict[int, list[int]] = {}
            for g in layout.topic_range(t):
                held.setdefault(holder[g], []).append(g)
            # Lazy heaps: an entry is live while it matches the member's current count (and, for `hi`, the
            # member still holds a partition of this topic); every change pushes a fresh entry.
            lo = [(count[mi], mi) for mi in members]
            heapq.heapify(lo)
            hi = [(-count[mi], mi) for mi in sorted(held)]
            heapq.heapify(hi)
            while True:
                while hi and (-hi[0][0] != count[hi[0][1]] or not held.get(hi[0][1])):
                    heapq.heappop(hi)
                while lo and lo[0][0] != count[lo[0][1]]:
                    heapq.heappop(lo)
                if not hi or -hi[0][0] - lo[0][0] < 2:
                    break
                src, dst = hi[0][1], lo[0][1]
                g = _pick_partition(held[src], src, dst, owner)
                held[src].remove(g)
                held.setdefault(dst, []).append(g)
                holder[g] = dst
                assignment[src].remove(g)
                assignment[dst].append(g)
                count[src] -= 1
                count[dst] += 1
                moved_any = True
                for mi in (src, dst):
                    heapq.heappush(lo, (count[mi], mi))
                    heapq.heappush(hi, (-count[mi], mi))


def _pick_partition(candidates: list[int], src: int, dst: int, owner: list[int]) -> int:
    """Which of `src`'s partitions to give away: one `dst` owned before, else one `src` did not own before,
    else its highest id (deterministic)."""
    back = [g for g in candidates if owner[g] == dst]
    if back:
        return min(back)
    fresh = [g for g in candidates if owner[g] != src]
    if fresh:
        return max(fresh)
    return max(candidates)


def _run(
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    owned: Mapping[str, Collection[TopicPartition]] | None,
    generations: Mapping[str, int] | None,
    cooperative: bool,
) -> Assignment:
    subs_by_member = normalise_subscriptions(subscriptions, partitions_per_topic)
    owned = owned or {}
    generations = generations or {}
    _validate_owned(owned)
    members = member_order(subs_by_member, None)
    if not members:
        return {}
    layout = _Layout.of(partitions_per_topic)
    subs = [subs_by_member[m] for m in members]
    claims = _collect_claims(layout, members, owned, generations)
    owner = claims.owner()
    owned_ids = _owned_ids(owner, len(members))
    topic_of = [0] * layout.total
    pnum = [0] * layout.total
    for ti in range(len(layout.topics)):
        lo, hi = layout.base[ti], layout.base[ti + 1]
        topic_of[lo:hi] = [ti] * (hi - lo)
        pnum[lo:hi] = range(hi - lo)
    if len(set(subs)) == 1:
        # Owned partitions of topics outside the (common) subscription are dropped, as Kafka filters them.
        common = subs[0]
        owned_ids = [[g for g in ids if layout.topics[topic_of[g]] in common] for ids in owned_ids]
        result = _constrained(layout, common, owned_ids, pnum)
    else:
        result = _general(layout, subs, owned_ids, owner, topic_of)
    if cooperative:
        result = _withhold_transfers(result, claims)
    return {m: layout.to_tuples(result[i]) for i, m in sorted(enumerate(members), key=lambda e: e[1])}


def _withhold_transfers(result: list[list[int]], claims: _Claims) -> list[list[int]]:
    """KIP-429: a partition assigned to member M is withheld this round unless nobody else claims it or M's own
    claim has a strictly higher generation than every other claim: the other owner must revoke it and rejoin
    first, and the follow-up rebalance hands it over."""
    top_member, top_gen, runner_up = claims.top_member, claims.top_gen, claims.runner_up_gen
    return [
        [g for g in ids if top_member[g] == _NO_OWNER or (top_member[g] == mi and runner_up[g] < top_gen[g])]
        for mi, ids in enumerate(result)
    ]


def sticky_assign(
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    *,
    owned: Mapping[str, Collection[TopicPartition]] | None = None,
    generations: Mapping[str, int] | None = None,
) -> Assignment:
    """Kafka's `sticky` assignor (KIP-54): balanced, then as close to `owned` as balance allows.

    >>> subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"], "C2": ["t0", "t1"]}
    >>> sticky_assign(subs, {"t0": 2, "t1": 2}, owned={"C0": [("t0", 0), ("t1", 1)], "C1": [("t0", 1)],
    ...     "C2": [("t1", 0)]}, generations={"C0": 5, "C1": 5, "C2": 5})
    {'C0': [('t0', 0), ('t1', 1)], 'C1': [('t0', 1)], 'C2': [('t1', 0)]}
    """
    return _run(subscriptions, partitions_per_topic, owned, generations, cooperative=False)


def cooperative_sticky_assign(
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
    *,
    owned: Mapping[str, Collection[TopicPartition]] | None = None,
    generations: Mapping[str, int] | None = None,
) -> Assignment:
    """Kafka's `cooperative-sticky` (KIP-429): the sticky assignment minus partitions another member must revoke
    first; those are handed over by the follow-up rebalance the revoking member triggers."""
    return _run(subscriptions, partitions_per_topic, owned, generations, cooperative=True)
