"""Shared-group scenarios (`group: shared`): every protocol's members in one group, `replace` moving a member slot
to another protocol; the built-in rolling-migration; and every bad input named by file:line, key path and what
was expected."""

from __future__ import annotations

import textwrap

import pytest

from migration.compare.scenario import (
    ChurnKind,
    GroupMode,
    ScenarioError,
    builtin_scenario,
    parse_scenario,
)

SHARED = textwrap.dedent(
    """\
    name: shared
    group: shared
    duration_s: 30
    topics:
      - {name: a, partitions: 4}
    producer: {rate_per_s: 10, duration_s: 20}
    protocols:
      legacy-fast: {members: 2, strategy: range}
      classic-kafka-python: {members: 0, strategy: range}
      classic-confluent: {members: 0, strategy: range}
    churn:
      - {at_s: 1, event: replace, member: 0, protocol: classic-kafka-python}
      - {at_s: 2, event: join, protocol: classic-confluent}
      - {at_s: 3, event: replace, member: 2, protocol: legacy-fast}
      - {at_s: 4, event: leave, member: 1}
      - {at_s: 5, event: replace, member: 1, protocol: classic-kafka-python}
    """
)


def _edit(old: str, new: str) -> str:
    assert old in SHARED, old
    return SHARED.replace(old, new, 1)


def test_shared_scenario_tracks_each_slot_protocol() -> None:
    sc = parse_scenario(SHARED, "s.yaml")
    assert sc.group is GroupMode.SHARED and sc.shared
    assert [p.protocol for p in sc.initial_slots()] == ["legacy-fast", "legacy-fast"]
    assert [(e.kind, e.member, e.protocol) for e in sc.churn] == [
        (ChurnKind.REPLACE, 0, "classic-kafka-python"),
        (ChurnKind.JOIN, None, "classic-confluent"),
        (ChurnKind.REPLACE, 2, "legacy-fast"),
        (ChurnKind.LEAVE, 1, None),
        (ChurnKind.REPLACE, 1, "classic-kafka-python"),  # slot 1 is the joined member's, now legacy-fast
    ]


def test_builtin_rolling_migration_goes_to_classic_and_back() -> None:
    sc = builtin_scenario("rolling-migration")
    assert sc.shared and {e.kind for e in sc.churn} == {ChurnKind.REPLACE}
    slots = [p.protocol for p in sc.initial_slots()]
    assert slots == ["legacy-fast", "legacy-fast", "legacy-faithful", "legacy-faithful"]
    for e in sc.churn:
        assert e.member is not None and e.protocol is not None
        slots[e.member] = e.protocol
        if e.at_s < 12:
            assert e.protocol.startswith("classic")
    assert slots == ["legacy-fast", "legacy-fast", "legacy-faithful", "legacy-faithful"]
    assert sc.duration_s <= 30  # one more play of `zkcoord demo --rolling-migration`


BAD = [
    (("protocol: classic-kafka-python}", "protocol: classic-java}"), 12, "churn[0].protocol",
     "unknown protocol str 'classic-java'; expected one of: legacy-faithful, legacy-fast"),
    (("protocol: classic-kafka-python}", "protocol: legacy-faithful}"), 12, "churn[0].protocol",
     "protocol 'legacy-faithful' is not under `protocols` (its strategy comes from there)"),
    (("protocol: classic-kafka-python}", "protocol: legacy-fast}"), 12, "churn[0].protocol",
     "member 0 already speaks legacy-fast; replace needs a member of another protocol"),
    (("replace, member: 0,", "replace, member: random,"), 12, "churn[0].member",
     "replace needs a member index, not 'random'"),
    (("{at_s: 1, event: replace, member: 0, protocol: classic-kafka-python}", "{at_s: 1, event: replace, member: 0}"),
     12, "churn[0]", "missing required key 'protocol'"),
    (("replace, member: 0,", "replace, member: 2,"), 12, "churn[0].member", "live member index in [0, 1]"),
    (("group: shared", "group: together"), 2, "group", "expected one of: per-protocol, shared"),
    (("classic-confluent: {members: 0, strategy: range}", "classic-confluent: {members: 0, strategy: roundrobin}"),
     10, "protocols.classic-confluent.strategy", "every protocol of a shared group uses one strategy"),
    (("classic-confluent: {members: 0, strategy: range}", "classic-confluent: {members: 0, strategy: sticky}"),
     10, "protocols.classic-confluent.strategy", "a shared group follows the legacy assignor"),
    (("legacy-fast: {members: 2,", "legacy-fast: {members: 0,"), 7, "protocols",
     "a shared group needs at least one member at the start"),
    (("leave, member: 1}", "leave, member: random}"), 16, "churn[4]",
     "the protocol of each member is unknown after a removal of a 'random' member"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "line", "path", "problem"), BAD, ids=[b[2] + ":" + b[3][:24] for b in BAD])
