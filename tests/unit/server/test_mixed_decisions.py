"""The group service's mixed-group decisions (zkcoord.server.mixed_decisions), on classic groups the real handlers
built (the pure test driver), and the typed answers of the coordinator runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.bridge.mixed_policy import MixedGroupRefused
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    SyncGroupRequest,
)
from zkcoord.group.model import ClassicGroup, CoordinatorState
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import OffsetCommitValue
from zkcoord.server import mixed_decisions as md
from zkcoord.server.coordinator_runtime import answer_as, refusal
from zkcoord.topic_partition import TopicPartition


def consumer_subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


SUB = consumer_subscription("t")


@dataclass
class Driver:
    """The pure handlers with a fixed clock: answers by token, timers fired on demand."""

    st: CoordinatorState = field(
        default_factory=lambda: CoordinatorState(GroupConfig(group_initial_rebalance_delay_ms=0))
    )
    now: int = 1_000_000
    token: int = 0
    answers: dict[int, object] = field(default_factory=dict)
    timers: dict[TimerKey, int] = field(default_factory=dict)

    def apply(self, result: Result) -> None:
        self.answers.update(result.responses)
        for op in result.timers:
            if isinstance(op, Cancel):
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms

    def fire_due(self) -> None:
        while due := sorted((d, k.kind.value, k) for k, d in self.timers.items() if d <= self.now):
            key = due[0][2]
            del self.timers[key]
            self.apply(h.on_timer(self.st, key, self.now))

    def join(
        self,
        member_id: str = "",
        *,
        client_id: str = "c",
        session: int = 10_000,
        rebalance: int = 30_000,
        protocols: tuple[tuple[str, bytes], ...] = (("range", SUB),),
    ) -> int:
        self.token += 1
        req = JoinGroupRequest(5, "g", session, rebalance, member_id, None, "consumer", protocols,
                               client_id=client_id)  # fmt: skip
        self.apply(h.handle_join(self.st, req, self.now, self.token, f"u{self.token}"))
        return self.token

    def jr(self, token: int) -> JoinGroupResponse:
        answer = self.answers[token]
        assert isinstance(answer, JoinGroupResponse), answer
        return answer

    def join_new(self, **kw: object) -> int:
        """JoinGroup as a v4+ client does it: the MEMBER_ID_REQUIRED round trip, then the real join."""
        first = self.jr(self.join(**kw))  # type: ignore[arg-type]
        return self.join(first.member_id, **kw)  # type: ignore[arg-type]

    def sync(self, member: str, generation: int, assignments: tuple[tuple[str, bytes], ...]) -> None:
        self.token += 1
        self.apply(h.handle_sync(self.st, SyncGroupRequest(5, "g", generation, member, None, None, None, assignments),
                                 self.now, self.token))  # fmt: skip


def joining(session: int = 10_000, rebalance: int = 30_000) -> tuple[Driver, str, str]:
    """Two members joined with range, the join completed: (driver, leader, follower), group CompletingRebalance."""
    d = Driver()
    tokens = [d.join_new(client_id=f"c{i}", session=session, rebalance=rebalance) for i in range(2)]
    d.fire_due()
    leader = d.jr(tokens[0]).leader
    ids = [d.jr(t).member_id for t in tokens]
    assert d.st.groups["g"].state is GroupState.COMPLETING_REBALANCE
    return d, leader, next(m for m in ids if m != leader)


def sync_req(member: str, generation: int) -> SyncGroupRequest:
    return SyncGroupRequest(5, "g", generation, member, None, None, None, ())


def commit_req(generation: int, member: str) -> OffsetCommitRequest:
    parts = (OffsetCommitRequestPartition(0, 5), OffsetCommitRequestPartition(1, 6))
    return OffsetCommitRequest(7, "g", generation, member, (OffsetCommitRequestTopic("t", parts),))


# ------------------------------------------------------------------------------------------------- JoinGroup


def test_join_reads_the_topics_of_the_first_usable_protocol() -> None:
    protocols = (("sticky", consumer_subscription("other")), ("range", SUB), ("roundrobin", b"\x00"))
    assert md.join_topics(protocols, ("range", "roundrobin")) == ("t",)
    assert md.join_topics(protocols, ("roundrobin",)) == ()  # malformed metadata: no topics, not an exception


def test_join_keeps_the_usable_protocols_in_the_members_order() -> None:
    req = JoinGroupRequest(5, "g", 10_000, 30_000, "", None, "consumer",
                           (("roundrobin", b"a"), ("sticky", b"b"), ("range", b"c")))  # fmt: skip
    assert md.kept_protocols(req, ("range", "roundrobin")) == (("roundrobin", b"a"), ("range", b"c"))


def test_a_member_that_disagrees_is_refused_fatally_and_a_zookeeper_failure_retriably() -> None:
    assert md.join_refusal(MixedGroupRefused("strategies differ")) is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert md.join_refusal(ConnectionError("zookeeper away")) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_a_known_member_of_a_rebalancing_group_registers_early_and_nothing_else_does() -> None:
    d = Driver()
    first = d.jr(d.join()).member_id  # MEMBER_ID_REQUIRED: pending now
    group = d.st.groups["g"]
    assert first in group.pending_members and group.state is GroupState.EMPTY
    assert not md.registers_early(group, first)  # an Empty group's first rebalance waits: not yet
    d2, leader, _ = joining()
    g2 = d2.st.groups["g"]
    newcomer = d2.jr(d2.join()).member_id
    assert newcomer in g2.pending_members and g2.state is not GroupState.EMPTY
    assert md.registers_early(g2, newcomer)
    assert not md.registers_early(g2, "")  # the first JoinGroup of a member: no id yet
    assert not md.registers_early(g2, leader)  # a member, not a pending one
    assert not md.registers_early(None, newcomer)
    g2.initial_join = (3000, 3000)  # still inside group.initial.rebalance.delay.ms
    assert not md.registers_early(g2, newcomer)


def test_a_newcomer_to_a_cooperative_group_registers_at_the_leaders_sync_not_early() -> None:
    # Every member and the joiner KIP-429: nobody revokes during the round, so the legacy members consume the
    # joiner's share until the SyncGroup's hand-over waits for it (make before break).
    d, leader, follower = joining()
    group = d.st.groups["g"]
    newcomer = d.jr(d.join()).member_id
    both = {leader: "cooperative-sticky", follower: "cooperative-sticky"}
    assert not md.registers_early(group, newcomer, both, "cooperative-sticky")
    assert md.keeps_consuming(group, both, "cooperative-sticky")
    # One eager party (the joiner, a member, or a member not answered yet) and the round revokes: early, as before.
    assert md.registers_early(group, newcomer, both, "range")
    assert md.registers_early(
        group, newcomer, {leader: "cooperative-sticky", follower: "range"}, "cooperative-sticky"
    )
    assert md.registers_early(group, newcomer, {leader: "cooperative-sticky"}, "cooperative-sticky")
    assert md.registers_early(group, newcomer)


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(
        st.sampled_from(["range", "roundrobin", "cooperative-sticky", "RoundRobinAssigner", None]),
        min_size=2,
        max_size=2,
    ),
    joining_as=st.sampled_from(["range", "cooperative-sticky", "sticky", None]),
)
def test_early_registration_exactly_when_the_round_revokes_something(names, joining_as) -> None:
    d, leader, follower = joining()
    group = d.st.groups["g"]
    newcomer = d.jr(d.join()).member_id
    answered = {m: n for m, n in zip((leader, follower), names, strict=True) if n is not None}
    everyone_cooperative = joining_as == "cooperative-sticky" and all(
        n == "cooperative-sticky" for n in names
    )
    assert md.keeps_consuming(group, answered, joining_as) is everyone_cooperative
    assert md.registers_early(group, newcomer, answered, joining_as) is not everyone_cooperative


# ------------------------------------------------------------------------------------------------- SyncGroup


def test_only_the_leaders_sync_of_the_completing_generation_is_handed_over() -> None:
    d, leader, follower = joining(session=10_000, rebalance=30_000)
    group = d.st.groups["g"]
    gen = group.generation
    call = md.hand_over_call(group, sync_req(leader, gen))
    assert call is not None
    assert call.protocol == "range"
    assert call.members == tuple((m.member_id, m.client_id, ("t",)) for m in group.members.values())
    assert call.subscriptions == {}  # eager members: nothing they own is kept
    assert call.timeout_ms == 5_000  # half the shortest session, below the rebalance timeout
    assert md.hand_over_call(group, sync_req(follower, gen)) is None
    assert md.hand_over_call(group, sync_req(leader, gen - 1)) is None
    assert md.hand_over_call(None, sync_req(leader, gen)) is None
    d.sync(leader, gen, ((leader, b""), (follower, b"")))
    assert group.state is GroupState.STABLE
    assert md.hand_over_call(group, sync_req(leader, gen)) is None


def test_the_hand_over_wait_is_half_the_shorter_timeout_and_at_least_its_floor() -> None:
    d, leader, _ = joining(session=60_000, rebalance=8_000)
    group = d.st.groups["g"]
    call = md.hand_over_call(group, sync_req(leader, group.generation))
    assert call is not None and call.timeout_ms == 4_000  # the rebalance timeout is the shorter here
    d, leader, _ = joining(session=6_000, rebalance=900)  # half of 900 is below the floor
    group = d.st.groups["g"]
    call = md.hand_over_call(group, sync_req(leader, group.generation))
    assert call is not None and call.timeout_ms == md.MIN_HAND_OVER_MS


# ------------------------------------------------------------------------ one group, each member its own name

KAFKAJS = (("RoundRobinAssigner", consumer_subscription("t")),)
SARAMA = (("range", SUB),)
COOPERATIVE = (("cooperative-sticky", consumer_subscription("t")),)


def mixed_join(*offers: tuple[tuple[str, bytes], ...]) -> tuple[Driver, list[JoinGroupResponse]]:
    """Members offering `offers` (as their clients send them) joined through `core_protocols`, the join
    completed: the core's JoinGroup answers, in the order of `offers`."""
    d = Driver()
    tokens = [d.join_new(client_id=f"c{i}", protocols=md.core_protocols(o)) for i, o in enumerate(offers)]
    d.fire_due()
    return d, [d.jr(t) for t in tokens]


