"""The one gate every assignor test goes through: run `assign`, then the shared invariants and determinism."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors import Assignment, TopicPartition, assign
from zkcoord.assignors.invariants import check_assignment

BALANCE = {"range": "per-topic", "roundrobin": "total", "sticky": "movable", "cooperative-sticky": "movable"}
calls = {"checked": 0}


def _reordered(
    subs: Mapping[str, Collection[str]],
    owned: Mapping[str, Collection[TopicPartition]] | None,
    generations: Mapping[str, int] | None,
    instance_ids: Mapping[str, str | None] | None,
    ppt: Mapping[str, int],
) -> tuple[dict, dict, dict | None, dict | None, dict | None]:
    def rev(d):
        return None if d is None else {k: d[k] for k in reversed(list(d))}

    subs2 = {m: list(reversed(list(subs[m]))) for m in reversed(list(subs))}
    owned2 = None if owned is None else {m: list(reversed(list(owned[m]))) for m in reversed(list(owned))}
    return subs2, rev(ppt), owned2, rev(generations), rev(instance_ids)


def checked_assign(
    strategy: str,
    subs: Mapping[str, Collection[str]],
    ppt: Mapping[str, int],
    *,
    owned: Mapping[str, Collection[TopicPartition]] | None = None,
    generations: Mapping[str, int] | None = None,
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """`assign` plus: the shared invariant checker, the KIP-429 safety rule for cooperative-sticky, and the same
    result when every input mapping and list is given in reverse order."""
    calls["checked"] += 1
    result = assign(strategy, subs, ppt, owned=owned, generations=generations, instance_ids=instance_ids)
    cooperative = strategy == "cooperative-sticky"
    check_assignment(result, subs, ppt, complete=not cooperative, balance=BALANCE[strategy])
    if cooperative:
        full = assign("sticky", subs, ppt, owned=owned, generations=generations)
        for m in result:
            assert set(result[m]) <= set(full[m]), f"{m}: cooperative gave more than sticky"
        # KIP-429 safety: a member may be given a partition another member still claims only when its own claim
        # is of a strictly higher generation (the other claim is stale); otherwise it must wait a round.
        gens = generations or {}
        claims: dict[TopicPartition, dict[str, int]] = {}
        for m, owned_tps in (owned or {}).items():
            for tp in owned_tps:
                claims.setdefault(tp, {})[m] = gens.get(m, -1)
        for m in result:
            for tp in result[m]:
                others = {n: g for n, g in claims.get(tp, {}).items() if n != m}
                mine = claims.get(tp, {}).get(m)
                assert not others or (mine is not None and mine > max(others.values())), (
                    f"{tp} given to {m} (claim generation {mine}) while {others} still own it"
                )
    subs2, ppt2, owned2, gens2, inst2 = _reordered(subs, owned, generations, instance_ids, ppt)
    again = assign(strategy, subs2, ppt2, owned=owned2, generations=gens2, instance_ids=inst2)
    assert again == result, "result depends on input order"
    assert list(result) == sorted(result)
    return result
