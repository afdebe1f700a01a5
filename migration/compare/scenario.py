"""Comparison scenario files (YAML): frozen values, and a validator whose every error names file:line and key path.

A scenario names topics, a producer load, the members per protocol with their assignment strategy, and a churn
schedule of timed events. By default every run of a scenario (one per protocol) plays the same workload and the
same churn; with `group: shared`, every protocol's members are one group in one run (a mixed group, through
`zkcoord serve --bridge-zk-groups`), and `replace` moves a member slot from one protocol to another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from zkcoord.errors import ConfigError


class Family(Enum):
    """Which group protocol a member speaks; decides the valid assignment strategies."""

    LEGACY = "legacy"
    CLASSIC = "classic"
    CONSUMER = "consumer"  # the consumer rebalance protocol (KIP-848): the coordinator assigns


# Protocol name -> family. Each protocol is one kind of member implementation.
PROTOCOLS: dict[str, Family] = {
    "legacy-faithful": Family.LEGACY,
    "legacy-fast": Family.LEGACY,  # incremental hand-over: keeps the owner znodes its new share leaves it
    "classic-kafka-python": Family.CLASSIC,
    "classic-kafka-python-cooperative": Family.CLASSIC,  # KIP-429: CooperativeStickyAssignor
    "classic-confluent": Family.CLASSIC,
    "classic-confluent-cooperative": Family.CLASSIC,  # KIP-429: cooperative-sticky, incremental_(un)assign
    "consumer-confluent": Family.CONSUMER,  # librdkafka, group.protocol=consumer
}

# Protocols whose members hand partitions over incrementally (revoke only what moves): their strategy is fixed.
COOPERATIVE_PROTOCOLS: dict[str, str] = {
    "classic-kafka-python-cooperative": "cooperative-sticky",
    "classic-confluent-cooperative": "cooperative-sticky",
}


def strategies_for(protocol: str) -> tuple[str, ...]:
    """The assignment strategies a protocol's members may use: a cooperative protocol's one, else its family's."""
    if protocol in COOPERATIVE_PROTOCOLS:
        return (COOPERATIVE_PROTOCOLS[protocol],)
    return STRATEGIES[PROTOCOLS[protocol]]


STRATEGIES: dict[Family, tuple[str, ...]] = {
    Family.LEGACY: ("range", "roundrobin"),
    Family.CLASSIC: ("range", "roundrobin", "sticky", "cooperative-sticky"),
    # consumer: the server-side assignor the members ask for (group.remote.assignor)
    Family.CONSUMER: ("uniform", "range"),
}


class GroupMode(Enum):
    """How a scenario's protocols meet: one group (and run) per protocol, or all of them in one group."""

    PER_PROTOCOL = "per-protocol"
    SHARED = "shared"


# Strategies a shared group may use: the legacy assignor decides the whole mixed group's assignment.
SHARED_STRATEGIES = ("range", "roundrobin")


class ChurnKind(Enum):
    """A timed disturbance of the group."""

    JOIN = "join"  # `count` new members start
    LEAVE = "leave"  # a member shuts down cleanly
    CRASH = "crash"  # a member is killed with SIGKILL
    PAUSE = "pause"  # a member is stopped with SIGSTOP for `duration_s`, then SIGCONT
    SESSION_EXPIRY = "session-expiry"  # legacy: real ZooKeeper session expiry; classic: heartbeats stop past the session timeout
    ZK_LEADER_KILL = "zk-leader-kill"  # the ZooKeeper ensemble leader is killed (and restarted)
    COORDINATOR_KILL = "coordinator-kill"  # the group's coordinator node is killed (classic protocols only)
    PARTITION_INCREASE = "partition-increase"  # a topic grows to `partitions`
    REPLACE = "replace"  # shared group: a member is stopped cleanly and one of `protocol` starts in its slot


