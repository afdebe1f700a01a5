"""The pure decisions of mixed groups: naming, the registration a 0.8 reader parses, the combined assignment,
hand-over plans and refusals."""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.bridge.mixed_policy import (
    CLASSIC,
    CONSUMER_KIND,
    MAX_JSON_DEPTH,
    MAX_REGISTRATION_BYTES,
    STICKY_SPREAD,
    ClassicMember,
    HandOver,
    Malformed,
    MixedGroupRefused,
    bounded_counts,
    check_protocols,
    check_strategy,
    check_subscriptions,
    classic_marker,
    consumer_id_for,
    decode_assignment,
    decode_owned_partitions,
    encode_assignment,
    encode_classic_registration,
    is_classic_id,
    member_views,
    parse_registration,
    plan_assignment,
    plan_hand_over,
    registered_kind,
    sticky_spread,
    thread_for,
)
from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.assignment import assign
from zkcoord.legacy.codecs import ConsumerRegistration
from zkcoord.topic_partition import TopicPartition as TP
from zkcoord.zk.mixed_group import decode_fence


def _reg(topics: dict[str, int]) -> ConsumerRegistration:
    return ConsumerRegistration.static(topics, timestamp_ms=1)


def test_consumer_id_is_deterministic_and_a_legal_znode_name() -> None:
    cid = consumer_id_for("g", "weird/member id\u0000")
    assert cid == consumer_id_for("g", "weird/member id\u0000") != consumer_id_for("g", "other")
    assert paths.id_path("g", cid).endswith(cid) and "/" not in cid
    assert is_classic_id("g", cid) and not is_classic_id("g", "g_host-1-abcdef01")
    assert thread_for(cid) == f"{cid}-0"


def test_registration_is_the_0_8_one_plus_a_key_the_legacy_reader_ignores() -> None:
    data = encode_classic_registration(ClassicMember('m"1', "client/1", ("t", "u")), 1428512949385)
    text = data.decode()
    assert text.startswith(
        '{"version":1,"subscription":{"t":1,"u":1},"pattern":"static","timestamp":"1428512949385"'
    )
    decoded = ConsumerRegistration.decode("/consumers/g/ids/x", data)
    assert decoded.topic_counts == {"t": 1, "u": 1} and decoded.timestamp_ms == 1428512949385
    marker = {"protocol": "classic", "group_protocol": "classic", "member_id": 'm"1', "client_id": "client/1"}
    assert json.loads(data)["zkcoord"] == marker
    assert classic_marker(data) == marker
    assert classic_marker(_reg({"t": 1}).encode()) is None
    assert classic_marker(b"not json") is None


def test_the_registration_says_which_kind_of_member_wrote_it_and_the_legacy_reader_ignores_it() -> None:
    """Kafka 0.8.2's `TopicCount.constructTopicCount` reads only the `pattern` and `subscription` keys of the
    registration (extra keys, nested or not, are never looked at); zkcoord's reader likewise. The kind sits
    inside the `zkcoord` key, so a legacy member's view of a consumer-protocol member is a classic member's."""
    consumer = encode_classic_registration(ClassicMember("m", "c", ("t",), kind=CONSUMER_KIND), 7)
    classic = encode_classic_registration(ClassicMember("m", "c", ("t",)), 7)
    for data in (consumer, classic):
        top = json.loads(data)
        assert sorted(top) == ["pattern", "subscription", "timestamp", "version", "zkcoord"]
        assert (top["pattern"], top["subscription"]) == ("static", {"t": 1})
        assert ConsumerRegistration.decode("/consumers/g/ids/x", data).topic_counts == {"t": 1}
    assert registered_kind(classic_marker(consumer)) == CONSUMER_KIND
    assert registered_kind(classic_marker(classic)) == CLASSIC
    # A registration by a zkcoord before the key, or a kind this version does not know: unknown.
    older = b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"7","zkcoord":{"protocol":"classic"}}'
    assert classic_marker(older) is not None and registered_kind(classic_marker(older)) is None
    assert registered_kind({"protocol": "classic", "group_protocol": "share"}) is None
    assert registered_kind(None) is None


