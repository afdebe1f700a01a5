"""The hand-off's one-protocol check: the intersection of the classic members' offered protocol names
(migration.workflow.handoff.common_protocols) and the registration's `protocols` key it reads
(zkcoord.bridge.mixed_policy.encode_classic_registration / offered_protocols)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from migration.workflow.handoff import common_protocols
from zkcoord.bridge.mixed_policy import (
    MAX_PROTOCOLS_JSON,
    ClassicMember,
    classic_marker,
    encode_classic_registration,
    offered_protocols,
)

NAMES = st.lists(
    st.sampled_from(["range", "roundrobin", "cooperative-sticky", "sticky", "RoundRobinAssigner"])
)


def test_eager_range_beside_cooperative_sticky_share_nothing() -> None:
    assert common_protocols({"kp-1": ["range"], "kp-2": ["cooperative-sticky"]}) == ((), ())


def test_a_common_name_in_the_first_members_order() -> None:
    offered = {"a": ["cooperative-sticky", "range"], "b": ["range", "cooperative-sticky"], "c": ["range"]}
    assert common_protocols(offered) == (("range",), ())
    assert common_protocols({"a": ["range", "roundrobin", "range"], "b": ["roundrobin", "range"]}) == (
        ("range", "roundrobin"),
        (),
    )


def test_unknown_members_are_listed_not_counted() -> None:
    assert common_protocols({"old": None, "new": ["range"]}) == (("range",), ("old",))
    assert common_protocols({"old": None}) == ((), ("old",))  # nothing known: nothing proven
    assert common_protocols({}) == ((), ())


@given(st.dictionaries(st.sampled_from("abcdef"), st.one_of(st.none(), NAMES), max_size=6))
def test_the_intersection_is_exactly_what_every_known_member_offers(
    offered: dict[str, list[str] | None],
) -> None:
    common, unknown = common_protocols(offered)
    known = [set(n) for n in offered.values() if n is not None]
    assert set(unknown) == {m for m, n in offered.items() if n is None}
    assert set(common) == (set.intersection(*known) if known else set())
    assert len(common) == len(set(common))


def test_the_registration_keeps_the_offered_names_in_order() -> None:
    member = ClassicMember('m"1', "c", ("t",), protocols=("cooperative-sticky", "range", 'odd"name\\'))
    data = encode_classic_registration(member, 1)
    assert offered_protocols(data) == ("cooperative-sticky", "range", 'odd"name\\')
    assert json.loads(data)["subscription"] == {"t": 1}  # the 0.8 part unchanged
    assert classic_marker(data) is not None and classic_marker(data)["member_id"] == 'm"1'


def test_unknown_when_absent_oversized_or_not_a_list_of_strings() -> None:
    assert offered_protocols(encode_classic_registration(ClassicMember("m", "c", ("t",)), 1)) is None
    many = tuple(f"assignor-{i:04d}" for i in range(MAX_PROTOCOLS_JSON // 10))
    data = encode_classic_registration(ClassicMember("m", "c", ("t",), protocols=many), 1)
    assert offered_protocols(data) is None and len(data) < 2 * MAX_PROTOCOLS_JSON  # left out, not truncated
    for bad in ('"range"', "[1]", "[]", '{"a":1}'):
        data = ('{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1",'
                f'"zkcoord":{{"protocol":"classic","member_id":"m","protocols":{bad}}}}}').encode()  # fmt: skip
        assert classic_marker(data) is not None and offered_protocols(data) is None
    assert offered_protocols(b'{"version":1,"subscription":{"t":1},"pattern":"static"}') is None  # legacy
    assert offered_protocols(b"\xff not json") is None
