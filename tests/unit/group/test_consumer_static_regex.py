"""Static members and regular-expression subscriptions of consumer groups (KIP-848), as Kafka 4.x's
GroupMetadataManager answers them: a static member leaving with epoch -2 keeps its assignment for its session, a
new member id with its instance id takes its place without a rebalance, the refusals (UNRELEASED_INSTANCE_ID,
FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID) write nothing; regexes are checked (INVALID_REGULAR_EXPRESSION), resolved
against the topics, stored as ConsumerGroupRegularExpression records and resolved again when topics come and go.
A stateful property test mixes static restarts, regex members and topic creation: no partition is ever held twice,
and replay of the records (whole or compacted) equals the live groups."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from zkcoord.errors import ErrorCode as E
from zkcoord.group import handlers as h
from zkcoord.group.consumer import describe_consumer_group, tombstone_consumer_group
from zkcoord.group.consumer_model import MemberState
from zkcoord.group.consumer_regex import MAX_REGEX_CHARS, check, resolve
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import TimerKey, TimerKind
from zkcoord.records.consumer_groups import REGULAR_EXPRESSION, ConsumerRegexKey, RegexValue
from zkcoord.records.offsets import decode_record, encode_record

from .consumer_world import SESSION, T1, T2, World, _as_sets

REFRESH = 10_000  # GroupConfig's default group_consumer_regex_refresh_interval_ms
T3 = "33" * 16


def _static_pair() -> World:
    """a (static, instance i-a) and b (dynamic) share t1's four partitions, reconciled."""
    w = World()
    w.hb("a", 0, instance_id="i-a")
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})
    g = w.st.consumer_groups["g"]
    w.hb("a", 1, {t: set(ps) for t, ps in g.members["a"].assigned.items()})
    w.hb("b", 2, {})
    assert g.state_name() == "Stable"
    return w


# ----------------------------------------------------------------------------------------------- static members


def test_a_static_member_restarting_within_its_session_keeps_its_partitions_without_a_rebalance() -> None:
    w = _static_pair()
    g = w.st.consumer_groups["g"]
    held = {t: set(ps) for t, ps in g.members["a"].assigned.items()}
    epoch = g.group_epoch
    left = w.hb("a", -2, instance_id="i-a")
    assert (left.error_code, left.member_id, left.member_epoch) == (0, "a", -2)
    # Still in the group, still holding its partitions; no new group epoch, no target change.
    assert g.members["a"].member_epoch == -2 and _as_sets(g.members["a"].current_value().assigned) == held
    assert g.group_epoch == epoch
    w.advance(SESSION // 2)
    assert w.hb("b", 2, {t: set(ps) for t, ps in g.members["b"].assigned.items()}).error_code == 0
    assert "a" in g.members  # b's heartbeats do not take a's partitions
    # The restarted process joins under a new member id with the same instance id: it gets a's partitions at
    # once, at the same group epoch (Kafka's replaceMember).
    r = w.hb("a2", 0, instance_id="i-a")
    assert (r.error_code, r.member_epoch) == (0, epoch) and _as_sets(r.assignment) == held
    assert set(g.members) == {"a2", "b"} and g.group_epoch == epoch
    assert g.static_members == {"i-a": "a2"} and g.members["a2"].state is MemberState.STABLE
    # The old member id is fenced; its session timer finds no member when it fires.
    assert w.hb("a", 2, {}, instance_id="i-a").error_code == E.FENCED_INSTANCE_ID
    w.advance(SESSION)
    assert "a2" not in g.members  # a2 did not heartbeat since: its own session ran out
    assert w.replayed().consumer_groups == w.st.consumer_groups


def test_a_static_member_coming_back_under_its_own_member_id_gets_its_partitions_too() -> None:
    w = _static_pair()
    g = w.st.consumer_groups["g"]
    held, epoch = {t: set(ps) for t, ps in g.members["a"].assigned.items()}, g.group_epoch
    w.hb("a", -2, instance_id="i-a")
    r = w.hb("a", 0, instance_id="i-a")
    assert (r.error_code, r.member_epoch, _as_sets(r.assignment)) == (0, epoch, held)
    assert g.group_epoch == epoch and TimerKey(TimerKind.CONSUMER_SESSION, "g", "a") in w.timers
    assert w.replayed().consumer_groups == w.st.consumer_groups


def test_a_static_member_that_does_not_come_back_is_removed_at_its_session_timeout() -> None:
    w = _static_pair()
    g = w.st.consumer_groups["g"]
    b_owned = {t: set(ps) for t, ps in g.members["b"].assigned.items()}
    epoch = g.group_epoch
    w.hb("a", -2, instance_id="i-a")
    w.advance(SESSION - 1)
    r = w.hb("b", 2, b_owned)
    assert _as_sets(r.assignment or ()) in ({}, b_owned) and "a" in g.members
    w.advance(1)
    assert "a" not in g.members and g.group_epoch == epoch + 1 and g.static_members == {}
    r = w.hb("b", 2, b_owned)
    assert r.member_epoch == epoch + 1 and _as_sets(r.assignment) == {T1: {0, 1, 2, 3}}


def test_static_refusals_are_kafkas_and_write_nothing() -> None:
    w = _static_pair()
    before = len(w.records)
    r = w.hb("a2", 0, instance_id="i-a")  # a has not left
    assert r.error_code == E.UNRELEASED_INSTANCE_ID
    assert r.error_message == (
        "Static member a2 with instance id i-a cannot join the group because the instance id is owned by a member."
    )
    r = w.hb("x", 2, {}, instance_id="i-a")
    assert (r.error_code, r.error_message) == (
        E.FENCED_INSTANCE_ID,
        "Static member x with instance id i-a was fenced by member a.",
    )
    r = w.hb("a", 2, {}, instance_id="i-zz")
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, "Instance id i-zz is unknown.")
    assert w.hb("x", -2, instance_id="i-a").error_code == E.FENCED_INSTANCE_ID
    assert w.hb("a", -2, instance_id="i-zz").error_code == E.UNKNOWN_MEMBER_ID
    assert len(w.records) == before
    # A static member leaving for good (epoch -1) is removed at once.
    assert w.hb("a", -1, instance_id="i-a").error_code == 0
    assert "a" not in w.st.consumer_groups["g"].members