def test_member_views_by_protocol() -> None:
    cid = consumer_id_for("g", "m")
    ids = {
        "g_a": _reg({"t": 1}).encode(),
        cid: encode_classic_registration(ClassicMember("m", "", ("t",)), 1),
    }
    owners = {TP("t", 1): thread_for(cid), TP("t", 0): "g_a-0", TP("t", 2): "g_gone-0"}
    views = {v.consumer_id: (v.protocol, v.owned) for v in member_views(ids, owners)}
    assert views == {
        "g_a": ("legacy", (TP("t", 0),)),
        cid: ("classic", (TP("t", 1),)),
        "g_gone": ("legacy", (TP("t", 2),)),  # an owner without registration is still shown
    }


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_classic_share_is_exactly_the_legacy_algorithm_over_everyone(strategy: str) -> None:
    legacy = {"g_a": _reg({"t": 1}), "g_z": _reg({"t": 1})}
    classic = [ClassicMember("m1", "", ("t",)), ClassicMember("m2", "", ("t",))]
    parts = {"t": list(range(12))}
    shares = plan_assignment(strategy, legacy, classic, "g", parts)
    everyone = {
        "g_a": {"t": 1},
        "g_z": {"t": 1},
        **{consumer_id_for("g", m.member_id): {"t": 1} for m in classic},
    }
    decision = assign(strategy, everyone, parts)
    for m in classic:
        mine = tuple(tp for tp, th in decision.items() if th == thread_for(consumer_id_for("g", m.member_id)))
        assert shares[m.member_id] == mine
    assert sum(len(v) for v in shares.values()) == 6


def test_hand_over_releases_what_moves_and_acquires_the_rest() -> None:
    a, b = thread_for("g_classic-a"), thread_for("g_classic-b")
    held = {TP("t", 0): a, TP("t", 1): a, TP("t", 2): "g_legacy-0"}
    target = {TP("t", 1): a, TP("t", 2): b, TP("t", 3): b}
    plan = plan_hand_over(target, held, [a, b])
    assert plan == HandOver(release=(TP("t", 0),), acquire=((TP("t", 2), b), (TP("t", 3), b)))


