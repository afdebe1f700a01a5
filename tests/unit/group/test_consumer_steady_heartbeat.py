"""The steady consumer-group heartbeat's shortcuts: it looks its subscribed topics up only when they may have changed
(the edge's topic version moved, the group's subscribed names changed, or its topic metadata was rewritten), and
builds the member's metadata only when the request carries something new. Whatever is skipped, the records and
answers are those of a heartbeat that did all of it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer import _member_value, _nothing_new, handle_consumer_heartbeat
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse as Resp
from zkcoord.group.consumer_model import replay_consumer
from zkcoord.group.model import CoordinatorState
from zkcoord.records.consumer_groups import (
    PARTITION_METADATA,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    MemberMetadataValue,
    PartitionMetadataValue,
    TopicMetadata,
)
from zkcoord.records.offsets import Record

T1, T2 = "11" * 16, "22" * 16


class Topics:
    """The edge's topics: a lookup that counts its calls, and a version moved on every change."""

    def __init__(self) -> None:
        self.table: dict[str, tuple[str, int]] = {"t1": (T1, 2), "t2": (T2, 2)}
        self.version = 0
        self.lookups = 0

    def __call__(self, name: str) -> tuple[str, int] | None:
        self.lookups += 1
        return self.table.get(name)

    def grow(self, name: str, partitions: int) -> None:
        self.table[name] = (self.table[name][0], partitions)
        self.version += 1


class Group:
    def __init__(self, versioned: bool) -> None:
        self.st = CoordinatorState(GroupConfig())
        self.topics = Topics()
        self.versioned = versioned
        self.records: list[Record] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {}

    def hb(self, member: str, topics: tuple[str, ...] | None = None, leave: bool = False) -> Resp:
        epoch = -1 if leave else self.epochs.get(member, 0)
        join = epoch == 0
        req = Hb(
            1, "g", member, epoch,
            rebalance_timeout_ms=30_000 if join else -1,
            subscribed_topic_names=topics or (("t1",) if join else None),
            topic_partitions=() if join else self.owned.get(member, ()),
            client_id="c", client_host="h",
        )  # fmt: skip
        version = self.topics.version if self.versioned else None
        result = handle_consumer_heartbeat(self.st, req, 1_000, 1, self.topics, "", topics_version=version)
        self.records.extend(result.records)
        ((_, resp),) = result.responses
        assert isinstance(resp, Resp)
        if resp.error_code == 0 and not leave:
            self.epochs[member] = resp.member_epoch
            if resp.assignment is not None:
                self.owned[member] = resp.assignment
        return resp


def _script(g: Group) -> list[Resp]:
    """Joins, steady heartbeats, a partition increase, a subscription change, a leave that drops a topic."""
    answers = [g.hb("a"), g.hb("b")]
    for _ in range(3):
        answers += [g.hb("a"), g.hb("b")]
    g.topics.grow("t1", 4)  # a partition increase
    for _ in range(3):
        answers += [g.hb("a"), g.hb("b")]
    answers.append(g.hb("b", topics=("t1", "t2")))  # b subscribes to t2 too
    for _ in range(3):
        answers += [g.hb("a"), g.hb("b")]
    answers.append(g.hb("b", leave=True))  # nobody subscribes to t2 any more
    for _ in range(2):
        answers.append(g.hb("a"))
    return answers


def test_skipped_lookups_change_nothing_and_a_partition_increase_is_seen() -> None:
    every, versioned = Group(versioned=False), Group(versioned=True)
    assert _script(every) == _script(versioned)
    assert every.records == versioned.records
    assert every.st.consumer_groups == versioned.st.consumer_groups
    group = versioned.st.consumer_groups["g"]
    assert {t.name: t.partitions for t in group.topics.values()} == {
        "t1": 4
    }  # grown; t2 dropped after the leave
    # looked up on each of the 28 heartbeats without a version; with one, only after a change
    assert every.topics.lookups > 28
    assert versioned.topics.lookups <= 8


def test_a_steady_heartbeat_with_an_unchanged_version_looks_nothing_up() -> None:
    g = Group(versioned=True)
    g.hb("a")
    g.hb("a")
    before = g.topics.lookups
    for _ in range(5):
        assert g.hb("a").error_code == 0
    assert g.topics.lookups == before
    g.topics.version += 1  # something changed somewhere (another topic): looked up once more, no record
    records = len(g.records)
    g.hb("a")
    g.hb("a")
    assert g.topics.lookups == before + 1
    assert len(g.records) == records


def test_topic_metadata_written_elsewhere_is_looked_up_again() -> None:
    """Another path (a classic member's, a load) may rewrite the group's topic metadata at the same version: the
    next heartbeat compares it with the topics again and writes what they say."""
    g = Group(versioned=True)
    g.hb("a")
    g.hb("a")
    stale = PartitionMetadataValue((TopicMetadata(T1, "t1", 1),))
    replay_consumer(g.st.consumer_groups, ConsumerGroupKey(PARTITION_METADATA, "g"), stale)
    g.hb("a")
    assert g.st.consumer_groups["g"].topics["t1"].partitions == 2
    assert g.records[-1][1] != stale


opt = st.none() | st.sampled_from(("x", "y"))
metadata = st.builds(
    MemberMetadataValue,
    instance_id=opt,
    rack_id=opt,
    client_id=st.sampled_from(("c", "d")),
    client_host=st.sampled_from(("h", "i")),
    subscribed_topic_names=st.sampled_from(((), ("t1",), ("t1", "t2"))),
    server_assignor=opt,
    rebalance_timeout_ms=st.sampled_from((-1, 100, 200)),
    classic=st.none() | st.just(ClassicMemberMetadata(10_000, (("range", b""),))),
    subscribed_topic_regex=opt,
)


@settings(max_examples=300, deadline=None)
@given(
    old=metadata,
    instance=opt,
    rack=opt,
    client=st.sampled_from(("c", "d")),
    host=st.sampled_from(("h", "i")),
    names=st.none() | st.sampled_from(((), ("t1",), ("t2", "t1"))),
    assignor=opt,
    rebalance=st.sampled_from((-1, 100, 200)),
    regex=st.none() | st.sampled_from(("", "x", "y")),
)
def test_the_steady_heartbeat_shortcut_keeps_the_member_value(
    old: MemberMetadataValue,
    instance: str | None,
    rack: str | None,
    client: str,
    host: str,
    names: tuple[str, ...] | None,
    assignor: str | None,
    rebalance: int,
    regex: str | None,
) -> None:
    """`_nothing_new` skips building the member's metadata only when the built value would be the old one, and
    does skip it for the steady heartbeat (nothing sent, same client)."""
    req = Hb(1, "g", "m", 3, instance, rack, rebalance, names, regex, assignor, None, client, host)
    if _nothing_new(req, old):
        assert _member_value(req, old) == old
    steady = Hb(1, "g", "m", 3, client_id=old.client_id, client_host=old.client_host)
    assert _nothing_new(steady, old) == (old.classic is None)
