"""KIP-429 bookkeeping over plain values: which owned partitions each member must revoke before they move."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from zkcoord.assignors._common import Assignment, TopicPartition


def cooperative_revocations(
    previous: Mapping[str, Collection[TopicPartition]], new: Mapping[str, Collection[TopicPartition]]
) -> Assignment:
    """Partitions each member owned in `previous` and is not assigned in `new` (a member missing from `new`
    revokes everything). Every member of either mapping appears, with a sorted, possibly empty list.

    A cooperative member keeps consuming what it keeps, revokes exactly these, then rejoins at once so the
    follow-up rebalance can hand them to their new owners.

    >>> cooperative_revocations({"a": [("t", 0), ("t", 1)], "b": []}, {"a": [("t", 0)], "b": [("t", 2)]})
    {'a': [('t', 1)], 'b': []}
    """
    out: Assignment = {}
    for member in sorted(set(previous) | set(new)):
        keep = set(new.get(member, ()))
        out[member] = sorted({tp for tp in previous.get(member, ()) if tp not in keep})
    return out