def _sub(*owned: TP, version: int = 0) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub

    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [Sub.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return Sub(version=version, topics=["t"], user_data=b"", owned_partitions=parts).encode()  # type: ignore[no-any-return]


def test_any_consumer_protocol_name_is_hosted() -> None:
    # Whatever a client calls its assignor, the coordinator computes the share with the legacy algorithm and
    # answers ConsumerProtocolAssignment bytes: kafkajs 2.2.4's default and Java's sticky are hosted as eager.
    eager = _sub()
    assert check_protocols("consumer", [("RoundRobinAssigner", eager)]) == ("RoundRobinAssigner",)
    assert check_protocols("consumer", [("sticky", _sub(version=1))]) == ("sticky",)
    # the legacy algorithms first, other names next, the KIP-429 protocol last, each in the member's order
    offered = [("cooperative-sticky", eager), ("mine", eager), ("roundrobin", eager), ("range", eager)]
    assert check_protocols("consumer", offered) == ("roundrobin", "range", "mine", "cooperative-sticky")
    # a cooperative-sticky member says what it still owns; range and roundrobin are accepted as before
    owning = _sub(TP("t", 0), version=1)
    assert check_protocols("consumer", [("cooperative-sticky", owning)]) == ("cooperative-sticky",)
    assert check_protocols("consumer", [("range", owning)]) == ("range",)


def test_refusals_say_why() -> None:
    with pytest.raises(MixedGroupRefused, match=r"consumers only .*'connect'"):
        check_protocols("connect", [("default", _sub())])
    with pytest.raises(MixedGroupRefused, match=r"'RoundRobinAssigner': its metadata \(3 bytes\) is not a"):
        check_protocols("consumer", [("RoundRobinAssigner", b"\x00\x00\x00")])
    with pytest.raises(MixedGroupRefused, match="offers no protocol"):
        check_protocols("consumer", [])
    # An unknown name whose member still owns partitions at JoinGroup is a cooperative assignor the bridge does
    # not know: hosted as eager, its partitions would be released while it still consumes them.
    with pytest.raises(
        MixedGroupRefused, match=r"'my-cooperative': .*2 owned partitions.*cooperative-sticky"
    ):
        check_protocols("consumer", [("my-cooperative", _sub(TP("t", 0), TP("t", 3), version=1))])
    # every reason is given, and a usable protocol among refused ones is kept
    with pytest.raises(MixedGroupRefused, match=r"'a': its metadata.*; 'b': its subscription lists 1"):
        check_protocols("consumer", [("a", b""), ("b", _sub(TP("t", 1), version=2))])
    assert check_protocols("consumer", [("a", b""), ("range", _sub())]) == ("range",)


def test_refusals() -> None:
    with pytest.raises(MixedGroupRefused, match="same topics"):
        check_subscriptions({"g_a": _reg({"t": 1})}, [ClassicMember("m", "", ("u",))], "range")
    check_subscriptions({"g_a": _reg({"t": 2})}, [ClassicMember("m", "", ("t",))], "range")
    # legacy members evidently on roundrobin (their owners match it, not range): range is refused
    legacy = {"g_a": _reg({"t": 1}), "g_b": _reg({"t": 1})}
    parts = {"t": [0, 1, 2, 3]}
    owners = assign("roundrobin", {c: r.topic_counts for c, r in legacy.items()}, parts)
    assert owners != assign("range", {c: r.topic_counts for c, r in legacy.items()}, parts)
    with pytest.raises(MixedGroupRefused, match="roundrobin"):
        check_strategy("range", legacy, parts, owners)
    check_strategy("roundrobin", legacy, parts, owners)
    check_strategy("range", legacy, parts, dict(list(owners.items())[:2]))  # incomplete: proves nothing


def test_assignment_codec_round_trip() -> None:
    tps = (TP("u", 3), TP("t", 1), TP("t", 0))
    assert decode_assignment(encode_assignment(tps)) == (TP("t", 0), TP("t", 1), TP("u", 3))
    assert decode_assignment(encode_assignment(())) == ()


# --- hostile registrations and fences -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_are_a_registration_or_malformed_never_an_exception(data: bytes) -> None:
    parsed = parse_registration("/consumers/g/ids/x", data)
    assert isinstance(parsed, (ConsumerRegistration, Malformed))
    assert classic_marker(data) is None or isinstance(classic_marker(data), dict)
    with contextlib.suppress(MalformedZnode):
        assert decode_fence("/f", data) >= 0


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["version", "subscription", "pattern", "timestamp", "zkcoord"]), _json)
)
def test_any_json_shape_is_a_registration_or_malformed(obj: dict[str, object]) -> None:
    data = json.dumps(obj).encode()
    parsed = parse_registration("/p", data)
    assert isinstance(parsed, (ConsumerRegistration, Malformed))
    with contextlib.suppress(MalformedZnode):
        decode_fence("/f", data)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200_000), st.sampled_from(["[", '{"a":']))