def test_kafkajs_and_sarama_share_a_group_each_answered_in_its_own_name() -> None:
    d, answers = mixed_join(KAFKAJS, SARAMA)
    assert all(a.error_code == 0 for a in answers), answers
    assert {a.protocol_name for a in answers} == {"range"}  # sarama's name fixes the legacy algorithm
    assert [md.answered_name(o, "range") for o in (KAFKAJS, SARAMA)] == ["RoundRobinAssigner", "range"]
    group = d.st.groups["g"]
    # what the leader is sent of each member is that member's own subscription
    leader = next(a for a in answers if a.members)
    assert {m.metadata for m in leader.members} == {SUB}
    assert group.protocol_name == "range"


def test_members_of_other_names_only_follow_the_legacy_members_under_one_label() -> None:
    _, answers = mixed_join(KAFKAJS, COOPERATIVE)
    assert {a.protocol_name for a in answers} == {md.FOLLOW_PROTOCOL}  # what DescribeGroups shows
    assert md.answered_name(KAFKAJS, md.FOLLOW_PROTOCOL) == "RoundRobinAssigner"
    assert md.answered_name(COOPERATIVE, md.FOLLOW_PROTOCOL) == "cooperative-sticky"
    # a member preferring range but able to follow joins a group of followers in its other name
    both = (("range", SUB), ("cooperative-sticky", SUB))
    assert md.answered_name(both, md.FOLLOW_PROTOCOL) == "cooperative-sticky"
    assert md.answered_name(both, "range") == "range"
    assert md.answered_name(KAFKAJS, None) is None