def test_bad_shared_input_names_line_path_and_expectation(
    edit: tuple[str, str], line: int, path: str, problem: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_edit(*edit), "s.yaml")
    err = info.value
    assert (err.line, err.path) == (line, path), str(err)
    assert problem in err.problem, str(err)


def test_replace_needs_a_shared_group() -> None:
    text = SHARED.replace("group: shared", "group: per-protocol").replace("members: 0", "members: 1")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml")
    assert (info.value.line, info.value.path) == (12, "churn[0].event")
    assert "replace needs `group: shared` (the replaced member and its successor in one group)" in str(
        info.value
    )


def test_a_join_names_a_protocol_only_in_a_shared_group() -> None:
    text = (
        _edit("group: shared\n", "").split("churn:")[0]
        + "churn:\n  - {at_s: 1, event: join, protocol: legacy-fast}\n"
    )
    text = text.replace("members: 0", "members: 1")
    with pytest.raises(
        ScenarioError, match=r"churn\[0\]\.protocol: a join names a protocol only in a `group: shared`"
    ):
        parse_scenario(text, "s.yaml")


# --- cooperative protocols (#23) -------------------------------------------------------------------------------


def test_cooperative_protocols_are_classic_and_fixed_to_cooperative_sticky() -> None:
    from migration.compare.scenario import COOPERATIVE_PROTOCOLS, PROTOCOLS, Family, strategies_for

    assert set(COOPERATIVE_PROTOCOLS) == {"classic-kafka-python-cooperative", "classic-confluent-cooperative"}
    for name in COOPERATIVE_PROTOCOLS:
        assert PROTOCOLS[name] is Family.CLASSIC
        assert strategies_for(name) == ("cooperative-sticky",)
    assert "range" in strategies_for("classic-kafka-python")


def test_a_cooperative_protocol_with_an_eager_strategy_is_refused_with_line_and_path() -> None:
    from migration.compare.scenario import ScenarioError, parse_scenario

    text = """name: c
duration_s: 5
topics: [{name: t, partitions: 2}]
producer: {rate_per_s: 1, duration_s: 1}
protocols:
  classic-kafka-python-cooperative: {members: 1, strategy: range}
"""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "c.yaml")
    assert err.value.line == 6 and err.value.path == "protocols.classic-kafka-python-cooperative.strategy"
    assert "expected one of: cooperative-sticky (classic-kafka-python-cooperative's strategy)" in str(
        err.value
    )


def test_a_shared_group_takes_cooperative_members_beside_its_legacy_strategy() -> None:
    from migration.compare.scenario import builtin_scenario

    sc = builtin_scenario("rolling-migration-cooperative")
    assert sc.shared
    assert {p.protocol: p.strategy for p in sc.protocols} == {
        "legacy-fast": "range",
        "classic-kafka-python-cooperative": "cooperative-sticky",
        "classic-confluent-cooperative": "cooperative-sticky",
    }
    eager = builtin_scenario("rolling-migration")
    assert [(e.at_s, e.member) for e in sc.churn] == [
        (e.at_s, e.member) for e in eager.churn
    ]  # same schedule


def test_a_shared_group_still_refuses_two_eager_strategies() -> None:
    from migration.compare.scenario import ScenarioError, parse_scenario

    text = """name: c
group: shared
duration_s: 5
topics: [{name: t, partitions: 2}]
producer: {rate_per_s: 1, duration_s: 1}
protocols:
  classic-confluent-cooperative: {members: 1, strategy: cooperative-sticky}
  legacy-fast: {members: 1, strategy: range}
  classic-kafka-python: {members: 0, strategy: roundrobin}
"""
    with pytest.raises(ScenarioError, match=r"protocols\.legacy-fast has 'range', this one 'roundrobin'"):
        parse_scenario(text, "c.yaml")
