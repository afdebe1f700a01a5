"""The pure decisions of mixed groups (legacy ZooKeeper members and broker-protocol members in one group): how a
broker-protocol member is named and registered in the legacy tree, which assignment the whole group follows, which
owner znodes a hand-over deletes and creates, and which groups are refused. No I/O, no clock: deterministic.

Hostile data: every registration read from `/consumers/G/ids` goes through `parse_registration`, which takes any
bytes (bounded: `MAX_REGISTRATION_BYTES`, nesting `MAX_JSON_DEPTH`) and turns any failure into a `Malformed` item
naming the znode; a malformed registration is left out of the group's computation (the other members go on), and
stream counts are bounded by the partition count (`bounded_counts`), which changes no member's share.

Guarantees: a broker-protocol member's consumer id is a function of its group and classic member id (a legal znode
name, so the same member is always the same legacy consumer); the assignment is exactly what every 0.8-era member
computes from `/consumers/G/ids` (zkcoord.legacy.assignment over the combined, Java-sorted thread ids), so both
sides agree without talking; a hand-over plan never acquires a partition whose owner znode another thread holds.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from zkcoord.errors import ConfigError, MalformedZnode
from zkcoord.legacy.assignment import assign
from zkcoord.legacy.codecs import ConsumerRegistration, Escaped, JsonValue, encode_json, json_escape_string
from zkcoord.legacy.ids import consumer_of_thread, is_classic_id, java_sorted, thread_id, utf16_key
from zkcoord.topic_partition import TopicPartition

LEGACY: Final = "legacy"
CLASSIC: Final = "classic"
# The member kinds of a broker-protocol member's registration (the marker's `group_protocol`, the client's
# `group.protocol`): a classic member (JoinGroup/SyncGroup) or a consumer-protocol member (KIP-848). A
# registration without it was written by a zkcoord before the key (its kind is unknown).
CONSUMER_KIND: Final = "consumer"
KINDS: Final = (CLASSIC, CONSUMER_KIND)
# The classic protocol names whose algorithm the legacy tree also knows.
LEGACY_STRATEGIES: Final = ("range", "roundrobin")
# KIP-429 protocols a bridged group hosts: the coordinator decides the shares with the legacy algorithm anyway,
# and these members keep what stays and revoke only what moves (the coordinator withholds a partition another
# member still owns). Any other ConsumerProtocol name is hosted as eager (`check_protocols`). Each member is
# answered in a name of its own and treated by it (zkcoord.server.mixed_decisions, which repeats this tuple: the
# server does not import the bridge).
COOPERATIVE_PROTOCOLS: Final = ("cooperative-sticky",)
CONSUMER_PROTOCOL_TYPE: Final = "consumer"
MARKER_KEY: Final = "zkcoord"
# A registration is a few hundred bytes; ZooKeeper's own limit (jute.maxbuffer) is 1 MiB. Nesting: the 0.8 format
# is two levels deep, zkcoord's marker three.
MAX_REGISTRATION_BYTES: Final = 1 << 20
MAX_JSON_DEPTH: Final = 16
# A registration's list of offered protocol names is written only while its JSON stays this small (real members
# offer one to three short assignor names); a longer list is left out and reads back as unknown.
MAX_PROTOCOLS_JSON: Final = 4096
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


@dataclass(frozen=True, slots=True)
class Malformed:
    """A znode whose data cannot be used: its path and why (what the log and the operator see)."""

    path: str
    reason: str


def json_too_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests deeper than `limit` (brackets inside strings do not count). Linear, no recursion."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    for b in brackets:
        depth += 1 if b in b"[{" else -1
        if depth > limit:
            return True
    return False


def _bounded_json(path: str, data: bytes | None) -> None:
    if data is not None and len(data) > MAX_REGISTRATION_BYTES:
        raise MalformedZnode(
            path, f"{len(data)} bytes, more than {MAX_REGISTRATION_BYTES} a registration may have"
        )
    if data and json_too_deep(data):
        raise MalformedZnode(path, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def parse_registration(path: str, data: bytes | None) -> ConsumerRegistration | Malformed:
    """A legacy member's registration, or `Malformed` for anything else: any bytes, any exception."""
    try:
        _bounded_json(path, data)
        return ConsumerRegistration.decode(path, data)
    except MalformedZnode as exc:
        return Malformed(path, exc.reason)
    except Exception as exc:  # whatever the decoder hit, this one item is malformed
        return Malformed(path, f"{type(exc).__name__}: {exc}")