def test_a_static_leave_gives_up_what_it_was_revoking_and_describe_shows_the_instance() -> None:
    w = World()
    w.hb("a", 0, instance_id="i-a")
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # a must revoke two partitions: its rebalance timer runs
    g = w.st.consumer_groups["g"]
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    w.hb("a", -2, instance_id="i-a")
    a = g.members["a"]
    assert a.pending_revocation == {} and TimerKey(TimerKind.CONSUMER_REBALANCE, "g", "a") not in w.timers
    assert len(_as_sets(w.hb("b", 2, {}).assignment)[T1]) == 2  # b gets them without waiting
    described = {m.member_id: m for m in describe_consumer_group(w.st, "g").members}
    assert (described["a"].instance_id, described["a"].member_epoch) == ("i-a", -2)
    assert described["b"].instance_id is None
    assert w.replayed().consumer_groups == w.st.consumer_groups


def test_a_hosted_classic_static_member_is_replaced_by_a_new_join_with_its_instance_id() -> None:
    """Kafka's classic protocol path: a JoinGroup with the instance id and no member id replaces whichever member
    holds it (no UNRELEASED_INSTANCE_ID wait), inheriting its assignment; the old id is gone, a known id that
    the instance does not name is fenced."""
    from zkcoord.group.messages import JoinGroupResponse, SyncGroupResponse

    from .test_consumer_migration import World as MigrationWorld

    w = MigrationWorld()
    w.hb("c", 0)  # a consumer-protocol member makes "g" a consumer group with all of t's partitions
    first = w.answers[w.join("", instance="i-k")]
    assert isinstance(first, JoinGroupResponse) and first.error_code == 0, first
    g = w.st.consumer_groups["g"]
    old_id = first.member_id
    assert g.static_members == {"i-k": old_id} and g.members[old_id].metadata.classic is not None
    epoch, old_target = g.group_epoch, dict(g.target[old_id])
    second = w.answers[w.join("", instance="i-k")]  # the process restarted before leaving
    assert isinstance(second, JoinGroupResponse) and second.error_code == 0, second
    new_id = second.member_id
    assert new_id != old_id and old_id not in g.members and g.static_members == {"i-k": new_id}
    assert g.group_epoch == epoch and g.target[new_id] == old_target  # no rebalance: its target carried over
    sr = w.answers[w.sync(new_id, second.generation_id, name="range")]
    assert isinstance(sr, SyncGroupResponse) and sr.error_code == 0
    fenced = w.answers[w.join(old_id, instance="i-k")]
    assert isinstance(fenced, JoinGroupResponse) and fenced.error_code == E.FENCED_INSTANCE_ID
    unknown = w.answers[w.join("someone", instance="i-zz")]
    assert isinstance(unknown, JoinGroupResponse) and unknown.error_code == E.UNKNOWN_MEMBER_ID
    w.check_replay()