def test_range_only_and_roundrobin_only_members_still_disagree() -> None:
    """The legacy members use one algorithm: a member naming only the other one is refused by the core's
    one-name rule, as before."""
    _, answers = mixed_join(SARAMA, (("roundrobin", SUB),))
    codes = sorted(a.error_code for a in answers)
    assert codes == [0, int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)], answers


def test_a_group_stored_under_a_members_own_name_stays_joinable() -> None:
    """A group formed before mixed names (its members joined by `cooperative-sticky` itself, as a reload restores
    them) admits a member whose protocols went through `core_protocols`, in the same name."""
    d = Driver()
    tokens = [d.join_new(client_id="old", protocols=COOPERATIVE)]
    d.fire_due()
    leader = d.jr(tokens[0]).member_id
    d.sync(leader, d.st.groups["g"].generation, ())
    assert d.st.groups["g"].state is GroupState.STABLE
    new = d.join_new(client_id="new", protocols=md.core_protocols(COOPERATIVE))
    assert new not in d.answers  # parked in the rebalance it started, not refused
    assert d.st.groups["g"].state is GroupState.PREPARING_REBALANCE
    old = d.join(leader, client_id="old", protocols=md.core_protocols(COOPERATIVE))  # rejoins, upgraded
    d.fire_due()
    assert [d.jr(t).error_code for t in (new, old)] == [0, 0]
    assert d.st.groups["g"].protocol_name == md.FOLLOW_PROTOCOL  # every member's name now goes by the label


