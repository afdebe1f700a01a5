"""Pure analysis of comparison trace rows (dicts with ts_ms, kind, member, topic, partition, ...): which member
rows enter the trace, their order, group-wide rebalance rounds, and the ownership overlap checks. No I/O."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from migration.compare.trace import EventKind
from zkcoord.topic_partition import TopicPartition

# Member-process row kinds that map onto trace kinds; the others ("started", "joined", ...) stay in members/.
TRACE_KINDS = frozenset(k.value for k in EventKind)


def member_trace_rows(
    member: str, rows: Iterable[Mapping[str, Any]], end_ms: int, reason: str
) -> list[Mapping[str, Any]]:
    """A member process's rows of trace kinds, plus an own_end at `end_ms` (detail.reason = `reason`) for every
    partition it still owned after its last row: a killed member never reports its release."""
    out: list[Mapping[str, Any]] = []
    owned: set[TopicPartition] = set()
    for r in rows:
        if r["kind"] not in TRACE_KINDS:
            continue
        out.append(r)
        tp = TopicPartition(r["topic"], r["partition"])
        if r["kind"] == "own_start":
            owned.add(tp)
        elif r["kind"] == "own_end":
            owned.discard(tp)
    for t, p in sorted(owned):
        out.append({"ts_ms": end_ms, "kind": "own_end", "member": member, "topic": t, "partition": p,
                    "offset": None, "generation": None, "detail": {"reason": reason}})  # fmt: skip
    return out


def in_trace_order(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows by time, then member; rows of one member with the same ms keep the order the member wrote them in
    (a rebalance_start and its rebalance_end often share a millisecond; sorting them by kind put the end first)."""
    return sorted(rows, key=lambda r: (r["ts_ms"], r["member"] or ""))


def number_rounds(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Replace each member's own rebalance counter by a group-wide round number: a round opens with a
    rebalance_start when no member is mid-rebalance and holds every member rebalance begun until all have ended.
    The member's counter is kept in detail.member_generation. Rows must be in time order."""
    out: list[dict[str, Any]] = []
    rounds: dict[tuple[str, int], int] = {}
    open_members: set[str] = set()
    current = 0
    for r in rows:
        r2 = dict(r)
        member, gen = r.get("member"), r.get("generation")
        if member is not None and gen is not None:
            key = (member, int(gen))
            if r["kind"] == "rebalance_start" and key not in rounds:
                if not open_members:
                    current += 1
                open_members.add(member)
                rounds[key] = current
            if r["kind"] == "rebalance_end":
                open_members.discard(member)
            r2["generation"] = rounds.get(key, current)
            r2["detail"] = {**(r.get("detail") or {}), "member_generation": int(gen)}
        elif r["kind"] == "churn" and r["detail"].get("event") in ("crash", "leave") and member:
            open_members.discard(member)
        out.append(r2)
    return out


def owner_overlaps(samples: Sequence[tuple[int, str, int, str]]) -> int:
    """Samples in which one partition had more than one distinct owner (a ZooKeeper owner znode is unique per
    partition, so anything but 0 means the samples or the registry are broken)."""
    owners: dict[tuple[int, str, int], set[str]] = defaultdict(set)
    for ts, t, p, o in samples:
        owners[(ts, t, p)].add(o)
    return sum(1 for v in owners.values() if len(v) > 1)


def interval_overlaps(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, str, str, int]]:
    """Moments when two members both believed they owned one partition, from own_start/own_end rows in time
    order: (topic, partition, holder, newcomer, ts_ms)."""
    holders: dict[TopicPartition, set[str]] = defaultdict(set)
    found = []
    for r in rows:
        tp = TopicPartition(r["topic"], r["partition"])
        if r["kind"] == "own_start":
            for other in sorted(holders[tp] - {r["member"]}):
                found.append((tp[0], tp[1], other, r["member"], r["ts_ms"]))
            holders[tp].add(r["member"])
        elif r["kind"] == "own_end":
            holders[tp].discard(r["member"])
    return found
