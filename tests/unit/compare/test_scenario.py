"""Scenario files: the built-in one and a full file parse; every kind of bad input names file:line, the key path
and what was expected."""

from __future__ import annotations

import contextlib
import textwrap
import time
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migration.compare.scenario import (
    BUILTIN,
    MAX_SCENARIO_BYTES,
    MAX_YAML_DEPTH,
    PROTOCOLS,
    ChurnEvent,
    ChurnKind,
    ProtocolRun,
    ScenarioError,
    builtin_scenario,
    load_scenario,
    parse_scenario,
    resolve_scenario,
)
from zkcoord.errors import ConfigError

GOOD = textwrap.dedent(
    """\
    name: sample
    seed: 3
    duration_s: 60
    session_timeout_ms: 10000
    topics:
      - name: a
        partitions: 4
      - name: b
        partitions: 2
    producer:
      rate_per_s: 50.5
      duration_s: 30
    protocols:
      legacy-faithful: {members: 2, strategy: roundrobin}
      classic-kafka-python: {members: 3, strategy: sticky}
    churn:
      - {at_s: 1, event: join, count: 2}
      - {at_s: 2, event: leave, member: 3}
      - {at_s: 3, event: crash, member: random}
      - {at_s: 4, event: pause, member: 0, duration_s: 12}
      - {at_s: 5, event: session-expiry, member: 1}
      - {at_s: 5, event: zk-leader-kill}
      - {at_s: 6, event: coordinator-kill}
      - {at_s: 7, event: partition-increase, topic: b, partitions: 5}
    """
)