def legacy_registrations(
    group: str, ids: Mapping[str, bytes | None], id_path: Callable[[str, str], str]
) -> tuple[dict[str, ConsumerRegistration], tuple[Malformed, ...]]:
    """The legacy members' registrations among `ids` (classic ones, carrying the zkcoord marker, left out) and
    the registrations that could not be read, which the group's computation leaves out too."""
    legacy: dict[str, ConsumerRegistration] = {}
    bad: list[Malformed] = []
    for cid, data in ids.items():
        if classic_marker(data) is not None:
            continue
        parsed = parse_registration(id_path(group, cid), data)
        if isinstance(parsed, Malformed):
            bad.append(parsed)
        else:
            legacy[cid] = parsed
    return legacy, tuple(bad)


def bounded_counts(
    topic_counts: Mapping[str, int], partitions: Mapping[str, Sequence[int]]
) -> dict[str, int]:
    """A member's stream counts capped at the number of partitions of the topics it subscribes to: a registration
    claiming 2^31-1 streams would otherwise be expanded into as many thread ids. Nobody's share changes: with
    identical subscriptions (which a bridged group requires), threads past the partition count get nothing
    under range and round-robin alike, and a consumer's capped threads are the first ones it sorts."""
    total = max(1, sum(len(partitions.get(t, ())) for t in topic_counts))
    return {t: min(n, total) for t, n in topic_counts.items()}


