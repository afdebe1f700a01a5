"""The churn table (migration.compare.churn): every churn kind is decided without I/O, from the event and a view of
the play, into the one action the runner carries out, or a Skip with the reason its churn row records."""

from __future__ import annotations

import random

import pytest

from migration.compare import churn
from migration.compare.churn import PlayView, Target, plan
from migration.compare.scenario import ChurnEvent, ChurnKind, Family

LIVE = (Target("m0", "legacy-fast"), Target("m1", "classic-kafka-python"), Target("m2", "legacy-faithful"))


def view(**kw: object) -> PlayView:
    base: dict[str, object] = dict(
        shared=False, family=Family.CLASSIC, node_started=True, zk_nodes=3, live=LIVE, session_timeout_ms=4000
    )
    base.update(kw)
    return PlayView(**base)  # type: ignore[arg-type]


def test_every_churn_kind_has_a_rule() -> None:
    assert set(churn.CHURN_TABLE) == set(ChurnKind)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (ChurnEvent(1, ChurnKind.JOIN, count=2), churn.SpawnMembers(2, None)),
        (ChurnEvent(1, ChurnKind.JOIN, protocol="legacy-fast"), churn.SpawnMembers(1, "legacy-fast")),
        (ChurnEvent(1, ChurnKind.PARTITION_INCREASE, topic="t", partitions=6), churn.GrowTopic("t", 6)),
        (ChurnEvent(1, ChurnKind.ZK_LEADER_KILL), churn.KillZkLeader(churn.ZK_RESTART_AFTER_S)),
        (ChurnEvent(1, ChurnKind.COORDINATOR_KILL), churn.KillCoordinator()),
        (ChurnEvent(1, ChurnKind.LEAVE, member=1), churn.LeaveMember("m1")),
        (ChurnEvent(1, ChurnKind.CRASH, member=2), churn.CrashMember("m2")),
        (ChurnEvent(1, ChurnKind.PAUSE, member=0, duration_s=1.5), churn.SuspendMember("m0", 1.5, {"duration_s": 1.5})),
        (ChurnEvent(1, ChurnKind.REPLACE, member=0, protocol="classic-confluent"),
         churn.ReplaceMember("m0", "classic-confluent")),
    ],
)  # fmt: skip
def test_each_kind_decides_its_action(event: ChurnEvent, expected: churn.Action) -> None:
    assert plan(event, view(), random.Random(0)) == expected


def test_session_expiry_is_a_real_expiry_for_legacy_members_and_a_stall_for_the_others() -> None:
    rng = random.Random(0)
    assert plan(ChurnEvent(1, ChurnKind.SESSION_EXPIRY, member=0), view(), rng) == churn.ExpireSession("m0")
    stalled = plan(ChurnEvent(1, ChurnKind.SESSION_EXPIRY, member=1), view(), rng)
    assert stalled == churn.SuspendMember(
        "m1", 4.0 + churn.STALL_PAST_SESSION_S, {"how": "stalled past session timeout", "stall_s": 5.5}
    )


@pytest.mark.parametrize(
    ("event", "play", "reason"),
    [
        (ChurnEvent(1, ChurnKind.ZK_LEADER_KILL), view(zk_nodes=1), "no local ZooKeeper ensemble to disturb"),
        (ChurnEvent(1, ChurnKind.ZK_LEADER_KILL), view(zk_nodes=0), "no local ZooKeeper ensemble to disturb"),
        (ChurnEvent(1, ChurnKind.COORDINATOR_KILL), view(family=Family.LEGACY), "a legacy group has no coordinator"),
        (ChurnEvent(1, ChurnKind.COORDINATOR_KILL), view(node_started=False),
         "the node was given, not started by the runner"),
        (ChurnEvent(1, ChurnKind.CRASH, member=3), view(), "no live member to target"),
        (ChurnEvent(1, ChurnKind.LEAVE), view(live=()), "no live member to target"),
    ],
)  # fmt: skip
def test_what_cannot_be_done_is_skipped_with_its_reason(
    event: ChurnEvent, play: PlayView, reason: str
) -> None:
    assert plan(event, play, random.Random(0)) == churn.Skip(reason)


def test_a_shared_group_has_a_coordinator_to_kill_even_when_its_first_protocol_is_legacy() -> None:
    shared = view(shared=True, family=Family.LEGACY)
    assert (
        plan(ChurnEvent(1, ChurnKind.COORDINATOR_KILL), shared, random.Random(0)) == churn.KillCoordinator()
    )


def test_random_targets_come_from_the_seeded_rng_and_only_member_kinds_draw() -> None:
    def crashes(seed: int) -> list[churn.Action]:
        rng = random.Random(seed)
        out = []
        for kind in (
            ChurnKind.CRASH,
            ChurnKind.JOIN,
            ChurnKind.ZK_LEADER_KILL,
            ChurnKind.CRASH,
            ChurnKind.CRASH,
        ):
            out.append(plan(ChurnEvent(1, kind), view(), rng))
        return out

    first = crashes(7)
    assert first == crashes(7)  # same seed, same draws
    expected_rng = random.Random(7)
    draws = [LIVE[expected_rng.randrange(3)].name for _ in range(3)]  # group kinds did not draw
    assert [a.member for a in first if isinstance(a, churn.CrashMember)] == draws
