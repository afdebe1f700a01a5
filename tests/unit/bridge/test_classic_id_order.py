"""Classic members' consumer ids sort in join order (issue 23): a member-by-member migration then moves no
partition from one classic member to another until the last replacements, where range itself must."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.bridge.mixed_policy import ClassicMember, consumer_id_for, is_classic_id, plan_assignment
from zkcoord.legacy.codecs import ConsumerRegistration
from zkcoord.legacy.ids import java_sorted
from zkcoord.topic_partition import TopicPartition

GROUP = "g"
PARTS = {"t": list(range(12))}


def _descending_hash_ids(n: int) -> list[str]:
    """Member ids whose sha256 prefixes descend: with hashed consumer ids each newcomer sorted first."""
    found: list[str] = []
    last = "g" * 64
    i = 0
    while len(found) < n:
        digest = hashlib.sha256(f"m{i}".encode()).hexdigest()
        if digest < last and digest < "8":
            found.append(f"m{i}")
            last = digest
        i += 1
    return found


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=8, unique=True))
def test_each_new_id_sorts_after_every_classic_id_before_it(member_ids: list[str]) -> None:
    taken: list[str] = []
    for mid in member_ids:
        cid = consumer_id_for(GROUP, mid, taken)
        assert is_classic_id(GROUP, cid)
        assert all(java_sorted([t, cid])[-1] == cid for t in taken)
        taken.append(cid)


def test_member_by_member_moves_nothing_between_classic_members_until_the_end() -> None:
    legacy = {f"{GROUP}_l{i}": ConsumerRegistration.static({"t": 1}, timestamp_ms=1) for i in range(4)}
    ids: dict[str, str] = {}
    classic: list[ClassicMember] = []

    def owners() -> dict[TopicPartition, str]:
        shares = plan_assignment("range", legacy, classic, GROUP, PARTS, ids)
        return {tp: mid for mid, tps in shares.items() for tp in tps}

    before = owners()
    between_classic = []
    for i, mid in enumerate(_descending_hash_ids(4)):
        for change in ("join", "leave"):
            if change == "join":
                ids[mid] = consumer_id_for(GROUP, mid, ids.values())
                classic.append(ClassicMember(mid, mid, ("t",)))
            else:
                del legacy[f"{GROUP}_l{i}"]
            now = owners()
            between_classic.append(sum(1 for tp, m in now.items() if tp in before and before[tp] != m))
            before = now
    # Range over 12 partitions: only the last join and leave (5 members, then 4) move one partition each.
    assert between_classic == [0, 0, 0, 0, 0, 0, 1, 1]