def test_nesting_is_bounded_before_any_parse(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    data = (opener * depth + "1" + closer * depth).encode()
    parsed = parse_registration("/p", data)
    assert isinstance(parsed, Malformed)
    if len(data) > MAX_REGISTRATION_BYTES:  # the size bound is checked first
        assert parsed.reason.endswith(f"more than {MAX_REGISTRATION_BYTES} a registration may have")
    elif depth > MAX_JSON_DEPTH:
        assert parsed.reason == f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    assert classic_marker(data) is None


def test_size_is_bounded() -> None:
    big = b'{"pattern":"static","subscription":{"t":1},"x":"' + b"y" * MAX_REGISTRATION_BYTES + b'"}'
    parsed = parse_registration("/p", big)
    assert isinstance(parsed, Malformed) and "more than" in parsed.reason
    assert classic_marker(big) is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"holder": "n", "epoch": null}', "epoch must be an integer >= 0, got null"),
        (b'{"holder": "n", "epoch": true}', "epoch must be an integer >= 0, got true"),
        (b'{"holder": "n", "epoch": -1}', "epoch must be an integer >= 0, got -1"),
        (b'{"holder": "n", "epoch": "3"}', 'epoch must be an integer >= 0, got "3"'),
        (b'{"epoch": 3}', 'expected {"holder": <text>, "epoch": <int>}'),
        (b"[1]", 'expected {"holder": <text>, "epoch": <int>}'),
        (b"", "not JSON"),
        (b"[" * 10_000, "fence data of 10000 bytes"),
    ],
)
def test_a_malformed_fence_is_named(data: bytes, reason: str) -> None:
    with pytest.raises(MalformedZnode, match=re.escape(reason)):
        decode_fence("/zkcoord/mixed-groups/g", data)
    assert decode_fence("/f", b'{"holder": "n", "epoch": 4}') == 4


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["g_a", "g_b", "g_zz", "g_c-1"]), st.integers(1, 12), min_size=1),
    st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=3, unique=True),
    st.integers(1, 6),
    st.sampled_from(["range", "roundrobin"]),
)
def test_bounding_stream_counts_changes_no_classic_share(
    counts: dict[str, int], classic_ids: list[str], parts: int, strategy: str
) -> None:
    partitions = {"t": list(range(parts))}
    legacy = {cid: _reg({"t": n}) for cid, n in counts.items()}
    classic = [ClassicMember(m, m, ("t",)) for m in classic_ids]
    unbounded = {cid: reg.topic_counts for cid, reg in legacy.items()}
    consumers: dict[str, dict[str, int]] = {**unbounded}
    for m in classic:
        consumers[consumer_id_for("g", m.member_id)] = {"t": 1}
    decision = assign(strategy, consumers, partitions)  # the legacy members' own (unbounded) computation
    shares = plan_assignment(strategy, legacy, classic, "g", partitions)
    for m in classic:
        thread = thread_for(consumer_id_for("g", m.member_id))
        assert set(shares[m.member_id]) == {tp for tp, th in decision.items() if th == thread}
    assert all(n <= max(1, parts) for n in bounded_counts({"t": 2**31 - 1}, partitions).values())


# --- KIP-429 members in a mixed group ------------------------------------------------------------------------


def test_hand_over_keeps_what_a_cooperative_member_still_owns_and_withholds_its_moves() -> None:
    a, b = thread_for("g_classic-a"), thread_for("g_classic-b")
    held = {TP("t", 0): a, TP("t", 1): a, TP("t", 2): a}
    # b joined: a keeps 0, 1 goes to b, 2 goes to a legacy member; a still owns all three (cooperative).
    target = {TP("t", 0): a, TP("t", 1): b}
    plan = plan_hand_over(target, held, [a, b], {tp: a for tp in held})
    assert plan == HandOver(release=(), acquire=(), withheld=((TP("t", 1), b),))
    # a revoked 1 and 2 and rejoined owning only 0: now they are released and 1 is acquired for b.
    plan = plan_hand_over(target, held, [a, b], {TP("t", 0): a})
    assert plan == HandOver(release=(TP("t", 1), TP("t", 2)), acquire=((TP("t", 1), b),))
    # Eager members (nothing still owned) are planned as before.
    assert plan_hand_over(target, held, [a, b]) == plan