def test_good_file_parses_to_exact_values(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    sc = load_scenario(path)
    assert (sc.name, sc.seed, sc.duration_s, sc.session_timeout_ms, sc.source) == (
        "sample",
        3,
        60.0,
        10000,
        str(path),
    )
    assert sc.partitions_per_topic() == {"a": 4, "b": 2}
    assert (sc.producer.rate_per_s, sc.producer.duration_s) == (50.5, 30.0)
    assert sc.protocols == (
        ProtocolRun("legacy-faithful", 2, "roundrobin"),
        ProtocolRun("classic-kafka-python", 3, "sticky"),
    )
    assert sc.protocol("classic-kafka-python").family.value == "classic"
    assert sc.churn == (
        ChurnEvent(1.0, ChurnKind.JOIN, count=2),
        ChurnEvent(2.0, ChurnKind.LEAVE, member=3),
        ChurnEvent(3.0, ChurnKind.CRASH, member=None),
        ChurnEvent(4.0, ChurnKind.PAUSE, member=0, duration_s=12.0),
        ChurnEvent(5.0, ChurnKind.SESSION_EXPIRY, member=1),
        ChurnEvent(5.0, ChurnKind.ZK_LEADER_KILL),
        ChurnEvent(6.0, ChurnKind.COORDINATOR_KILL),
        ChurnEvent(7.0, ChurnKind.PARTITION_INCREASE, topic="b", partitions=5),
    )


def test_builtin_demo_is_short_and_compares_legacy_with_classic():
    sc = builtin_scenario("demo")
    assert resolve_scenario("demo") == sc
    # `zkcoord demo` plays every protocol and then builds the report, all in under two minutes.
    assert sc.duration_s * len(sc.protocols) <= 50
    # A crash is noticed only after the session timeout: the next event must come later, or its churn→stable
    # latency would include the crash's recovery.
    crash = next(i for i, e in enumerate(sc.churn) if e.kind is ChurnKind.CRASH)
    assert sc.churn[crash].at_s + sc.session_timeout_ms / 1000 < sc.churn[crash + 1].at_s
    assert [p.protocol for p in sc.protocols] == ["legacy-faithful", "legacy-fast", "classic-kafka-python"]
    assert {e.kind for e in sc.churn} >= {
        ChurnKind.JOIN, ChurnKind.LEAVE, ChurnKind.CRASH, ChurnKind.PAUSE, ChurnKind.PARTITION_INCREASE,
    }  # fmt: skip


def test_builtin_mixed_covers_every_protocol_and_churn_kind():
    sc = builtin_scenario("mixed")
    assert {p.protocol for p in sc.protocols} == set(PROTOCOLS)
    # replace exists only in shared-group scenarios (rolling-migration); `mixed` plays one group per protocol.
    assert {e.kind for e in sc.churn} == set(ChurnKind) - {ChurnKind.REPLACE}


def _replace(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


BAD = [
    # (edit, line, path, problem fragment)
    (("name: sample", "name: 'bad name!'"), 1, "name", "expected a name of 1-249 characters"),
    (("seed: 3\n", "seed: 3\nseeed: 4\n"), 3, "seeed", "unknown key 'seeed'; expected one of: name, duration_s"),
    (("duration_s: 60", "duration_s: -1"), 3, "duration_s", "expected a number in (0.0, 86400.0], got -1"),
    (("duration_s: 60", "duration_s: soon"), 3, "duration_s", "got str 'soon'"),
    (("session_timeout_ms: 10000", "session_timeout_ms: 1.5"), 4, "session_timeout_ms", "expected an integer"),
    (("    partitions: 4", "    partitions: 0"), 7, "topics[0].partitions", "expected an integer in [1, 10000], got 0"),
    (("  - name: b\n", "  - name: a\n"), 8, "topics[1].name", "topic 'a' is listed twice"),
    (("    partitions: 2\n", "    partitions: 2\n    replicas: 3\n"), 10, "topics[1].replicas", "unknown key 'replicas'"),
    (("  rate_per_s: 50.5\n", ""), 10, "producer", "missing required key 'rate_per_s'"),
    (("  duration_s: 30", "  duration_s: 61"), 12, "producer.duration_s", "expected a number in (0.0, 60.0], got 61"),
    (("legacy-faithful: {", "legacy-slow: {"), 14, "protocols.legacy-slow", "unknown protocol 'legacy-slow'"),
    (
        ("strategy: roundrobin", "strategy: sticky"),
        14,
        "protocols.legacy-faithful.strategy",
        "expected one of: range, roundrobin (the legacy protocol's strategies); got str 'sticky'",
    ),
    (("members: 3", "members: true"), 15, "protocols.classic-kafka-python.members", "got boolean True"),
    (("event: join", "event: explode"), 17, "churn[0].event", "expected one of: join, leave, crash, pause"),
    (("{at_s: 1, event: join, count: 2}", "{at_s: 1, count: 2}"), 17, "churn[0]", "missing required key 'event'"),
    (("{at_s: 2, event: leave, member: 3}", "{at_s: 2, event: leave}"), 18, "churn[1]", "missing required key 'member'"),
    (("event: leave, member: 3", "event: leave, member: 4"), 18, "churn[1].member", "live member index in [0, 3]"),
    (("{at_s: 3, event: crash", "{at_s: 0.5, event: crash"), 19, "churn[2].at_s", "events must be in time order"),
    (("{at_s: 7, event", "{at_s: 70, event"), 24, "churn[7].at_s", "expected a number in [0.0, 60.0], got 70"),
    (("duration_s: 12}", "duration_s: 0}"), 20, "churn[3].duration_s", "expected a number in (0.0, 3600.0]"),
    (("{at_s: 6, event: coordinator-kill}", "{at_s: 6, event: coordinator-kill, member: 1}"), 23, "churn[6].member", "unknown key 'member'"),
    (("topic: b, partitions: 5", "topic: c, partitions: 5"), 24, "churn[7].topic", "expected one of: a, b; got str 'c'"),
    (("topic: b, partitions: 5", "topic: b, partitions: 2"), 24, "churn[7].partitions", "expected an integer in [3, 10000], got 2"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "line", "path", "problem"), BAD, ids=[b[2] + ":" + b[3][:20] for b in BAD])
def test_bad_input_names_line_path_and_expectation(edit, line, path, problem):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_replace(*edit), "s.yaml")
    err = info.value
    assert (err.source, err.line, err.path) == ("s.yaml", line, path), str(err)
    assert problem in err.problem
    assert str(err).startswith(f"s.yaml:{line}: {path}: ")
    assert isinstance(err, ConfigError)


@pytest.mark.parametrize(
    ("text", "line", "path", "problem"),
    [
        ("", 1, "<top>", "the file is empty"),
        ("name: x\ntopics: [\n", 3, "<yaml>", "not valid YAML"),
        ("- a\n- b\n", 1, "<top>", "expected a mapping, got a list"),
        ("name: x\nname: y\n", 2, "name", "duplicate key"),
        ("name: x\n", 1, "<top>", "missing required key 'duration_s'"),
        ("name: 2001-13-45\n", 1, "name", "bad scalar: month must be in 1..12"),
        ("name: \x07\n", None, "<yaml>", "not valid YAML: unacceptable character #x0007"),
    ],
)
def test_malformed_documents(text, line, path, problem):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "f.yaml")
    assert (info.value.line, info.value.path) == (line, path), str(info.value)
    assert problem in info.value.problem


