"""The classic core's two hooks for a coordinator that assigns a group itself (a mixed group): a SyncGroup answer
held until a partition is handed on in the same generation (or a deadline), and a rejoin of a Stable group
answered in the current generation when the caller's policy accepts it. Without them (plain groups) nothing of
Kafka's behaviour changes, which the last tests hold."""

from __future__ import annotations

from group.driver import Driver
from zkcoord.group import handlers as h
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import JoinGroupRequest
from zkcoord.group.model import ClassicGroup, Member
from zkcoord.group.state import GroupState

NEW = (("range", b"meta-2"),)  # a rejoin whose metadata changed (a KIP-429 member's owned list shrank)


def completed_join(d: Driver, n: int) -> tuple[list[str], int, str]:
    """n members joined and the join completed (CompletingRebalance): (member ids, generation, leader)."""
    tokens = [d.join_new(client_id=f"c{i}") for i in range(n)]
    d.advance(0)
    resps = [d.jr(t) for t in tokens]
    assert all(r.error_code == 0 for r in resps), resps
    assert d.st.groups["g"].state is GroupState.COMPLETING_REBALANCE
    return [r.member_id for r in resps], resps[0].generation_id, resps[0].leader


def hold(d: Driver, gen: int, *members: str, wait: int = 5_000) -> None:
    d.apply(h.hold_sync_answers(d.st, "g", gen, members, d.now + wait))


def test_a_held_answer_waits_for_the_release_and_carries_the_new_assignment() -> None:
    d = Driver()
    (leader, held, other), gen, _ = completed_join(d, 3)
    hold(d, gen, held)
    early = d.sync(held, gen)  # parked before the leader's SyncGroup, as usual
    t_other = d.sync(other, gen)
    t_leader = d.sync(leader, gen, assignments=((leader, b"L"), (held, b"H"), (other, b"O")))
    assert d.sr(t_leader).assignment == b"L" and d.sr(t_other).assignment == b"O"
    assert early not in d.responses  # held: the leader's SyncGroup did not answer it
    group = d.st.groups["g"]
    assert group.state is GroupState.STABLE and h.sync_held(group, gen, held)
    records = len(d.records)
    d.apply(h.release_sync_answer(d.st, "g", gen, held, b"H+p", d.now))
    assert (d.sr(early).error_code, d.sr(early).assignment) == (0, b"H+p")
    assert len(d.records) == records + 1  # the new assignment is recorded before it is answered
    assert group.members[held].assignment == b"H+p" and group.generation == gen
    assert not h.sync_held(group, gen, held)
    # a later SyncGroup of the same generation gets the new assignment; the release does nothing twice
    assert d.sr(d.sync(held, gen)).assignment == b"H+p"
    assert d.apply(h.release_sync_answer(d.st, "g", gen, held, b"x", d.now)) == h.Result()
    assert d.answered_twice == []


def test_a_held_members_syncgroup_after_the_leaders_is_parked_too() -> None:
    d = Driver()
    (leader, held), gen, _ = completed_join(d, 2)
    hold(d, gen, held)
    d.sync(leader, gen, assignments=((leader, b"L"), (held, b"H")))
    late = d.sync(held, gen)  # the group is Stable now: Kafka answers at once, the hold parks it
    assert late not in d.responses
    assert d.st.groups["g"].members[held].awaiting_sync
    d.apply(h.release_sync_answer(d.st, "g", gen, held, None, d.now))  # None: the stored assignment
    assert d.sr(late).assignment == b"H"


def test_the_deadline_answers_with_the_stored_assignment_in_the_same_generation() -> None:
    d = Driver()
    (leader, held), gen, _ = completed_join(d, 2)
    hold(d, gen, held, wait=400)
    t_held = d.sync(held, gen)
    d.sync(leader, gen, assignments=((leader, b"L"), (held, b"H")))
    records = len(d.records)
    d.advance(399)
    assert t_held not in d.responses
    d.advance(1)
    assert (d.sr(t_held).error_code, d.sr(t_held).assignment) == (0, b"H")
    group = d.st.groups["g"]
    assert group.state is GroupState.STABLE and group.generation == gen and len(d.records) == records
    assert not h.sync_held(group, gen, held)
    # the held member stayed alive meanwhile, and heartbeats normally afterwards
    assert d.r(d.heartbeat(held, gen)).error_code == 0  # type: ignore[attr-defined]