@settings(max_examples=300, deadline=None)
@given(
    target=st.dictionaries(st.integers(0, 7), st.sampled_from(["a-0", "b-0", "c-0"]), max_size=8),
    held=st.dictionaries(st.integers(0, 7), st.sampled_from(["a-0", "b-0", "c-0", "g_legacy-0"]), max_size=8),
    owned=st.dictionaries(st.integers(0, 7), st.sampled_from(["a-0", "b-0", "c-0"]), max_size=8),
)
def test_hand_over_never_takes_a_partition_from_a_cooperative_owner(target, held, owned) -> None:
    t = {TP("t", p): th for p, th in target.items()}
    h = {TP("t", p): th for p, th in held.items()}
    o = {TP("t", p): th for p, th in owned.items()}
    plan = plan_hand_over(t, h, ["a-0", "b-0", "c-0"], o)
    for tp in plan.release:
        assert o.get(tp) != h[tp]  # never deleted under a member that still consumes it
    for tp, _th in plan.acquire:
        assert not (tp in o and h.get(tp) == o[tp])  # never acquired while its holder still owns it
    assert {tp for tp, _ in plan.withheld}.isdisjoint(tp for tp, _ in plan.acquire)


def test_the_classic_part_stays_with_its_cooperative_holders_and_legacy_shares_do_not_change() -> None:
    # bench_mixed's migration, 12 partitions: c0..c2 hold 0-2, 3-5, 6-8 beside the last legacy member l3.
    legacy = {"g_l3": _reg({"t": 1})}
    classic = [ClassicMember(f"m{i}", "", ("t",)) for i in range(4)]
    ids = {}
    taken: list[str] = []
    for i in range(4):
        ids[f"m{i}"] = consumer_id_for("g", f"m{i}", taken)
        taken.append(ids[f"m{i}"])
    parts = {"t": list(range(12))}
    three = classic[:3]
    holding = {TP("t", p): f"m{p // 3}" for p in range(9)}
    # l2 left: range over c0..c2, l3 gives the classic part 0-8 as it is held; nothing moves.
    assert plan_assignment("range", legacy, three, "g", parts, ids, holding) == {
        m: tuple(tp for tp, h in holding.items() if h == m) for m in ("m0", "m1", "m2")
    }
    # c3 joins: range gives c2 6-7 and c3 8-9; stickily c3 takes only 8 from c2 (counts 3 3 2 2).
    plain = plan_assignment("range", legacy, classic, "g", parts, ids)
    assert plain["m2"] == (TP("t", 6), TP("t", 7)) and plain["m3"] == (TP("t", 8), TP("t", 9))
    sticky = plan_assignment("range", legacy, classic, "g", parts, ids, holding)
    assert sticky == plain
    # The legacy member's share is what it computes itself: the same classic part.
    assert {tp for v in sticky.values() for tp in v} == {tp for v in plain.values() for tp in v}
    # l3 leaves: its 10 and 11 go to the least loaded; nothing moves between classic members (range would move
    # 8 back to c2).
    last = plan_assignment(
        "range", {}, classic, "g", parts, ids, {tp: m for m, v in sticky.items() for tp in v}
    )
    assert all(set(sticky[m]) <= set(last[m]) for m in sticky)
    assert sorted(len(v) for v in last.values()) == [3, 3, 3, 3]
    assert assign("range", {c: {"t": 1} for c in ids.values()}, {"t": list(range(12))}) != {
        (tp.topic, tp.partition): thread_for(ids[m]) for m, v in last.items() for tp in v
    }


