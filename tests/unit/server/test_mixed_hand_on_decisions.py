"""The mixed layer's two decisions for the same-generation hand-on (zkcoord.server.mixed_decisions): whose
SyncGroup answer is held, and which rejoin of a Stable group is answered in place, on groups the real handlers
built (the pure test driver)."""

from __future__ import annotations

import struct

from group.driver import Driver

from zkcoord.bridge.mixed_policy import encode_assignment
from zkcoord.group import handlers as h
from zkcoord.group.messages import JoinGroupRequest
from zkcoord.server import mixed_decisions as md
from zkcoord.topic_partition import TopicPartition

COOP = "cooperative-sticky"


def subscription(owned: list[int], topic: str = "t", user: bytes = b"") -> bytes:
    """ConsumerProtocolSubscription v1 of one topic with owned partitions and user data."""
    out = struct.pack(">hih", 1, 1, len(topic)) + topic.encode() + struct.pack(">i", len(user)) + user
    out += struct.pack(">ih", 1, len(topic)) + topic.encode() + struct.pack(">i", len(owned))
    return out + b"".join(struct.pack(">i", p) for p in owned)


def tps(*ps: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition("t", p) for p in ps)


def setup() -> tuple[Driver, str, str, dict[TopicPartition, tuple[str, str]]]:
    """giver (leader) owned 0-3 and keeps 0, 1; recipient gets 2, 3 once the giver revoked them (withheld)."""
    d = Driver()
    protocols = ((COOP, subscription([0, 1, 2, 3])),)
    tokens = [d.join_new(client_id=f"c{i}", protocols=protocols) for i in range(2)]
    d.advance(0)
    giver, recipient = (d.jr(t).member_id for t in tokens)
    gen = d.jr(tokens[0]).generation_id
    withheld = {tp: (giver, recipient) for tp in tps(2, 3)}
    group = d.st.groups["g"]
    answered = {giver: COOP, recipient: COOP}
    assert md.hand_on_holds(group, withheld, answered) == (recipient,)
    d.apply(h.hold_sync_answers(d.st, "g", gen, (recipient,), d.now + 1000))
    d.sync(
        giver, gen, assignments=((giver, encode_assignment(tps(0, 1))), (recipient, encode_assignment(())))
    )
    return d, giver, recipient, withheld


def rejoin(d: Driver, member: str, metadata: bytes, name: str = COOP) -> JoinGroupRequest:
    return JoinGroupRequest(5, "g", 10_000, 30_000, member, None, "consumer", ((name, metadata),))


def test_a_giver_that_revoked_exactly_what_was_withheld_rejoins_in_place() -> None:
    d, giver, recipient, withheld = setup()
    group = d.st.groups["g"]
    answered = {giver: COOP, recipient: COOP}
    member = group.members[giver]
    # user data differs (a client's own bookkeeping): not compared
    req = rejoin(d, giver, subscription([1, 0], user=b"gen"))
    assert md.rejoins_in_place(group, member, req, withheld, answered) == frozenset(tps(0, 1))


def test_anything_else_is_left_to_kafkas_rebalance() -> None:
    d, giver, recipient, withheld = setup()
    group = d.st.groups["g"]
    answered = {giver: COOP, recipient: COOP}
    member = group.members[giver]
    still = rejoin(d, giver, subscription([0, 1, 2]))  # has not revoked 2 yet
    other_topic = rejoin(d, giver, subscription([0, 1], topic="u"))
    other_name = rejoin(d, giver, subscription([0, 1]), name="range")
    for req in (still, other_topic, other_name):
        assert md.rejoins_in_place(group, member, req, withheld, answered) is None, req
    ok = rejoin(d, giver, subscription([0, 1]))
    assert (
        md.rejoins_in_place(group, member, ok, withheld, {giver: "range", recipient: COOP}) is None
    )  # eager
    assert md.rejoins_in_place(group, member, ok, {}, answered) is None  # nothing withheld for it
    assert md.rejoins_in_place(group, member, rejoin(d, giver, b"\x00\x01junk"), withheld, answered) is None
    group.sync_holds.clear()  # the recipient's answer is no longer held (its deadline passed)
    assert md.rejoins_in_place(group, member, ok, withheld, answered) is None


def test_only_cooperative_recipients_of_a_completing_generation_are_held() -> None:
    d = Driver()
    d.stable_group(2)
    group = d.st.groups["g"]
    a, b = group.members
    withheld = {TopicPartition("t", 0): (a, b)}
    assert md.hand_on_holds(group, withheld, {a: COOP, b: COOP}) == ()  # Stable: too late to hold
    d.apply(h.handle_external_rebalance(d.st, "g", d.now))
    d.join("g", a)
    d.join("g", b)
    d.advance(0)
    assert md.hand_on_holds(group, withheld, {a: COOP, b: COOP}) == (b,)
    assert md.hand_on_holds(group, withheld, {a: COOP, b: "range"}) == ()  # an eager recipient is not held
    assert md.hand_on_holds(group, {TopicPartition("t", 0): (a, "gone")}, {a: COOP, "gone": COOP}) == ()
