"""The pure decisions for consumer-protocol (KIP-848) members of mixed groups (zkcoord.server.mixed_decisions):
heartbeat refusals, owned partitions by topic id, one heartbeat's step (what is sent, when the fence may move),
shares after a hand-over, what the bridge is handed, rejoins and commits."""

from __future__ import annotations

from dataclasses import replace

from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest
from zkcoord.group.errors import ErrorCode
from zkcoord.server import mixed_decisions as md
from zkcoord.topic_partition import TopicPartition

T_ID = "0" * 31 + "1"
TOPICS = {"t": (T_ID, 4)}


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def tps(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(tp(p) for p in ps)


def hb(member_id: str = "m", epoch: int = 1, **kw: object) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(1, "g", member_id, epoch, **kw)  # type: ignore[arg-type]


def member(epoch: int = 3, sent: frozenset[TopicPartition] = frozenset(), owned: frozenset[TopicPartition] = frozenset(),
           share: frozenset[TopicPartition] = frozenset()) -> md.MixedConsumer:  # fmt: skip
    return md.MixedConsumer("m", "client", ("t",), epoch, epoch - 1, sent, owned, share)


# ---------------------------------------------------------------------------------------------- refusals


def test_a_join_is_served_and_a_malformed_one_is_refused_saying_why() -> None:
    assert (
        md.consumer_heartbeat_refusal({}, hb(epoch=0, subscribed_topic_names=("t",), topic_partitions=()))
        is None
    )
    no_topics = md.consumer_heartbeat_refusal({}, hb(epoch=0))
    assert no_topics is not None and no_topics.error_code == ErrorCode.INVALID_REQUEST
    assert "SubscribedTopicNames" in (no_topics.error_message or "")
    owning = md.consumer_heartbeat_refusal(
        {}, hb(epoch=0, subscribed_topic_names=("t",), topic_partitions=((T_ID, (0,)),))
    )
    assert owning is not None and owning.error_code == ErrorCode.INVALID_REQUEST


def test_a_regex_subscription_is_refused_naming_the_group_and_what_to_do() -> None:
    for req in (
        hb(epoch=0, subscribed_topic_names=("t",), subscribed_topic_regex="t.*"),
        hb(epoch=0, subscribed_topic_regex="t.*"),  # a pattern only: refused for the pattern, not the names
    ):
        regex = md.consumer_heartbeat_refusal({}, req)
        assert regex is not None and regex.error_code == ErrorCode.INVALID_REQUEST
        message = regex.error_message or ""
        assert "SubscribedTopicRegex" in message and "mixed group g " in message and "topic names" in message


def static_join(member_id: str, instance: str = "i-1") -> ConsumerGroupHeartbeatRequest:
    return hb(member_id, 0, subscribed_topic_names=("t",), topic_partitions=(), instance_id=instance)


def test_a_restarted_static_member_takes_its_predecessors_place_without_the_bridge_seeing_a_change() -> None:
    """A static member was served as a dynamic one (its InstanceId ignored): a restart gave it a new member id,
    so a new legacy consumer id (the legacy members rebalanced) while the old one's partitions waited for its
    session. Now it is known to the bridge by its instance id: the replacement keeps the registration and the
    share, and nothing is handed over."""
    members: dict[str, md.MixedConsumer] = {}
    assert md.consumer_heartbeat_refusal(members, static_join("a")) is None
    first = md.consumer_joined(members, "a", "c", ("t",), "i-1")
    assert first.replaced is None and first.hand_over  # a new member: the bridge registers it
    assert first.member.key == md.static_bridge_id("i-1") and first.member.instance_id == "i-1"
    # It gets its share, consumes, then leaves with epoch -2 (a restart): it stays, its share held.
    a = replace(first.member, epoch=4, previous_epoch=3, sent=tps(1, 2), owned=tps(1, 2), share=tps(1, 2))
    members = {"a": a}
    assert md.consumer_heartbeat_refusal(members, hb("a", -2, instance_id="i-1")) is None
    members = {"a": md.static_left(a)}
    keys_before, _ = md.bridge_members(members)
    # The restarted process joins under a new member id and the same instance id: it takes "a"'s place.
    assert md.consumer_heartbeat_refusal(members, static_join("b")) is None
    join = md.consumer_joined(members, "b", "c", ("t",), "i-1")
    assert join.replaced == "a" and not join.hand_over  # same topics: no rebalance of anyone
    b = join.member
    assert (b.member_id, b.key, b.epoch, b.share) == ("b", md.static_bridge_id("i-1"), 5, tps(1, 2))
    members = {"b": b}
    keys_after, _ = md.bridge_members(members)
    assert keys_after == keys_before  # the bridge (and so the legacy tree) sees the same member
    # Its next heartbeat is answered its old partitions.
    step = md.consumer_step(b, frozenset(), None, False)
    answer = md.consumer_answer(step.member, step.send, lookup, 250)
    assert answer.assignment == ((T_ID, (1, 2)),) and answer.member_id == "b"
    # The old process is fenced; describe shows the instance id.
    old = md.consumer_heartbeat_refusal(members, hb("a", 4, instance_id="i-1"))
    assert old is not None and old.error_code == ErrorCode.FENCED_INSTANCE_ID
    described = md.describe_mixed("g", None, members, {}, lookup).members
    assert [(m.member_id, m.instance_id) for m in described] == [("b", "i-1")]


def test_a_static_instance_held_by_a_live_member_is_unreleased_and_bad_static_requests_are_refused() -> None:
    live = md.consumer_joined({}, "a", "c", ("t",), "i-1").member
    members = {"a": live}
    taken = md.consumer_heartbeat_refusal(members, static_join("b"))
    assert taken is not None and taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert "i-1" in (taken.error_message or "") and "owned by a" in (taken.error_message or "")
    assert md.consumer_heartbeat_refusal(members, static_join("a")) is None  # its own rejoin
    bare = md.consumer_heartbeat_refusal(members, hb("a", -2))  # a static leave names its instance
    assert bare is not None and bare.error_message == "InstanceId can't be null."
    empty = md.consumer_heartbeat_refusal(members, static_join("b", instance=" "))
    assert empty is not None and empty.error_code == ErrorCode.INVALID_REQUEST
    other = md.consumer_heartbeat_refusal(members, hb("a", live.epoch, instance_id="i-2"))
    assert other is not None and other.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # A dynamic member cannot take a static member's bridge id.
    squat = md.consumer_heartbeat_refusal(
        {}, hb(md.static_bridge_id("i-1"), 0, subscribed_topic_names=("t",), topic_partitions=())
    )
    assert squat is not None and squat.error_code == ErrorCode.INVALID_REQUEST
    assert md.consumer_heartbeat_refusal(members, hb("a", -1)) is None  # a dynamic leave is served
    # A static member that left is no member until replaced: its own heartbeats are unknown.
    gone = md.consumer_heartbeat_refusal({"a": md.static_left(live)}, hb("a", live.epoch))
    assert gone is not None and gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_restored_after_a_load_is_replaced_by_its_rejoin() -> None:
    """After a coordinator restart the static member's registration names its instance id: its heartbeat (a
    member id the load never knew) is answered UNKNOWN_MEMBER_ID, not FENCED_INSTANCE_ID (fatal), and its
    rejoin takes the restored member's place and share."""
    key = md.static_bridge_id("i-1")
    restored = md.restored_consumers([], {}, {key: ("c", ("t",), (tp(3),), "consumer")})
    assert restored[key].instance_id == "i-1" and restored[key].key == key
    hb_after = md.consumer_heartbeat_refusal(restored, hb("x", 9, instance_id="i-1"))
    assert hb_after is not None and hb_after.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert md.consumer_heartbeat_refusal(restored, static_join("x")) is None
    join = md.consumer_joined(restored, "x", "c", ("t",), "i-1")
    assert join.replaced == key and not join.hand_over
    assert (join.member.member_id, join.member.key, join.member.share) == ("x", key, tps(3))
    assert join.member.fenced() == frozenset() and not join.member.restored  # it dropped them to rejoin
    # Known (by bridge id) after the replacement: a second restore does not bring the old one back.
    assert md.restored_consumers([], {"x": join.member}, {key: ("c", ("t",), (tp(3),), "consumer")}) == {}


def test_an_unknown_member_rejoins_and_a_foreign_epoch_is_fenced() -> None:
    unknown = md.consumer_heartbeat_refusal({}, hb(epoch=3))
    assert unknown is not None and unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    members = {"m": member(epoch=3)}
    assert md.consumer_heartbeat_refusal(members, hb(epoch=3)) is None
    assert md.consumer_heartbeat_refusal(members, hb(epoch=2)) is None  # the previous one: an answer was lost
    fenced = md.consumer_heartbeat_refusal(members, hb(epoch=5))
    assert fenced is not None and fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert md.consumer_heartbeat_refusal(members, hb(epoch=-1)) is None  # a leave
    invalid = md.consumer_heartbeat_refusal(members, hb(epoch=-3))
    assert invalid is not None and invalid.error_code == ErrorCode.INVALID_REQUEST


def test_owned_partitions_are_read_by_topic_id_and_unknown_ids_name_nothing() -> None:
    lookup = TOPICS.get
    req = hb(topic_partitions=((T_ID, (0, 2)), ("f" * 32, (1,))))
    assert md.reported_owned(req, ("t",), lookup) == tps(0, 2)
    assert md.reported_owned(hb(), ("t",), lookup) is None  # not sent: unchanged


# ------------------------------------------------------------------------------------------ one heartbeat


def test_a_member_is_sent_only_its_held_share_and_the_epoch_moves_with_it() -> None:
    step = md.consumer_step(member(sent=tps(0), owned=tps(0), share=tps(0, 1)), tps(0), None, False)
    assert step.member.sent == tps(0, 1) and step.send
    assert (step.member.epoch, step.member.previous_epoch) == (4, 3)
    assert not step.hand_over
    same = md.consumer_step(step.member, tps(0, 1), None, False)
    assert not same.send and same.member.epoch == 4 and not same.hand_over
    answer = md.consumer_answer(step.member, True, TOPICS.get, 250)
    assert answer.assignment == ((T_ID, (0, 1)),) and answer.member_epoch == 4
    assert md.consumer_answer(same.member, False, TOPICS.get, 250).assignment is None


def test_a_partition_leaving_a_member_stays_fenced_until_it_heartbeats_without_it() -> None:
    # The hand-over gave partition 1 to someone else: the member is answered without it first ...
    revoking = md.consumer_step(member(sent=tps(0, 1), owned=tps(0, 1), share=tps(0)), None, None, False)
    assert revoking.member.sent == tps(0) and revoking.send and not revoking.hand_over
    assert revoking.member.fenced() == tps(0, 1)  # ... and still may consume it: its znode is kept
    still = md.consumer_step(revoking.member, tps(0, 1), None, False)
    assert not still.hand_over and still.member.fenced() == tps(0, 1)
    released = md.consumer_step(still.member, tps(0), None, False)
    assert released.hand_over and released.member.fenced() == tps(0)  # now the fence may move


def test_a_heartbeat_sent_before_the_answer_that_took_a_partition_does_not_release_it() -> None:
    # Sent {0, 1}, the member has taken only 0 so far; the hand-over now gives 1 elsewhere.
    racing = md.consumer_step(member(sent=tps(0, 1), owned=tps(0), share=tps(0)), tps(0), None, False)
    assert racing.member.fenced() == tps(0, 1) and not racing.hand_over  # it may take 1 before it reads this
    after = md.consumer_step(racing.member, tps(0), None, False)
    assert after.member.fenced() == tps(0) and after.hand_over


def test_a_full_request_is_answered_with_the_assignment_and_a_new_subscription_hands_over() -> None:
    m = member(sent=tps(0), owned=tps(0), share=tps(0))
    assert md.consumer_step(m, tps(0), None, True).send
    moved = md.consumer_step(m, tps(0), ("u", "t", "t"), False)
    assert moved.hand_over and moved.member.topics == ("t", "u")


# ------------------------------------------------------------------------------------ hand-over, rejoin, commit


def test_shares_follow_the_hand_over_and_the_bridge_is_handed_what_each_may_consume() -> None:
    a = member(sent=tps(0), owned=tps(0, 1))
    members = {"m": a, "x": md.MixedConsumer("x", "cx", ("t",))}
    shared = md.shares_from(members, {"m": {"t": (0, 3)}})
    assert shared["m"].share == tps(0, 3) and shared["x"] == members["x"]
    listed, owned = md.bridge_members(shared)
    assert listed == (("m", "client", ("t",)), ("x", "cx", ("t",)))
    assert owned == {"m": (tp(0), tp(1)), "x": ()}
    # Sent but not yet reported as owned: the member may be consuming it already.
    _, sent_only = md.bridge_members({"m": member(sent=tps(2))})
    assert sent_only == {"m": (tp(2),)}


def test_a_rejoining_member_owns_nothing_and_moves_its_epoch() -> None:
    new = md.rejoined(None, "m", "c", ("t",))
    assert (new.epoch, new.sent, new.owned) == (1, frozenset(), frozenset())
    back = md.rejoined(member(epoch=3, sent=tps(0), owned=tps(0), share=tps(0)), "m", "c2", ("t",))
    assert (back.epoch, back.previous_epoch, back.sent, back.owned, back.client_id) == (
        4,
        3,
        frozenset(),
        frozenset(),
        "c2",
    )


def test_commits_of_consumer_members_are_checked_by_epoch() -> None:
    members = {"m": member(epoch=3)}
    assert md.consumer_commit_check(members, "k1", 7) is None  # a classic member's: classic checks apply
    assert md.consumer_commit_check(members, "", -1) is None
    assert md.consumer_commit_check(members, "m", 3) is ErrorCode.NONE
    assert md.consumer_commit_check(members, "m", 2) is ErrorCode.NONE
    assert md.consumer_commit_check(members, "m", 1) is ErrorCode.STALE_MEMBER_EPOCH


def test_consumer_members_hand_over_alone_once_no_classic_member_is_left() -> None:
    from zkcoord.group.model import ClassicGroup

    empty = ClassicGroup("g", 0)
    assert md.consumers_hand_over_alone(empty, ("m",))
    assert md.consumers_hand_over_alone(None, ("m",))
    assert not md.consumers_hand_over_alone(empty, ())  # nobody to hand to
    with_classic = ClassicGroup("g", 0)
    with_classic.pending_members["k"] = 0
    assert not md.consumers_hand_over_alone(with_classic, ("k", "m"))  # k's SyncGroup hands over


# ------------------------------------------------------------------------- after a load (restart, coordinator move)


def lookup(name: str) -> tuple[str, int] | None:
    return TOPICS.get(name)


def test_registered_members_the_load_does_not_know_are_restored_fenced() -> None:
    adopted: dict[str, md.AdoptedMember] = {
        "k": ("kc", ("t",), (tp(0),), "classic"),  # a classic member of the loaded group: its records hold it
        "n": ("nc", ("t",), (tp(1), tp(2)), "consumer"),  # a consumer-protocol member: no record holds it
        "old": ("oc", ("t",), (tp(3),), "consumer"),  # one this service already knows (it joined meanwhile)
        "idle": ("ic", ("t",), (), "consumer"),  # holds nothing, nothing to fence: released, rejoins if alive
    }
    restored = md.restored_consumers(["k"], {"old": replace(member(), member_id="old")}, adopted)
    assert sorted(restored) == ["n"]
    n = restored["n"]
    assert n.restored and n.client_id == "nc" and n.topics == ("t",)
    # Everything its znodes hold counts as sent and owned: the bridge keeps those znodes and withholds them.
    assert n.fenced() == n.share == tps(1, 2)
    members, owned = md.bridge_members(restored)
    assert members == (("n", "nc", ("t",)),) and owned == {"n": (tp(1), tp(2))}


def test_a_classic_member_that_left_before_the_crash_is_not_restored_as_a_consumer_member() -> None:
    """The registration says which kind of member wrote it: a classic member missing from the loaded group
    left (the classic records hold every classic member), so its partitions are released at once instead of
    waiting one consumer session fenced for a member that will never heartbeat. A registration by an older
    zkcoord says nothing: it is restored as before (it may be a consumer-protocol member still consuming)."""
    adopted: dict[str, md.AdoptedMember] = {
        "left": ("kc", ("t",), (tp(0),), "classic"),
        "n": ("nc", ("t",), (tp(1),), "consumer"),
        "unmarked": ("uc", ("t",), (tp(2),), None),
    }
    restored = md.restored_consumers([], {}, adopted)
    assert sorted(restored) == ["n", "unmarked"]
    assert restored["unmarked"].fenced() == tps(2)
    assert md.restored_consumers(["unmarked"], {}, adopted).keys() == {"n"}  # unmarked but in the records


def test_a_restored_member_resumes_at_its_first_heartbeat_whatever_its_epoch() -> None:
    (n,) = md.restored_consumers([], {}, {"m": ("c", ("t",), (tp(1),), "consumer")}).values()
    members = {"m": n}
    assert md.consumer_heartbeat_refusal(members, hb(epoch=17)) is None  # no epoch is known for it yet
    assert md.consumer_commit_check(members, "m", 17) == ErrorCode.NONE  # its commits before that heartbeat
    resumed = md.resumed(n, 17)
    assert (resumed.epoch, resumed.previous_epoch, resumed.restored) == (18, 17, False)
    step = md.consumer_step(resumed, None, None, True)
    answer = md.consumer_answer(step.member, step.send, lookup, 250)
    assert answer.member_epoch == 18 and answer.assignment == ((T_ID, (1,)),)
    assert not step.hand_over  # nothing was given up
    # From then on it is an ordinary member: a foreign epoch is fenced again.
    after = {"m": step.member}
    fenced = md.consumer_heartbeat_refusal(after, hb(epoch=5))
    assert fenced is not None and fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert md.consumer_commit_check(after, "m", 5) == ErrorCode.STALE_MEMBER_EPOCH


def test_a_restored_member_rejoining_is_an_ordinary_member_again() -> None:
    (n,) = md.restored_consumers([], {}, {"m": ("c", ("t",), (tp(1),), "consumer")}).values()
    again = md.rejoined(n, "m", "c", ("t",))
    assert not again.restored and again.fenced() == frozenset() and again.share == tps(1)


def test_describe_shows_consumer_and_legacy_members_with_what_they_hold() -> None:
    consumers = {"m": member(epoch=4, sent=tps(0), owned=tps(0), share=tps(0, 1))}
    legacy = {"g_host-1-abc": (("t",), (tp(2), tp(3)))}
    d = md.describe_mixed("g", None, consumers, legacy, lookup)
    assert (d.error_code, d.group_id, d.group_state, d.assignor_name) == (
        0,
        "g",
        "Reconciling",
        "zkcoord-legacy",
    )
    m, leg = d.members
    assert (m.member_id, m.member_epoch, m.client_id) == ("m", 4, "client")
    assert [(a.topic_id, a.topic_name, a.partitions) for a in m.assignment] == [(T_ID, "t", (0,))]
    assert [a.partitions for a in m.target_assignment] == [(0, 1)]  # the share it is still being sent
    assert (leg.member_id, leg.client_id, leg.member_epoch) == ("g_host-1-abc", "g_host-1-abc", -1)
    assert [a.partitions for a in leg.assignment] == [a.partitions for a in leg.target_assignment] == [(2, 3)]
    settled = {"m": member(epoch=4, sent=tps(0, 1), owned=tps(0, 1), share=tps(0, 1))}
    assert md.describe_mixed("g", None, settled, legacy, lookup).group_state == "Stable"
    assert md.describe_mixed("g", None, {}, {}, lookup).group_state == "Empty"
    gone = md.describe_mixed("g", None, {}, {"l": (("gone",), (TopicPartition("gone", 0),))}, lookup)
    assert gone.members[0].assignment == ()  # a topic the lookup no longer knows is left out