def test_a_newcomer_gets_one_even_when_the_part_has_few_partitions() -> None:
    # 6 partitions over four members: the newcomer is not left with nothing beside three holding two each.
    tps = [TP("t", p) for p in range(6)]
    decision = {"a": tuple(tps[:2]), "b": tuple(tps[2:4]), "c": (tps[4],), "d": (tps[5],)}
    holding = {tp: "abc"[i // 2] for i, tp in enumerate(tps)}
    out = sticky_spread(decision, holding)
    assert sorted(len(v) for v in out.values()) == [1, 1, 2, 2]
    assert all(holding[tp] == m for m in "abc" for tp in out[m])


def test_a_newcomer_to_an_all_classic_part_gets_its_fair_share_at_once() -> None:
    tps = [TP("t", p) for p in range(12)]
    decision = {"a": tuple(tps[:3]), "b": tuple(tps[3:6]), "c": tuple(tps[6:9]), "d": tuple(tps[9:])}
    holding = {tp: "abc"[i // 4] for i, tp in enumerate(tps)}  # a, b, c held 4 each before d joined
    out = sticky_spread(decision, holding)
    assert sorted(len(v) for v in out.values()) == [3, 3, 3, 3]
    assert all(holding[tp] == m for m in "abc" for tp in out[m])  # each keeps three of its own


@settings(max_examples=300, deadline=None)
@given(
    n_members=st.integers(1, 5),
    n_parts=st.integers(0, 16),
    algo=st.data(),
)
def test_sticky_spread_is_the_same_part_balanced_and_keeps_what_it_can(n_members, n_parts, algo) -> None:
    members = [f"m{i}" for i in range(n_members)]
    tps = [TP("t", p) for p in range(n_parts)]
    # As the legacy algorithms split it: counts at most one apart, any partitions to any member.
    order = algo.draw(st.permutations(members))
    owner = algo.draw(st.permutations([order[i % n_members] for i in range(n_parts)]))
    decision = {m: tuple(tp for tp, o in zip(tps, owner, strict=True) if o == m) for m in members}
    current = algo.draw(
        st.dictionaries(st.sampled_from(tps) if tps else st.nothing(), st.sampled_from([*members, "gone"]))
    )
    out = sticky_spread(decision, current)
    assert sorted(tp for v in out.values() for tp in v) == tps  # the same part, each partition once
    ceiling = -(-n_parts // n_members)
    counts = [len(v) for v in out.values()]
    assert max(counts) <= max(ceiling, max(len(v) for v in decision.values()))
    assert max(counts) - min(counts) <= max(
        STICKY_SPREAD, max(map(len, decision.values())) - min(map(len, decision.values()))
    )
    if not current:
        assert out == {m: tuple(sorted(v, key=lambda tp: tp.partition)) for m, v in decision.items()}
    # A holder under the ceiling keeps every partition of the part it holds, unless balance took it.
    for m in members:
        mine = [tp for tp, h in current.items() if h == m]
        if len(mine) <= ceiling - 1 and max(counts) - min(counts) < STICKY_SPREAD:
            assert set(mine) <= set(out[m])


def test_owned_partitions_are_read_from_every_subscription_version() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Sub

    owned = [Sub.TopicPartition(topic="t", partitions=[0, 2]), Sub.TopicPartition(topic="ü", partitions=[1])]
    for version in (0, 1, 2, 3):
        data = Sub(
            version=version,
            topics=["t", "ü"],
            user_data=b"x",
            owned_partitions=owned,
            generation_id=5,
            rack_id="r",
        ).encode()
        expected = () if version == 0 else (TP("t", 0), TP("t", 2), TP("ü", 1))
        assert decode_owned_partitions(data) == expected, version
    assert decode_owned_partitions(b"") is None
    assert decode_owned_partitions(b"\x00\x01\x7f\xff\xff\xff") is None  # a count beyond the bytes


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_owned_partitions_take_any_bytes(data: bytes) -> None:
    found = decode_owned_partitions(data)
    assert found is None or all(isinstance(tp, TP) for tp in found)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=60)), max_size=4),
    st.sampled_from(["consumer", "x"]),
)
def test_protocol_check_takes_any_bytes(protocols: list[tuple[str, bytes]], protocol_type: str) -> None:
    try:
        usable = check_protocols(protocol_type, protocols)
    except MixedGroupRefused as exc:
        assert str(exc)  # a refusal always says why
    else:
        assert usable and set(usable) <= {n for n, _ in protocols}