def test_removing_every_member_is_rejected():
    text = (
        GOOD.split("churn:")[0]
        + "churn:\n"
        + "".join(f"  - {{at_s: {i}, event: crash, member: 0}}\n" for i in range(3))
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml")
    assert info.value.path == "churn[2]" and "no member is left" in info.value.problem


def test_unreadable_file_and_unknown_builtin(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match="no such built-in scenario; have: demo, mixed"):
        builtin_scenario("huge")


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A 'billion laughs' file: level i is a list of `width` aliases of level i-1 (9^9 strings expanded)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_fast_naming_the_alias(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    started = time.monotonic()
    with pytest.raises(ScenarioError) as info:
        load_scenario(bomb)
    assert time.monotonic() - started < 2.0  # the unbounded expansion ran 45 s into a MemoryError
    assert (info.value.line, info.value.path) == (2, "<yaml>")
    assert "alias *l0 refused: scenario files may not use aliases" in info.value.problem


def test_no_builtin_scenario_uses_an_alias_or_comes_near_the_bounds():
    for name in BUILTIN:
        text = resources.files("migration.compare").joinpath("scenarios", f"{name}.yaml").read_text()
        assert "*" not in text and "&" not in text, name
        assert len(text.encode()) < MAX_SCENARIO_BYTES // 100
        builtin_scenario(name)


def test_nesting_beyond_the_depth_bound_is_refused_not_a_recursion_error():
    with pytest.raises(ScenarioError) as info:
        parse_scenario("a: " + "[" * 5000 + "]" * 5000 + "\n", "deep.yaml")
    assert f"nested deeper than {MAX_YAML_DEPTH} levels" in info.value.problem
    nested_ok = "a: " + "[" * (MAX_YAML_DEPTH - 2) + "]" * (MAX_YAML_DEPTH - 2) + "\n"
    with pytest.raises(ScenarioError, match="unknown key 'a'"):  # composed fine, then validated
        parse_scenario(nested_ok, "ok.yaml")


def test_a_file_over_the_size_limit_is_refused_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.write(b"name: x\n# " + b"x" * (MAX_SCENARIO_BYTES + 10) + b"\n")
    with pytest.raises(
        ScenarioError, match=f"larger than the scenario file limit of {MAX_SCENARIO_BYTES} bytes"
    ):
        load_scenario(big)
    with pytest.raises(ScenarioError, match="exceeds the scenario file limit"):
        parse_scenario("name: x\n#" + "x" * MAX_SCENARIO_BYTES, "s.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ScenarioError, match="not UTF-8 text: invalid start byte at byte 6"):
        load_scenario(binary)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_give_a_scenario_or_a_scenario_error(data):
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(ScenarioError):
        parse_scenario(text, "fuzz.yaml")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 600), st.sampled_from(["[", "{a: ", "- "]))
def test_any_nesting_depth_gives_a_scenario_error(depth, opener):
    closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
    if opener == "- ":
        text = "".join("  " * i + "- \n" for i in range(depth))
    else:
        text = "a: " + opener * depth + "1" + closer * depth + "\n"
    with pytest.raises(ScenarioError):
        parse_scenario(text, "fuzz.yaml")