# ------------------------------------------------------------------------------------------------------- regexes


def test_unsafe_or_invalid_expressions_are_refused_with_kafkas_error_and_nothing_is_written() -> None:
    w = World()
    unsupported = "Not supported (RE2 syntax, as Kafka's RE2J): "
    cases = {  # Kafka's message with RE2J's description; a hint where the feature is one RE2 leaves out
        r"(a)\1": f"invalid escape sequence. {unsupported}backreferences.",
        "t(?=1)": f"invalid or unsupported Perl syntax. {unsupported}lookahead and lookbehind.",
        "(?<!x)t": f"invalid or unsupported Perl syntax. {unsupported}lookahead and lookbehind.",
        "t++": f"invalid nested repetition operator. {unsupported}atomic groups and possessive quantifiers.",
        "[a-": "missing closing ].",
        "t{1001}": "invalid repeat count.",
        "(.{100}){100}": "invalid repeat count.",  # nested counts multiply: RE2 bounds the program's size
        "*t": "missing argument to repetition operator.",
    }
    for regex, why in cases.items():
        r = w.hb("a", 0, topics=None, subscribed_topic_regex=regex)
        assert (r.error_code, r.error_message) == (
            E.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}",
        )
    long = "t" * (MAX_REGEX_CHARS + 1)
    r = w.hb("a", 0, topics=None, subscribed_topic_regex=long)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION and "at most 1024" in (r.error_message or "")
    r = w.hb("a", 0, topics=None)
    assert (
        r.error_message
        == "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    )
    assert w.records == [] and w.st.consumer_groups == {}


def test_resolution_is_a_full_match_in_linear_time() -> None:
    assert check("^prefix-.*") is None
    assert resolve("^prefix-.*", ["prefix-b", "x-prefix-a", "prefix-a", "prefix"]) == ("prefix-a", "prefix-b")
    assert resolve("t[12]", ["t1", "t12", "t2"]) == ("t1", "t2")  # whole names only (Java's matches())
    # The classic catastrophic pattern on the longest topic name Kafka allows: RE2 does not backtrack.
    names = ["a" * 248 + "!"] * 50 + ["x" * n for n in range(249)]
    assert resolve("(a+)+$", names) == () and resolve("(x+x+)+y", names) == ()


def test_a_regex_member_gets_the_matching_topics_and_a_new_topic_after_the_refresh_interval() -> None:
    w = World()
    w.topics = {"t-1": (T1, 2), "other": (T2, 2)}
    r = w.hb("a", 0, topics=None, subscribed_topic_regex="^t-.*")
    assert _as_sets(r.assignment) == {T1: {0, 1}}
    g = w.st.consumer_groups["g"]
    assert g.regexes == {"^t-.*": RegexValue(("t-1",), 0, w.now)}
    key = ConsumerRegexKey(REGULAR_EXPRESSION, "g", "^t-.*")
    assert (key, RegexValue(("t-1",), 0, w.now)) in w.records
    w.topics["t-3"] = (T3, 1)  # created while the member runs
    w.advance(REFRESH - 1)
    epoch = g.group_epoch
    assert w.hb("a", epoch, {T1: {0, 1}}).assignment is None  # not resolved again yet
    w.advance(1)
    r = w.hb("a", epoch, {T1: {0, 1}})
    assert g.group_epoch == epoch + 1 and _as_sets(r.assignment) == {T1: {0, 1}, T3: {0}}
    assert g.regexes["^t-.*"].topics == ("t-1", "t-3")
    # A deleted topic leaves the resolution (and the assignment) at the next refresh.
    del w.topics["t-1"]
    w.advance(REFRESH)
    r = w.hb("a", epoch + 1, {T1: {0, 1}, T3: {0}})
    assert g.regexes["^t-.*"].topics == ("t-3",) and _as_sets(r.assignment) == {T3: {0}}
    assert w.replayed().consumer_groups == w.st.consumer_groups


def test_members_share_a_resolution_and_the_last_one_leaving_tombstones_it() -> None:
    w = World()
    w.topics = {"t-1": (T1, 4), "t-2": (T2, 2)}
    w.hb("a", 0, topics=None, subscribed_topic_regex="t-.*")
    w.hb("b", 0, topics=("t-2",), subscribed_topic_regex="t-.*")  # names and a regex: the union
    g = w.st.consumer_groups["g"]
    assert g.regex_subscribers == {"t-.*": 2} and len(g.regexes) == 1
    regex_records = [r for r in w.records if isinstance(r[0], ConsumerRegexKey)]
    assert len(regex_records) == 1  # b reused a's resolution
    # b moves to topic names only ("" clears the expression), then a leaves: the resolution is tombstoned.
    w.hb("b", g.members["b"].member_epoch, None, subscribed_topic_regex="", topics=("t-2",))
    assert g.regex_subscribers == {"t-.*": 1} and g.members["b"].metadata.subscribed_topic_regex is None
    w.hb("a", -1)
    # Kafka's member removal order, the expression's tombstone after the member's, before the new group epoch.
    assert g.regexes == {} and w.records[-2] == (ConsumerRegexKey(REGULAR_EXPRESSION, "g", "t-.*"), None)
    assert w.replayed().consumer_groups == w.st.consumer_groups
    # A deleted group takes its resolutions with it.
    w.hb("c", 0, topics=None, subscribed_topic_regex="t-1")
    w.hb("b", -1)
    w.hb("c", -1)
    w.records.extend(tombstone_consumer_group(w.st, "g"))
    assert "g" not in w.st.consumer_groups and w.replayed().consumer_groups == {}


# ------------------------------------------------------------------------------------------ stateful property


@dataclass
class Client:
    member_id: str = ""
    epoch: int = 0
    holding: dict[str, set[int]] = field(default_factory=dict)
    kept: dict[str, set[int]] = field(default_factory=dict)
    last_ok: int = 0
    joined: bool = False
    away: bool = False  # a static member that left with epoch -2 and has not come back yet
    incarnation: int = 0


CLIENTS = ("s0", "s1", "r0", "d0")  # s*: static members; r0: subscribes with a regex; d0: dynamic, by name


class StaticRegexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = World()
        self.w.topics = {"t-1": (T1, 4), "t-2": (T2, 2)}
        self.clients = {c: Client() for c in CLIENTS}

    def _kw(self, c: str) -> dict[str, object]:
        kw: dict[str, object] = {}
        if c.startswith("s"):
            kw["instance_id"] = f"i-{c}"
        if c == "r0":
            kw["topics"] = None
            kw["subscribed_topic_regex"] = "^t-.*"
        return kw

    def _answer(self, c: str, r: object) -> None:
        from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse

        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        client = self.clients[c]
        if r.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self.clients[c] = Client(incarnation=client.incarnation)
            return
        if r.error_code == E.UNRELEASED_INSTANCE_ID:
            return
        assert r.error_code == 0, r
        client.epoch, client.last_ok, client.joined = r.member_epoch, self.w.now, True
        if r.assignment is not None:
            new = _as_sets(r.assignment)
            for t, ps in new.items():
                client.holding.setdefault(t, set()).update(ps)
            client.kept = new

    @initialize()
    def everyone_joins(self) -> None:
        for c in CLIENTS:
            self.join(c)

    @rule(c=st.sampled_from(CLIENTS))
    def join(self, c: str) -> None:
        client = self.clients[c]
        if client.joined and not client.away:
            return
        # A static member's process restarts under a new member id (while it was away, its partitions stayed
        # with it: `holding` kept them in the invariant); the others join under a fresh id too.
        fresh = Client(member_id=f"{c}.{client.incarnation + 1}", incarnation=client.incarnation + 1)
        self.clients[c] = fresh
        kw = self._kw(c)
        join_kw = {k: v for k, v in kw.items() if k != "topics"}
        topics = kw.get("topics", ("t-1",))
        r = self.w.hb(fresh.member_id, 0, topics=topics, **join_kw)
        if r.error_code:  # UNRELEASED_INSTANCE_ID: its previous incarnation is still in the group, not left
            assert r.error_code == E.UNRELEASED_INSTANCE_ID and c.startswith("s"), r
            self.clients[c] = client  # unchanged: tries again later
            return
        self._answer(c, r)

    @rule(c=st.sampled_from(CLIENTS))
    def heartbeat(self, c: str) -> None:
        client = self.clients[c]
        if not client.joined or client.away:
            return
        client.holding = {t: set(ps) for t, ps in client.kept.items()}
        kw = {k: v for k, v in self._kw(c).items() if k == "instance_id"}
        self._answer(c, self.w.hb(client.member_id, client.epoch, client.kept, **kw))

    @rule(c=st.sampled_from(("s0", "s1")))
    def static_leave(self, c: str) -> None:
        client = self.clients[c]
        if client.joined and not client.away:
            r = self.w.hb(client.member_id, -2, instance_id=f"i-{c}")
            assert r.error_code in (0, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID)
            client.holding = {t: set(ps) for t, ps in client.kept.items()}  # stops consuming, keeps its claim
            client.away = r.error_code == 0
            if not client.away:
                self.clients[c] = Client(incarnation=client.incarnation)

    @rule(c=st.sampled_from(CLIENTS))
    def leave(self, c: str) -> None:
        client = self.clients[c]
        if client.joined and not client.away:
            self.clients[c] = Client(incarnation=client.incarnation)
            kw = {k: v for k, v in self._kw(c).items() if k == "instance_id"}
            assert self.w.hb(client.member_id, -1, **kw).error_code in (0, E.UNKNOWN_MEMBER_ID)

    @rule(ms=st.sampled_from((1_000, 5_000, REFRESH, 20_000, SESSION)))
    def advance(self, ms: int) -> None:
        self.w.now += ms
        g = self.w.st.consumer_groups.get("g")
        for c, client in self.clients.items():
            gone = client.joined and (g is None or client.member_id not in g.members)
            if client.joined and (self.w.now - client.last_ok >= SESSION or gone):
                self.clients[c] = Client(incarnation=client.incarnation)  # session lapsed: partitions lost
        self.w.now -= ms
        self.w.advance(ms)
        g = self.w.st.consumer_groups.get("g")
        for c, client in self.clients.items():
            if client.joined and (g is None or client.member_id not in g.members):
                self.clients[c] = Client(incarnation=client.incarnation)

    @rule(n=st.integers(3, 5))
    def create_topic(self, n: int) -> None:
        self.w.topics.setdefault(f"t-{n}", (f"{n}{n}" * 16, 2))

    @invariant()
    def no_partition_is_held_twice(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for c, client in sorted(self.clients.items()):
            for t, ps in client.holding.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} held by {seen[(t, p)]} and {c}"
                    seen[(t, p)] = c
        g = self.w.st.consumer_groups.get("g")
        if g is not None:
            assert g.static_members == {
                m.metadata.instance_id: mid for mid, m in g.members.items() if m.metadata.instance_id
            }

    @invariant()
    def replay_whole_or_compacted_equals_live_state(self) -> None:
        assert self.w.replayed().consumer_groups == self.w.st.consumer_groups
        encoded = [encode_record(r) for r in self.w.records]
        last = {k: i for i, (k, _) in enumerate(encoded)}
        compacted = [(k, v) for i, (k, v) in enumerate(encoded) if last[k] == i and v is not None]
        fresh = CoordinatorState(self.w.st.config)
        h.load(fresh, [decode_record(k, v) for k, v in compacted], self.w.now)
        assert fresh.consumer_groups == self.w.st.consumer_groups


StaticRegexMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestStaticRegexMachine = StaticRegexMachine.TestCase