def test_core_protocols_keep_each_metadata_and_name_the_follower_label_once() -> None:
    kept = (("roundrobin", b"r"), ("sticky", b"s"), ("cooperative-sticky", b"c"))
    assert md.core_protocols(kept) == (
        ("roundrobin", b"r"), (md.FOLLOW_PROTOCOL, b"s"), ("range", b"s"), ("sticky", b"s"),
        ("cooperative-sticky", b"c"),
    )  # fmt: skip
    assert md.core_protocols((("range", b"r"),)) == (("range", b"r"),)
    follow = ((md.FOLLOW_PROTOCOL, b"f"),)
    assert md.core_protocols(follow) == (*follow, *((s, b"f") for s in md.LEGACY_STRATEGIES))


def test_a_sync_names_the_members_own_protocol() -> None:
    assert md.sync_protocol_accepted("RoundRobinAssigner", "RoundRobinAssigner", "range")
    assert not md.sync_protocol_accepted(
        "range", "RoundRobinAssigner", "range"
    )  # not the name it was answered
    assert not md.sync_protocol_accepted("sticky", "RoundRobinAssigner", "range")
    # answered by a coordinator before this one: the group's name, or a name of the kind answered per member
    assert md.sync_protocol_accepted("range", None, "range")
    assert md.sync_protocol_accepted("RoundRobinAssigner", None, "range")
    assert not md.sync_protocol_accepted("roundrobin", None, "range")


def test_the_hand_over_treats_each_member_by_its_own_protocol() -> None:
    """A cooperative-sticky member beside an eager one: only its subscription (its owned partitions) is handed
    on, so it keeps what stays; the eager member's is not, whatever its subscription says."""
    d, answers = mixed_join(COOPERATIVE, SARAMA)
    group = d.st.groups["g"]
    assert group.protocol_name == "range"
    names = {
        a.member_id: md.answered_name(o, group.protocol_name)
        for a, o in zip(answers, (COOPERATIVE, SARAMA), strict=True)
    }
    coop = next(m for m, n in names.items() if n == "cooperative-sticky")
    call = md.hand_over_call(group, sync_req(group.leader_id or "", group.generation), names)
    assert call is not None and call.protocol == "range"
    assert call.subscriptions == {coop: COOPERATIVE[0][1]}
    # without the answered names (not told), every member is taken by the group's name: eager here
    bare = md.hand_over_call(group, sync_req(group.leader_id or "", group.generation))
    assert bare is not None and bare.subscriptions == {}


def test_the_server_and_the_bridge_know_the_same_cooperative_names() -> None:
    from zkcoord.bridge import mixed_policy

    assert md.COOPERATIVE_PROTOCOLS == mixed_policy.COOPERATIVE_PROTOCOLS
    assert md.LEGACY_STRATEGIES == mixed_policy.LEGACY_STRATEGIES
    assert (md.CLASSIC_KIND, md.CONSUMER_KIND) == mixed_policy.KINDS


# ---------------------------------------------------------------------------------------------- OffsetCommit


def test_only_a_memberless_generation_minus_one_commit_into_a_live_group_may_be_a_legacy_members() -> None:
    d, leader, _ = joining()
    group = d.st.groups["g"]
    expected = (TopicPartition("t", 0), TopicPartition("t", 1))
    assert md.legacy_commit_partitions(group, commit_req(-1, "")) == expected
    assert md.legacy_commit_partitions(group, commit_req(group.generation, leader)) is None
    assert md.legacy_commit_partitions(group, commit_req(-1, leader)) is None
    assert md.legacy_commit_partitions(None, commit_req(-1, "")) is None
    assert md.legacy_commit_partitions(ClassicGroup("g", 0), commit_req(-1, "")) is None  # Empty


# ------------------------------------------------------------------------------------- what the bridge is told