# Fields each churn kind takes beyond `at_s` and `event`: name -> required.
_CHURN_FIELDS: dict[ChurnKind, dict[str, bool]] = {
    ChurnKind.JOIN: {"count": False, "protocol": False},
    ChurnKind.LEAVE: {"member": True},
    ChurnKind.CRASH: {"member": True},
    ChurnKind.PAUSE: {"member": True, "duration_s": True},
    ChurnKind.SESSION_EXPIRY: {"member": True},
    ChurnKind.ZK_LEADER_KILL: {},
    ChurnKind.COORDINATOR_KILL: {},
    ChurnKind.PARTITION_INCREASE: {"topic": True, "partitions": True},
    ChurnKind.REPLACE: {"member": True, "protocol": True},
}

# Churn kinds after which the member is gone (the others keep it in the group, possibly after a rejoin).
_REMOVES_MEMBER = frozenset({ChurnKind.LEAVE, ChurnKind.CRASH})

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_PARTITIONS = 10_000
MAX_MEMBERS = 1_000


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class Producer:
    """Total records per second over all partitions of all topics, for `duration_s` seconds from the start."""

    rate_per_s: float
    duration_s: float


@dataclass(frozen=True, slots=True)
class ProtocolRun:
    """The members one protocol starts with, and the assignment strategy they use."""

    protocol: str
    members: int
    strategy: str

    @property
    def family(self) -> Family:
        return PROTOCOLS[self.protocol]