def test_a_rebalance_during_a_hold_answers_rebalance_in_progress() -> None:
    d = Driver()
    (leader, held), gen, _ = completed_join(d, 2)
    hold(d, gen, held)
    t_held = d.sync(held, gen)
    d.sync(leader, gen, assignments=((leader, b"L"), (held, b"H")))
    d.apply(h.handle_external_rebalance(d.st, "g", d.now))
    assert d.sr(t_held).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.st.groups["g"].sync_holds == {}
    d.advance(10_000)  # the hold's timer fires stale: nothing is answered twice
    assert d.answered_twice == []


def test_a_hold_outside_a_completing_join_or_of_another_generation_holds_nothing() -> None:
    d = Driver()
    _, follower = d.stable_group(2)
    gen = d.st.groups["g"].generation
    assert d.apply(h.hold_sync_answers(d.st, "g", gen, (follower,), d.now + 1000)) == h.Result()
    assert d.sr(d.sync(follower, gen)).error_code == 0  # Stable: answered at once
    d2 = Driver()
    (_, held), gen2, _ = completed_join(d2, 2)
    assert d2.apply(h.hold_sync_answers(d2.st, "g", gen2 + 1, (held,), d2.now + 1000)) == h.Result()
    assert d2.apply(h.hold_sync_answers(d2.st, "nope", gen2, (held,), d2.now + 1000)) == h.Result()


def _policy(answer: bool, asked: list[str]) -> h.RejoinInPlace:
    def decide(group: ClassicGroup, member: Member, req: JoinGroupRequest) -> bool:
        asked.append(member.member_id)
        return answer

    return decide


def test_a_rejoin_the_policy_accepts_is_answered_in_the_current_generation() -> None:
    d = Driver()
    leader, follower = d.stable_group(2)
    group = d.st.groups["g"]
    gen = group.generation
    records = len(d.records)
    asked: list[str] = []
    t = d.join("g", follower, protocols=NEW, in_place=_policy(True, asked))
    resp = d.jr(t)
    assert (resp.error_code, resp.generation_id, resp.leader, resp.members) == (0, gen, leader, ())
    assert group.state is GroupState.STABLE and asked == [follower]
    assert group.members[follower].protocols == NEW  # stored, and recorded as a rebalance would
    assert len(d.records) == records + 1
    assert d.sr(d.sync(follower, gen)).assignment == f"a-{follower}".encode()  # its assignment stands
    # the leader too: with the member list, as Kafka answers a leader's rejoin during CompletingRebalance; its
    # SyncGroup cannot change the stored assignment of a Stable group
    t = d.join("g", leader, protocols=NEW, in_place=_policy(True, asked))
    assert d.jr(t).generation_id == gen and len(d.jr(t).members) == 2
    assert d.sr(d.sync(leader, gen, assignments=((leader, b"x"),))).assignment == f"a-{leader}".encode()
    assert group.state is GroupState.STABLE and group.generation == gen


def test_without_the_policy_or_when_it_refuses_kafka_rebalances() -> None:
    for policy in (None, _policy(False, [])):
        d = Driver()
        _, follower = d.stable_group(2)
        t = d.join("g", follower, protocols=NEW, in_place=policy)
        assert t not in d.responses  # parked: a rebalance started
        assert d.st.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_the_policy_is_not_asked_for_an_unchanged_follower() -> None:
    d = Driver()
    _, follower = d.stable_group(2)
    asked: list[str] = []
    t = d.join("g", follower, in_place=_policy(True, asked))
    assert d.jr(t).error_code == 0 and asked == []  # Kafka's own same-generation answer
