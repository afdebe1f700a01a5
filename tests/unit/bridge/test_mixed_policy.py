"""The pure decisions of mixed groups: naming, the registration a 0.8 reader parses, the combined assignment,
hand-over plans and refusals."""

from __future__ import annotations

import json

import pytest

from zkcoord.bridge.mixed_policy import (
    ClassicMember,
    HandOver,
    MixedGroupRefused,
    check_protocols,
    check_strategy,
    check_subscriptions,
    classic_marker,
    consumer_id_for,
    decode_assignment,
    encode_assignment,
    encode_classic_registration,
    is_classic_id,
    member_views,
    plan_assignment,
    plan_hand_over,
    thread_for,
)
from zkcoord.legacy import paths
from zkcoord.legacy.assignment import assign
from zkcoord.legacy.codecs import ConsumerRegistration
from zkcoord.legacy.topic_partition import TopicPartition as TP


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
    assert json.loads(data)["zkcoord"] == {"protocol": "classic", "member_id": 'm"1', "client_id": "client/1"}
    assert classic_marker(data) == {"protocol": "classic", "member_id": 'm"1', "client_id": "client/1"}
    assert classic_marker(_reg({"t": 1}).encode()) is None
    assert classic_marker(b"not json") is None


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


def test_refusals() -> None:
    assert check_protocols(["cooperative-sticky", "range", "roundrobin"]) == ("range", "roundrobin")
    with pytest.raises(MixedGroupRefused, match="cooperative"):
        check_protocols(["cooperative-sticky"])
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