def test_the_bridge_is_told_members_and_pending_members_and_the_watched_topics() -> None:
    d, leader, follower = joining()
    group = d.st.groups["g"]
    newcomer = d.jr(d.join()).member_id
    assert md.present_members(group) == (leader, follower, newcomer)
    assert md.present_members(None) == ()
    assert md.watched_topics(group) == ["t"]
    assert md.watched_topics(ClassicGroup("g", 0)) is None
    assert md.watched_topics(None) is None


def test_the_mirror_gets_real_offsets_in_partition_order_of_broker_managed_groups_only() -> None:
    def value(offset: int) -> OffsetCommitValue:
        return OffsetCommitValue(offset, -1, "", 0)

    d, _, _ = joining()  # "g": a broker-managed group
    d.st.groups["solo"] = ClassicGroup("solo", 0)  # a standalone committer: generation 0, no protocol type
    d.st.view.offsets["solo"] = {TopicPartition("t", 0): value(3)}
    d.st.view.offsets["g"] = {TopicPartition("t", 1): value(7), TopicPartition("t", 0): value(-1),
                              TopicPartition("a", 4): value(2)}  # fmt: skip
    d.st.view.offsets["gone"] = {TopicPartition("t", 0): value(1)}  # offsets, but no live group
    assert md.remirrored_groups(d.st) == [("g", {TopicPartition("a", 4): 2, TopicPartition("t", 1): 7})]
    assert list(md.committed_offsets(d.st.view.offsets["g"])) == [
        TopicPartition("a", 4),
        TopicPartition("t", 1),
    ]


def test_a_consumer_protocol_member_is_refused_from_an_edge_without_topic_lookup_saying_why() -> None:
    resp = md.consumer_protocol_refusal("orders")
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert resp.error_message is not None and "orders" in resp.error_message
    assert "group.protocol=classic" in resp.error_message
    assert (
        "yet" not in resp.error_message
    )  # they are served: only an edge built without a lookup refuses them


# ------------------------------------------------------------------------------------- the runtime's typing


def test_answers_are_checked_against_the_type_their_request_is_answered_with() -> None:
    hb = HeartbeatRequest(4, "g", 1, "m", None)
    assert refusal(hb, HeartbeatResponse, ErrorCode.NOT_COORDINATOR) == HeartbeatResponse(
        int(ErrorCode.NOT_COORDINATOR)
    )
    consumer = ConsumerGroupHeartbeatRequest(0, "g", "m", 1)
    assert refusal(consumer, ConsumerGroupHeartbeatResponse, ErrorCode.NOT_COORDINATOR).error_code == int(
        ErrorCode.NOT_COORDINATOR
    )
    with pytest.raises(TypeError, match="expected a JoinGroupResponse"):
        answer_as(JoinGroupResponse, HeartbeatResponse(0))


NAMES = ("range", "roundrobin", "RoundRobinAssigner", "sticky", "cooperative-sticky", md.FOLLOW_PROTOCOL)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True).map(
            lambda names: tuple((n, n.encode()) for n in names)
        ),
        min_size=1,
        max_size=4,
    )
)
def test_whatever_the_core_picks_each_member_is_answered_a_name_it_offered(offers: list[Any]) -> None:
    """For any members' offers: the names the core sees for all of them have a common one exactly when no two
    members name only different legacy strategies; whichever common name the core picks, each member is
    answered one it offered, and a member not naming a picked range/roundrobin has another name to follow
    with; the metadata the core keeps under the pick is that of the name the member is answered in."""
    seen = [md.core_protocols(o) for o in offers]
    assert all(len({n for n, _ in s}) == len(s) for s in seen)  # no name twice
    common = set.intersection(*({n for n, _ in s} for s in seen))
    only = {frozenset(n for n, _ in o) for o in offers if all(n in md.LEGACY_STRATEGIES for n, _ in o)}
    fixed = set.intersection(*(set(s) for s in only)) if only else None
    assert bool(common) == (fixed is None or bool(fixed))
    for pick in common:
        for offer, s in zip(offers, seen, strict=True):
            name = md.answered_name(offer, pick)
            assert name in dict(offer)
            assert dict(s)[pick] == dict(offer)[name]
            if pick in md.LEGACY_STRATEGIES and name != pick:
                assert name not in md.LEGACY_STRATEGIES