class MixedGroupRefused(ConfigError):
    """The group cannot be bridged as it is (strategy or subscriptions disagree); nothing was changed."""

    code = 23  # INCONSISTENT_GROUP_PROTOCOL: what the refused classic member is answered


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member of a (possibly mixed) group as the legacy tree shows it: protocol `legacy` or `classic`."""

    consumer_id: str
    protocol: str
    owned: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """What the bridge needs of one broker-protocol member: its id, client id and subscribed topics."""

    member_id: str
    client_id: str
    topics: tuple[str, ...]
    # KIP-429 members: the partitions the member says (in its JoinGroup) it still owns; eager members own none.
    owned: tuple[TopicPartition, ...] = ()
    kind: str = CLASSIC  # one of KINDS: written into its registration's marker
    # The protocol (assignor) names its JoinGroup offered, in its order, all of them (also those a bridged group
    # does not host): what the cluster's coordinator would see after a hand-off (`offered_protocols`). Empty when
    # not known (a consumer-protocol member has none).
    protocols: tuple[str, ...] = ()


def consumer_id_for(group: str, member_id: str, taken: Iterable[str] = ()) -> str:
    """The legacy consumer id of a new classic member: `<group>_classic-<8 hex: join sequence><8 hex of
    sha256(member id)>`, the sequence one more than the highest among `taken` (the group's classic ids already
    registered; 0 when none). A legal znode name whatever the member id holds; it sorts among legacy ids
    (`<group>_<host>-...`) like any other, and after every classic member registered before it, so a join does
    not shift the ranges of the classic members already there (with hashed ids a newcomer sorting first moved
    every classic member's partitions, each such move costing a KIP-429 member two rebalances). The id is
    chosen once, at registration; the bridge keeps it for the member's life (and reads it back from its ids
    znode's marker when it adopts the group).

    >>> consumer_id_for("g", "m") < consumer_id_for("g", "a", [consumer_id_for("g", "m")])
    True
    """
    sequence = 0
    for cid in taken:
        if is_classic_id(group, cid):
            sequence = max(sequence, int(cid[-16:-8], 16) + 1)
    sequence = min(sequence, 0xFFFFFFFF)  # 4 billion joins later, ties are ordered by the hash
    return f"{group}_classic-{sequence:08x}{hashlib.sha256(member_id.encode()).hexdigest()[:8]}"


def thread_for(consumer_id: str) -> str:
    """A classic member has one stream per topic: its only thread id is `<consumer id>-0`."""
    return thread_id(consumer_id, 0)


def encode_classic_registration(member: ClassicMember, timestamp_ms: int) -> bytes:
    """The ids znode of a classic member: the 0.8 static registration (`{T: 1}` per topic) plus one key
    `"zkcoord":{"protocol":"classic","group_protocol":<kind>,"member_id":...,"client_id":...}`, which 0.8's
    `TopicCount` ignores (it reads only `pattern` and `subscription`; so does zkcoord's `ConsumerRegistration`).
    `protocol` says "a broker-protocol member" to every zkcoord reader; `group_protocol` which kind (KINDS), so
    a coordinator restoring the group after a load tells its consumer-protocol members from classic ones;
    `"protocols":[...]` (when known and under MAX_PROTOCOLS_JSON) the names its JoinGroup offered, in its order,
    which `migrate handoff` checks against the cluster's one-protocol rule (`offered_protocols`)."""
    base = ConsumerRegistration.static({t: 1 for t in member.topics}, timestamp_ms=timestamp_ms)
    text = base.encode().decode()
    fields: dict[str, JsonValue] = {
        "protocol": CLASSIC,
        "group_protocol": member.kind,
        "member_id": Escaped(json_escape_string(member.member_id)),
        "client_id": Escaped(json_escape_string(member.client_id)),
    }
    names = [Escaped(json_escape_string(n)) for n in member.protocols]
    if names and len(encode_json(names)) <= MAX_PROTOCOLS_JSON:
        fields["protocols"] = names
    marker = encode_json(fields)
    return f'{text[:-1]},"{MARKER_KEY}":{marker}}}'.encode()


def classic_marker(data: bytes | None) -> dict[str, str] | None:
    """The `zkcoord` key of an ids znode, or None for a legacy member's registration (or unreadable data)."""
    try:
        _bounded_json("", data)
        obj = json.loads(data or b"")
    except Exception:  # any bytes: unreadable is "not ours", and the legacy parser then names the problem
        return None
    marker = obj.get(MARKER_KEY) if isinstance(obj, dict) else None
    if not isinstance(marker, dict) or marker.get("protocol") != CLASSIC:
        return None
    return {str(k): str(v) for k, v in marker.items()}


def offered_protocols(data: bytes | None) -> tuple[str, ...] | None:
    """The protocol names a classic member's registration says its JoinGroup offered, in its order; None when it
    says nothing usable (a legacy member's registration, one written by a zkcoord before the key, or a value that
    is not a list of strings: unknown, never guessed).

    >>> offered_protocols(encode_classic_registration(ClassicMember("m", "c", ("t",), protocols=("range",)), 1))
    ('range',)
    >>> offered_protocols(encode_classic_registration(ClassicMember("m", "c", ("t",)), 1)) is None
    True
    """
    if classic_marker(data) is None:
        return None
    names = json.loads(data or b"")[MARKER_KEY].get("protocols")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return None
    return tuple(names)


def registered_kind(marker: Mapping[str, str] | None) -> str | None:
    """The member kind a `classic_marker` names (one of KINDS); None when it names none we know (a registration
    by an older zkcoord, or no marker).

    >>> registered_kind({"protocol": "classic", "group_protocol": "consumer"}), registered_kind({"protocol": "classic"})
    ('consumer', None)
    """
    kind = (marker or {}).get("group_protocol")
    return kind if kind in KINDS else None


def member_views(ids: Mapping[str, bytes | None], owners: Mapping[TopicPartition, str]) -> list[MemberView]:
    """Members (Java order of consumer ids) with their protocol and owned partitions; owners whose consumer is
    not registered (a member mid-exit, or a stale znode) are listed as members of protocol `legacy` too, so
    nothing owned is hidden."""
    owned: dict[str, list[TopicPartition]] = {}
    for tp, thread in owners.items():
        owned.setdefault(consumer_of_thread(thread) if "-" in thread else thread, []).append(tp)
    views = []
    for cid in java_sorted(set(ids) | set(owned)):
        protocol = CLASSIC if classic_marker(ids.get(cid)) is not None else LEGACY
        tps = tuple(sorted(owned.get(cid, ()), key=lambda tp: (utf16_key(tp.topic), tp.partition)))
        views.append(MemberView(cid, protocol, tps))
    return views


def check_protocols(protocol_type: str, protocols: Iterable[tuple[str, bytes]]) -> tuple[str, ...]:
    """The offered protocols a bridged group may use, by name: range and roundrobin first (the legacy algorithms),
    then any other ConsumerProtocol assignor name (kafkajs `RoundRobinAssigner`, Java's eager `sticky`, ...), then
    cooperative-sticky (KIP-429), each in the member's order. The name does not choose the algorithm: the
    coordinator computes every broker-protocol member's share with the legacy members' one and sends it as
    ConsumerProtocolAssignment bytes, which every client reads, so members of different names share a group
    (each is answered in its own: zkcoord.server.mixed_decisions.answered_name). Raises MixedGroupRefused, saying why, when none
    is left: a protocol type other than "consumer", metadata that is not a ConsumerProtocolSubscription, or an
    unknown name whose subscription lists owned partitions (a cooperative assignor other than
    cooperative-sticky: treated as eager, it would lose partitions it still consumes)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise MixedGroupRefused(
            f"a bridged group hosts consumers only (protocol type {CONSUMER_PROTOCOL_TYPE!r}); the member's "
            f"protocol type is {protocol_type!r}"
        )
    offered = list(protocols)
    known: list[str] = []
    other: list[str] = []
    cooperative: list[str] = []
    why: list[str] = []
    for name, metadata in offered:
        owned = decode_owned_partitions(metadata)
        if owned is None:
            why.append(
                f"{name!r}: its metadata ({len(metadata)} bytes) is not a ConsumerProtocolSubscription"
            )
        elif name in LEGACY_STRATEGIES:
            known.append(name)
        elif name in COOPERATIVE_PROTOCOLS:
            cooperative.append(name)
        elif owned:
            why.append(
                f"{name!r}: its subscription lists {len(owned)} owned partitions, as only a cooperative (KIP-429) "
                f"member's does, and a bridged group knows no cooperative assignor but "
                f"{', '.join(COOPERATIVE_PROTOCOLS)}"
            )
        else:
            other.append(name)
    usable = tuple(known + other + cooperative)
    if not usable:
        detail = "; ".join(why) if why else "it offers no protocol"
        raise MixedGroupRefused(f"no protocol of the member can join a bridged group: {detail}")
    return usable


def legacy_strategy(
    protocol: str,
    legacy: Mapping[str, ConsumerRegistration],
    partitions: Mapping[str, Sequence[int]],
    owners: Mapping[TopicPartition, str],
) -> str:
    """The legacy algorithm a bridged group follows: the protocol itself when it is range or roundrobin; for a
    cooperative protocol the legacy members' (roundrobin only when their complete owner znodes match roundrobin
    and not range), else range, the 0.8 default `partition.assignment.strategy`."""
    if protocol in LEGACY_STRATEGIES:
        return protocol
    try:
        check_strategy("range", legacy, partitions, owners)
    except MixedGroupRefused:
        return "roundrobin"
    return "range"


def check_subscriptions(
    legacy: Mapping[str, ConsumerRegistration], classic: Sequence[ClassicMember], strategy: str
) -> None:
    """Refuse a group whose members subscribe to different topic sets, or whose legacy members use wildcards
    (their topics are resolved by each member against /brokers/topics, which the bridge does not mirror)."""
    sets: dict[tuple[str, ...], list[str]] = {}
    for cid, reg in legacy.items():
        if reg.is_wildcard:
            raise MixedGroupRefused(
                f"legacy member {cid} uses a wildcard subscription; only static ones bridge"
            )
        sets.setdefault(tuple(sorted(t for t, _ in reg.subscription)), []).append(cid)
    for m in classic:
        sets.setdefault(tuple(sorted(m.topics)), []).append(m.member_id)
    if len(sets) > 1:
        detail = "; ".join(f"{list(k)}: {', '.join(v)}" for k, v in sorted(sets.items()))
        raise MixedGroupRefused(
            f"members of a bridged group must subscribe to the same topics ({strategy}): {detail}"
        )


def check_strategy(
    strategy: str,
    legacy: Mapping[str, ConsumerRegistration],
    partitions: Mapping[str, Sequence[int]],
    owners: Mapping[TopicPartition, str],
) -> None:
    """Refuse when the legacy members evidently use the other algorithm: their current, complete ownership
    (every partition owned, only legacy owners) matches the other strategy's decision and not `strategy`'s. An
    incomplete picture (mid-rebalance) proves nothing and passes."""
    topic_counts = {
        cid: bounded_counts(reg.topic_counts, partitions)
        for cid, reg in legacy.items()
        if not reg.is_wildcard
    }
    expected = {
        TopicPartition(t, p)
        for t in {t for c in topic_counts.values() for t in c}
        for p in partitions.get(t, ())
    }
    if not topic_counts or set(owners) != expected:
        return
    decisions = {s: assign(s, topic_counts, partitions) for s in LEGACY_STRATEGIES}
    if decisions[strategy] == dict(owners):
        return
    others = [s for s in LEGACY_STRATEGIES if s != strategy and decisions[s] == dict(owners)]
    if others:
        raise MixedGroupRefused(
            f"the legacy members assign with {others[0]} (their owner znodes match it), the broker-protocol "
            f"members chose {strategy}: configure both sides with one partition.assignment.strategy"
        )


def plan_assignment(
    strategy: str,
    legacy: Mapping[str, ConsumerRegistration],
    classic: Sequence[ClassicMember],
    group: str,
    partitions: Mapping[str, Sequence[int]],
    ids: Mapping[str, str] | None = None,
    current: Mapping[TopicPartition, str] | None = None,
) -> dict[str, tuple[TopicPartition, ...]]:
    """Classic member id -> its partitions under the legacy algorithm over the combined member list (legacy
    consumers with their stream counts, each classic member as one stream per topic). `ids`: member id ->
    its registered consumer id (`consumer_id_for(group, member id)` for a member missing there). `current`:
    partition -> the member id that holds it and says it still owns it (KIP-429 members); the classic
    members' part is then spread stickily among them (`sticky_spread`), which no legacy member can tell."""
    consumers: dict[str, Mapping[str, int]] = {
        cid: bounded_counts(reg.topic_counts, partitions) for cid, reg in legacy.items()
    }
    by_consumer = {}
    for m in classic:
        cid = (ids or {}).get(m.member_id) or consumer_id_for(group, m.member_id)
        consumers[cid] = {t: 1 for t in m.topics}
        by_consumer[thread_for(cid)] = m.member_id
    decision = assign(strategy, consumers, partitions)
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in classic}
    for tp, thread in decision.items():
        member_id = by_consumer.get(thread)
        if member_id is not None:
            out[member_id].append(TopicPartition(*tp))
    if current:
        return sticky_spread({mid: tuple(tps) for mid, tps in out.items()}, current)
    return {mid: tuple(tps) for mid, tps in out.items()}