@dataclass(frozen=True, slots=True)
class ChurnEvent:
    """One timed event. `member` indexes the live members in join order (0 = the oldest), or is None for "random"
    (drawn by the runner from the scenario seed) and for events that target no member."""

    at_s: float
    kind: ChurnKind
    member: int | None = None
    count: int = 1
    duration_s: float = 0.0
    topic: str | None = None
    partitions: int = 0
    protocol: str | None = (
        None  # replace: the protocol of the member that takes the slot; join (shared): of the new ones
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    seed: int
    duration_s: float
    session_timeout_ms: int
    topics: tuple[Topic, ...]
    producer: Producer
    protocols: tuple[ProtocolRun, ...]
    churn: tuple[ChurnEvent, ...]
    source: str = "<memory>"
    group: GroupMode = GroupMode.PER_PROTOCOL

    @property
    def shared(self) -> bool:
        return self.group is GroupMode.SHARED

    def initial_slots(self) -> list[ProtocolRun]:
        """Shared group: the protocol of each member at the start, in join order (protocols in file order)."""
        return [run for run in self.protocols for _ in range(run.members)]

    def partitions_per_topic(self) -> dict[str, int]:
        return {t.name: t.partitions for t in self.topics}

    def protocol(self, name: str) -> ProtocolRun:
        for run in self.protocols:
            if run.protocol == name:
                return run
        raise KeyError(name)


class ScenarioError(ConfigError):
    """A scenario file is malformed; the message names the file, line and key path, and what was expected."""

    def __init__(self, source: str, line: int | None, path: str, problem: str) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {path}: {problem}")
        self.source = source
        self.line = line
        self.path = path
        self.problem = problem


# --------------------------------------------------------------------------------------------------------------
# YAML -> plain values with the line of every key path


def _to_plain(node: yaml.Node, path: str, lines: dict[str, int], source: str, line: int | None = None) -> Any:
    # A mapping entry is located at its key (`producer:`), not at its value, which may start a line later.
    lines[path] = line if line is not None else node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise ScenarioError(source, key_node.start_mark.line + 1, path, "keys must be plain strings")
            key = str(key_node.value)
            sub = f"{path}.{key}" if path else key
            if key in out:
                raise ScenarioError(source, key_node.start_mark.line + 1, sub, "duplicate key")
            out[key] = _to_plain(value_node, sub, lines, source, key_node.start_mark.line + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_plain(item, f"{path}[{i}]", lines, source) for i, item in enumerate(node.value)]
    # Scalars: the safe constructor gives ints, floats, bools and nulls their YAML 1.1 types.
    try:
        return _SCALARS.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:  # e.g. a timestamp 2001-13-45: ValueError
        raise ScenarioError(source, node.start_mark.line + 1, path or "<top>", f"bad scalar: {exc}") from None


_SCALARS = yaml.SafeLoader("")

# Bounds on what a scenario file may cost to read. The built-ins are under 2 KiB and 4 levels deep; a scenario
# has no use for aliases, and one alias of an alias... (a "billion laughs" bomb) expands exponentially when the
# node graph is turned into values: 9 levels of 9 filled 4 GB before this check existed.
MAX_SCENARIO_BYTES = 1024 * 1024
MAX_YAML_DEPTH = 64


class _Refused(Exception):
    def __init__(self, event: yaml.Event, problem: str) -> None:
        super().__init__(problem)
        self.line = event.start_mark.line + 1 if event.start_mark is not None else None
        self.problem = problem


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and nesting deeper than MAX_YAML_DEPTH while composing, before any value
    is built (PyYAML's composer recurses per level, so depth is also a stack bound)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(event, f"alias *{event.anchor} refused: scenario files may not use aliases")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(event, f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _compose(text: str, source: str) -> tuple[Any, dict[str, int]]:
    size = len(text.encode("utf-8"))
    if size > MAX_SCENARIO_BYTES:
        raise ScenarioError(
            source,
            None,
            "<file>",
            f"{size} bytes exceeds the scenario file limit of {MAX_SCENARIO_BYTES} bytes",
        )
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader checks the characters here already
        node = loader.get_single_node()
    except _Refused as exc:
        raise ScenarioError(source, exc.line, "<yaml>", f"not valid YAML: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ScenarioError(source, line, "<yaml>", f"not valid YAML: {exc.problem}") from exc
    except yaml.YAMLError as exc:  # the reader's errors (a control character) carry no problem_mark
        raise ScenarioError(source, None, "<yaml>", f"not valid YAML: {exc}") from exc
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        raise ScenarioError(
            source, 1, "<top>", "the file is empty; expected a mapping with keys name, topics, ..."
        )
    lines: dict[str, int] = {}
    return _to_plain(node, "", lines, source), lines


# --------------------------------------------------------------------------------------------------------------
# Validation


class _Checker:
    def __init__(self, source: str, lines: Mapping[str, int]) -> None:
        self.source = source
        self.lines = lines

    def fail(self, path: str, problem: str) -> ScenarioError:
        probe = path
        while probe and probe not in self.lines:  # a missing key: report the line of its parent
            probe = probe.rpartition(".")[0] if "." in probe else ""
        return ScenarioError(
            self.source, self.lines.get(probe or "", self.lines.get("")), path or "<top>", problem
        )

    def mapping(
        self, value: Any, path: str, required: Sequence[str], optional: Sequence[str]
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_describe(value)}")
        allowed = (*required, *optional)
        for key in value:
            if key not in allowed:
                raise self.fail(
                    _join(path, key), f"unknown key {key!r}; expected one of: {', '.join(allowed)}"
                )
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing required key {key!r}")
        return value

    def integer(self, value: Any, path: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer in [{lo}, {hi}], got {_describe(value)}")
        if not lo <= value <= hi:
            raise self.fail(path, f"expected an integer in [{lo}, {hi}], got {value}")
        return value

    def number(self, value: Any, path: str, lo: float, hi: float, *, open_lo: bool = False) -> float:
        bound = f"({lo}, {hi}]" if open_lo else f"[{lo}, {hi}]"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"expected a number in {bound}, got {_describe(value)}")
        ok = (lo < value if open_lo else lo <= value) and value <= hi
        if not ok:
            raise self.fail(path, f"expected a number in {bound}, got {value}")
        return float(value)

    def name(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not _NAME_RE.match(value):
            raise self.fail(
                path, f"expected a name of 1-249 characters [A-Za-z0-9._-], got {_describe(value)}"
            )
        return value

    def choice(self, value: Any, path: str, choices: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in choices:
            raise self.fail(path, f"expected one of: {', '.join(choices)}; got {_describe(value)}")
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return f"{type(value).__name__} {value!r}"


_TOP_REQUIRED = ("name", "duration_s", "topics", "producer", "protocols")
_TOP_OPTIONAL = ("seed", "session_timeout_ms", "churn", "description", "group")


def parse_scenario(text: str, source: str = "<string>") -> Scenario:
    """Parse and validate scenario YAML; raise ScenarioError naming `source`:line, the key path and the problem."""
    raw, lines = _compose(text, source)
    c = _Checker(source, lines)
    top = c.mapping(raw, "", _TOP_REQUIRED, _TOP_OPTIONAL)
    name = c.name(top["name"], "name")
    if "description" in top and not isinstance(top["description"], str):
        raise c.fail("description", f"expected text, got {_describe(top['description'])}")
    seed = c.integer(top.get("seed", 0), "seed", 0, 2**63 - 1) if "seed" in top else 0
    duration_s = c.number(top["duration_s"], "duration_s", 0.0, 86_400.0, open_lo=True)
    session_timeout_ms = (
        c.integer(top["session_timeout_ms"], "session_timeout_ms", 1, 3_600_000)
        if "session_timeout_ms" in top
        else 6000
    )

    modes = [m.value for m in GroupMode]
    mode = GroupMode(c.choice(top["group"], "group", modes)) if "group" in top else GroupMode.PER_PROTOCOL
    shared = mode is GroupMode.SHARED

    if not isinstance(top["topics"], list) or not top["topics"]:
        raise c.fail("topics", f"expected a non-empty list of topics, got {_describe(top['topics'])}")
    topics: list[Topic] = []
    for i, item in enumerate(top["topics"]):
        path = f"topics[{i}]"
        t = c.mapping(item, path, ("name", "partitions"), ())
        tname = c.name(t["name"], f"{path}.name")
        if any(x.name == tname for x in topics):
            raise c.fail(f"{path}.name", f"topic {tname!r} is listed twice")
        topics.append(Topic(tname, c.integer(t["partitions"], f"{path}.partitions", 1, MAX_PARTITIONS)))

    p = c.mapping(top["producer"], "producer", ("rate_per_s", "duration_s"), ())
    producer = Producer(
        rate_per_s=c.number(p["rate_per_s"], "producer.rate_per_s", 0.0, 1_000_000.0, open_lo=True),
        duration_s=c.number(p["duration_s"], "producer.duration_s", 0.0, duration_s, open_lo=True),
    )

    protos_raw = top["protocols"]
    if not isinstance(protos_raw, dict) or not protos_raw:
        raise c.fail(
            "protocols",
            f"expected a mapping of protocol name -> {{members, strategy}} with at least one of: "
            f"{', '.join(PROTOCOLS)}; got {_describe(protos_raw)}",
        )
    protocols: list[ProtocolRun] = []
    for pname in protos_raw:
        path = f"protocols.{pname}"
        if pname not in PROTOCOLS:
            raise c.fail(path, f"unknown protocol {pname!r}; expected one of: {', '.join(PROTOCOLS)}")
        body = c.mapping(protos_raw[pname], path, ("members", "strategy"), ())
        # A shared group may list a protocol with no member at the start: its members come by replace or join.
        members = c.integer(body["members"], f"{path}.members", 0 if shared else 1, MAX_MEMBERS)
        family = PROTOCOLS[pname]
        if shared and family is Family.CONSUMER:
            raise c.fail(
                path,
                "a shared group is bridged for legacy and classic members only, not consumer-protocol ones",
            )
        strategy = body["strategy"]
        allowed = strategies_for(pname)
        if not isinstance(strategy, str) or strategy not in allowed:
            whose = (
                f"{pname}'s strategy"
                if pname in COOPERATIVE_PROTOCOLS
                else f"the {family.value} protocol's strategies"
            )
            raise c.fail(
                f"{path}.strategy",
                f"expected one of: {', '.join(allowed)} ({whose}); got {_describe(strategy)}",
            )
        protocols.append(ProtocolRun(pname, members, strategy))
        if not shared or pname in COOPERATIVE_PROTOCOLS:
            continue  # a cooperative member of a shared group is answered the legacy members' algorithm
        if strategy not in SHARED_STRATEGIES:
            raise c.fail(
                f"{path}.strategy",
                f"a shared group follows the legacy assignor: expected one of: {', '.join(SHARED_STRATEGIES)}; "
                f"got {_describe(strategy)}",
            )
        first = next(p for p in protocols if p.protocol not in COOPERATIVE_PROTOCOLS)
        if strategy != first.strategy:
            raise c.fail(
                f"{path}.strategy",
                f"every protocol of a shared group uses one strategy (the group's): "
                f"protocols.{first.protocol} has {first.strategy!r}, this one {strategy!r}",
            )
    if shared and not any(p.members for p in protocols):
        raise c.fail("protocols", "a shared group needs at least one member at the start")

    churn = _parse_churn(c, top.get("churn", []), duration_s, topics, protocols, shared)
    return Scenario(
        name=name,
        seed=seed,
        duration_s=duration_s,
        session_timeout_ms=session_timeout_ms,
        topics=tuple(topics),
        producer=producer,
        protocols=tuple(protocols),
        churn=churn,
        source=source,
        group=mode,
    )


def _parse_churn(
    c: _Checker,
    raw: Any,
    duration_s: float,
    topics: Sequence[Topic],
    protocols: Sequence[ProtocolRun],
    shared: bool = False,
) -> tuple[ChurnEvent, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise c.fail("churn", f"expected a list of events, got {_describe(raw)}")
    partitions = {t.name: t.partitions for t in topics}
    # Member indexes must be valid in every protocol's run, so track the smallest live count. A shared group is one
    # run: its members are tracked slot by slot (the protocol of each), or None once a random removal hid which.
    live = sum(p.members for p in protocols) if shared else min(p.members for p in protocols)
    slots: list[str] | None = [p.protocol for p in protocols for _ in range(p.members)] if shared else None
    listed = [p.protocol for p in protocols]
    kinds = [k.value for k in ChurnKind]
    events: list[ChurnEvent] = []
    last_at = 0.0
    for i, item in enumerate(raw):
        path = f"churn[{i}]"
        if not isinstance(item, dict):
            raise c.fail(path, f"expected a mapping with keys at_s and event, got {_describe(item)}")
        if "event" not in item:
            raise c.fail(path, f"missing required key 'event' (one of: {', '.join(kinds)})")
        kind = ChurnKind(c.choice(item["event"], f"{path}.event", kinds))
        fields = _CHURN_FIELDS[kind]
        body = c.mapping(
            item,
            path,
            ("at_s", "event", *(f for f, req in fields.items() if req)),
            tuple(f for f, req in fields.items() if not req),
        )
        if kind is ChurnKind.REPLACE and not shared:
            raise c.fail(
                f"{path}.event",
                "replace needs `group: shared` (the replaced member and its successor in one group)",
            )
        at_s = c.number(body["at_s"], f"{path}.at_s", 0.0, duration_s)
        if at_s < last_at:
            raise c.fail(f"{path}.at_s", f"events must be in time order; {at_s} comes after {last_at}")
        last_at = at_s
        member: int | None = None
        if "member" in fields:
            if body["member"] == "random" and kind is ChurnKind.REPLACE:
                raise c.fail(
                    f"{path}.member",
                    "replace needs a member index, not 'random' (the slot decides which protocol is replaced)",
                )
            if body["member"] == "random":
                member = None
            else:
                if live < 1:
                    raise c.fail(path, "no member is left to target at this point of the schedule")
                value = body["member"]
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < live:
                    raise c.fail(
                        f"{path}.member",
                        f"expected 'random' or a live member index in [0, {live - 1}] (members in join order, "
                        f"counting joins and removals so far in the smallest protocol run); got {_describe(value)}",
                    )
                member = value
        count = c.integer(body.get("count", 1), f"{path}.count", 1, MAX_MEMBERS) if "count" in body else 1
        duration = (
            c.number(body["duration_s"], f"{path}.duration_s", 0.0, 3600.0, open_lo=True)
            if "duration_s" in body
            else 0.0
        )
        topic: str | None = None
        new_partitions = 0
        if kind is ChurnKind.PARTITION_INCREASE:
            topic = c.choice(body["topic"], f"{path}.topic", sorted(partitions))
            current = partitions[topic]
            new_partitions = c.integer(body["partitions"], f"{path}.partitions", current + 1, MAX_PARTITIONS)
            partitions[topic] = new_partitions
        protocol: str | None = None
        if "protocol" in body:
            if not shared:
                raise c.fail(f"{path}.protocol", "a join names a protocol only in a `group: shared` scenario")
            value = body["protocol"]
            if not isinstance(value, str) or value not in PROTOCOLS:
                raise c.fail(
                    f"{path}.protocol",
                    f"unknown protocol {_describe(value)}; expected one of: {', '.join(PROTOCOLS)}",
                )
            if value not in listed:
                raise c.fail(
                    f"{path}.protocol",
                    f"protocol {value!r} is not under `protocols` (its strategy comes from there); listed: "
                    f"{', '.join(listed)}",
                )
            protocol = value
        if kind is ChurnKind.REPLACE:
            assert member is not None and protocol is not None
            if slots is None:
                raise c.fail(
                    path,
                    "the protocol of each member is unknown after a removal of a 'random' member: name the "
                    "member of earlier leave/crash events to replace one later",
                )
            if slots[member] == protocol:
                raise c.fail(
                    f"{path}.protocol",
                    f"member {member} already speaks {protocol}; replace needs a member of another protocol",
                )
            slots[member] = protocol
        if kind is ChurnKind.JOIN:
            live += count
            if slots is not None:
                slots += [protocol or protocols[0].protocol] * count
        elif kind in _REMOVES_MEMBER:
            if live < 1:
                raise c.fail(path, "no member is left to remove at this point of the schedule")
            live -= 1
            if slots is not None:
                if member is None:
                    slots = None
                else:
                    del slots[member]
        events.append(ChurnEvent(at_s, kind, member, count, duration, topic, new_partitions, protocol))
    return tuple(events)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)  # never more than the limit + 1 into memory
    except OSError as exc:
        raise ScenarioError(str(p), None, "<file>", f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError(
            str(p), None, "<file>", f"larger than the scenario file limit of {MAX_SCENARIO_BYTES} bytes"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            str(p), None, "<file>", f"not UTF-8 text: {exc.reason} at byte {exc.start}"
        ) from None
    return parse_scenario(text, str(p))


BUILTIN = ("demo", "mixed", "rolling-migration", "rolling-migration-cooperative")


def builtin_scenario(name: str = "demo") -> Scenario:
    """A scenario shipped with zkcoord (package data under migration/compare/scenarios/)."""
    if name not in BUILTIN:
        raise ScenarioError(
            f"<builtin {name}>", None, "<name>", f"no such built-in scenario; have: {', '.join(BUILTIN)}"
        )
    text = (
        resources.files("migration.compare")
        .joinpath("scenarios")
        .joinpath(f"{name}.yaml")
        .read_text(encoding="utf-8")
    )
    return parse_scenario(text, f"<builtin {name}.yaml>")


def resolve_scenario(spec: str) -> Scenario:
    """A path to a YAML file, or the name of a built-in scenario."""
    if spec in BUILTIN and not Path(spec).exists():
        return builtin_scenario(spec)
    return load_scenario(spec)