# How far apart two classic members' partition counts may be (Kafka's sticky assignors: 1). Two would spare a
# move between KIP-429 members now and then, but leave a newcomer with nothing when the part has no more
# partitions than members (6 over 4: 2 2 2 0).
STICKY_SPREAD: Final = 1


def sticky_spread(
    decision: Mapping[str, Sequence[TopicPartition]], current: Mapping[TopicPartition, str]
) -> dict[str, tuple[TopicPartition, ...]]:
    """The classic members' part of the legacy decision (`decision`: member id -> its partitions) spread among
    the same members so that a partition stays with the member in `current` that holds it (partition -> member
    id). Legacy members compute only their own share and wait on owner znodes whoever holds them, so which
    classic member holds which partition of the classic part is the coordinator's choice alone: the part is
    the same set, only its split changes. Rules: no member gets more than the part's fair ceiling (so a
    newcomer to an all-classic part still gets its share at once); a kept partition stays, the others go to
    the algorithm's member while it is under the ceiling, else to the least loaded; then while two counts are
    more than `STICKY_SPREAD` apart, the most loaded gives one to the least loaded. Without `current` (eager
    members, a first assignment) the result is `decision` itself.

    >>> tp = [TopicPartition("t", p) for p in range(4)]
    >>> sticky_spread({"a": tp[:2], "b": tp[2:]}, {tp[2]: "a"})
    {'a': (TopicPartition(topic='t', partition=0), TopicPartition(topic='t', partition=2)), 'b': (TopicPartition(topic='t', partition=1), TopicPartition(topic='t', partition=3))}
    """
    members = list(decision)
    if not current:
        return {mid: tuple(tps) for mid, tps in decision.items()}
    chosen = {tp: mid for mid, tps in decision.items() for tp in tps}
    ceiling = -(-len(chosen) // len(members))
    out: dict[str, list[TopicPartition]] = {mid: [] for mid in members}
    # Kept first: what the algorithm also gives the holder, then the rest, in partition order.
    kept = sorted(
        (tp for tp in chosen if current.get(tp) in out),
        key=lambda tp: (chosen[tp] != current[tp], utf16_key(tp.topic), tp.partition),
    )
    for tp in kept:
        holder = current[tp]
        if len(out[holder]) < ceiling:
            out[holder].append(tp)
    placed = {tp for tps in out.values() for tp in tps}
    for tp in sorted(set(chosen) - placed, key=lambda tp: (utf16_key(tp.topic), tp.partition)):
        mid = chosen[tp]
        if len(out[mid]) >= ceiling:
            mid = min(members, key=lambda m: len(out[m]))
        out[mid].append(tp)
    for _ in range(len(chosen)):  # bounded: each move narrows the spread
        least = min(members, key=lambda m: len(out[m]))
        top = max(len(v) for v in out.values())
        if top - len(out[least]) <= STICKY_SPREAD:
            break
        # One of a most loaded member's: preferably one it does not still own (an owned one is withheld until
        # revoked), then one the algorithm gives the receiver.
        candidates = [
            ((current.get(tp) == m, chosen[tp] != least, n), m, tp)
            for n, m in enumerate(members)
            if len(out[m]) == top
            for tp in out[m]
        ]
        _, donor, give = min(candidates, key=lambda c: c[0])
        out[donor].remove(give)
        out[least].append(give)
    return {
        mid: tuple(sorted(tps, key=lambda tp: (utf16_key(tp.topic), tp.partition)))
        for mid, tps in out.items()
    }


@dataclass(frozen=True, slots=True)
class HandOver:
    """Owner znodes to delete (held for a classic member that no longer gets them) and to create; `withheld`:
    targets whose owner znode a cooperative member still owns (it revokes them once it is answered without
    them, rejoins, and a follow-up rebalance hands them over)."""

    release: tuple[TopicPartition, ...]
    acquire: tuple[tuple[TopicPartition, str], ...]  # (partition, thread id)
    withheld: tuple[tuple[TopicPartition, str], ...] = ()  # (partition, thread id it goes to later)


def plan_hand_over(
    target: Mapping[TopicPartition, str],
    held: Mapping[TopicPartition, str],
    classic_threads: Iterable[str],
    still_owned: Mapping[TopicPartition, str] | None = None,
) -> HandOver:
    """`target`: partition -> classic thread that should hold it now; `held`: partition -> thread holding its
    owner znode; `classic_threads`: every thread the bridge answers for; `still_owned`: partition -> thread of a
    cooperative member that says it still owns it. Release what a classic thread holds but is not its target,
    unless that thread still owns it (a cooperative member consumes it until it revokes); acquire the targets not
    yet held by their thread (a partition another thread holds is acquired once that holder is gone: the caller
    waits on the deletion), except those a cooperative thread still owns, which are withheld.

    >>> tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    >>> plan = plan_hand_over({tp0: "a-0", tp1: "b-0"}, {tp0: "a-0", tp1: "a-0"}, ["a-0", "b-0"], {tp0: "a-0", tp1: "a-0"})
    >>> plan.release, plan.acquire, plan.withheld
    ((), (), ((TopicPartition(topic='t', partition=1), 'b-0'),))
    """
    ours = set(classic_threads)
    owning = {tp: th for tp, th in (still_owned or {}).items() if held.get(tp) == th}
    release = tuple(
        sorted(tp for tp, th in held.items() if th in ours and target.get(tp) != th and tp not in owning)
    )
    acquire = tuple(sorted((tp, th) for tp, th in target.items() if held.get(tp) != th and tp not in owning))
    withheld = tuple(sorted((tp, th) for tp, th in target.items() if tp in owning and owning[tp] != th))
    return HandOver(release, acquire, withheld)


def decode_owned_partitions(data: bytes) -> tuple[TopicPartition, ...] | None:
    """The owned partitions of a ConsumerProtocolSubscription (KIP-429: v1 and later; () for v0), or None when
    the bytes are malformed. Every count is checked against the bytes left before anything is built."""
    try:
        pos = 0
        (version,) = _I16.unpack_from(data, pos)
        pos += 2
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0 or count * 2 > len(data) - pos:
            return None
        for _ in range(count):  # topics
            (n,) = _I16.unpack_from(data, pos)
            if n < 0 or pos + 2 + n > len(data):
                return None
            pos += 2 + n
        (user_data,) = _I32.unpack_from(data, pos)  # nullable bytes
        pos += 4 + max(user_data, 0)
        if user_data < -1 or pos > len(data):
            return None
        if version < 1:
            return ()
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0 or count * 6 > len(data) - pos:
            return None
        found: list[TopicPartition] = []
        for _ in range(count):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topic = data[pos : pos + n].decode()
            pos += n
            (k,) = _I32.unpack_from(data, pos)
            pos += 4
            if k < 0 or k * 4 > len(data) - pos:
                return None
            for _ in range(k):
                found.append(TopicPartition(topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        return tuple(found)
    except (struct.error, UnicodeDecodeError):
        return None


# --- the embedded consumer protocol's assignment (ConsumerProtocolAssignment v0) -------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_assignment(tps: Iterable[TopicPartition]) -> bytes:
    """ConsumerProtocolAssignment v0 (what kafka-python and librdkafka read): topics with their partitions, no
    user data."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I16.pack(0) + _I32.pack(len(by_topic)))
    for topic in sorted(by_topic, key=utf16_key):
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(by_topic[topic]))
        for p in sorted(by_topic[topic]):
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ConsumerProtocolAssignment (any version; the prefix is shared); () if empty."""
    if len(data) < 6:
        return ()
    pos = 2
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    found = []
    for _ in range(count):
        (n,) = _I16.unpack_from(data, pos)
        pos += 2
        topic = data[pos : pos + n].decode()
        pos += n
        (k,) = _I32.unpack_from(data, pos)
        pos += 4
        for _ in range(k):
            found.append(TopicPartition(topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
    return tuple(found)
