"""ConsumerGroupHeartbeat/Describe through the broker and a real GroupService on a file store: frames in, frames
out; authorization as Kafka's KafkaApis; topic ids in Metadata v12; OffsetCommit/OffsetFetch v9 member epochs;
a restart reloads the consumer group from its records; a static member subscribed with a regular expression
(InstanceId and SubscribedTopicRegex from the frames, resolved against the node's topics) survives a restart of the
node and of itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import OffsetCommitRequest as KCommit
from kafka.protocol.consumer import OffsetFetchRequest as KFetch
from kafka.protocol.metadata import MetadataRequest as KMetadata

from zkcoord.errors import ErrorCode as E
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import ConsumerGroupDescribeRequest as Describe
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.security.acl import Acl, AuthorizerConfig, Operation, Permission, Resource, ResourceType, Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.authorization import RequestAuthorizer
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.group_service import GroupService
from zkcoord.server.log import LogManager
from zkcoord.server.topic_ids import new_topic_id, topic_lookup
from zkcoord.storage import FileRecordStore

ALICE = "User:alice"


class Acls:
    def __init__(self, table: dict[Resource, tuple[Acl, ...]]) -> None:
        self.table = table


class Node:
    def __init__(self, tmp: Path, acls: dict[Resource, tuple[Acl, ...]] | None = None) -> None:
        self.logs = LogManager(tmp)
        self.store = FileRecordStore(tmp / "group-records", "always")
        self.service = GroupService(
            GroupConfig(), self.store, topics=topic_lookup(self.logs), append_in_thread=False
        )
        authz = None if acls is None else RequestAuthorizer(Acls(acls), AuthorizerConfig())
        self.broker = Broker(ServerConfig(data_dir=tmp), self.logs, groups=self.service, authorizer=authz)

    async def call(self, frame: bytes) -> bytes:
        answer = self.broker.dispatch(
            kp.decode_request(frame[4:], Session(principal=ALICE, host="127.0.0.1"))
        )
        if isinstance(answer, Awaitable):
            answer = await answer
        assert isinstance(answer, bytes)
        return answer

    async def hb(self, req: Hb) -> Any:
        answer = await self.call(kp.encode_consumer_group_request(3, "client-a", req))
        return kp.decode_consumer_group_response(68, req.api_version, answer[4:])[1]

    async def describe(self, *groups: str) -> Any:
        answer = await self.call(kp.encode_consumer_group_request(4, "c", Describe(0, groups, True)))
        return kp.decode_consumer_group_response(69, 0, answer[4:])[1]

    async def ask(self, api: int, version: int, **fields: Any) -> Any:
        answer = await self.call(kp.encode_request(api, version, 5, "c", **fields))
        return kp.decode_response(api, version, answer[4:])[1]


def join(member: str, topics: tuple[str, ...] = ("t",)) -> Hb:
    return Hb(
        1, "g", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=topics, topic_partitions=()
    )


def test_a_member_joins_commits_and_survives_a_restart(tmp_path: Path) -> None:
    async def run() -> None:
        node = Node(tmp_path)
        await node.service.start()
        node.logs.create_topic("t", 3, topic_id=new_topic_id())
        tid = node.logs.topic_ids["t"]
        meta = await node.ask(kp.METADATA, 12, topics=[KMetadata.MetadataRequestTopic(topic_id=None, name="t")],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip
        assert meta.topics[0].topic_id == tid  # the stored id
        by_id = await node.ask(kp.METADATA, 12, topics=[KMetadata.MetadataRequestTopic(topic_id=tid, name=None)],
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip
        assert [(t.name, t.error_code) for t in by_id.topics] == [("t", 0)]

        r = await node.hb(join("m-1"))
        assert (r.error_code, r.member_id, r.member_epoch) == (0, "m-1", 1)
        assert r.assignment == ((tid.hex, (0, 1, 2)),)

        def commit(version: int, epoch: int) -> dict[str, Any]:
            part = KCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=1, committed_offset=42, committed_leader_epoch=-1, committed_metadata=""
            )
            return dict(group_id="g", generation_id_or_member_epoch=epoch, member_id="m-1", group_instance_id=None,
                        topics=[KCommit.OffsetCommitRequestTopic(name="t", partitions=[part])])  # fmt: skip

        got = await node.ask(kp.OFFSET_COMMIT, 9, **commit(9, 0))
        assert got.topics[0].partitions[0].error_code == E.STALE_MEMBER_EPOCH
        got = await node.ask(kp.OFFSET_COMMIT, 8, **commit(8, 1))
        assert got.topics[0].partitions[0].error_code == E.UNSUPPORTED_VERSION
        got = await node.ask(kp.OFFSET_COMMIT, 9, **commit(9, 1))
        assert got.topics[0].partitions[0].error_code == 0

        G = KFetch.OffsetFetchRequestGroup
        fetch = dict(groups=[G(group_id="g", member_id="m-1", member_epoch=1,
                               topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[1])])],
                     require_stable=False)  # fmt: skip
        fetched = await node.ask(kp.OFFSET_FETCH, 9, **fetch)
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 42
        stale = dict(fetch, groups=[G(group_id="g", member_id="m-1", member_epoch=7, topics=None)])
        assert (await node.ask(kp.OFFSET_FETCH, 9, **stale)).groups[0].error_code == E.STALE_MEMBER_EPOCH

        before = await node.describe("g")
        await node.service.close()
        node.store.close()

        again = Node(tmp_path)
        assert again.logs.topic_ids == {"t": tid}  # read back from the topic's partition.metadata
        await again.service.start()
        assert again.service.state.consumer_groups == node.service.state.consumer_groups
        after = await again.describe("g", "nope")
        assert after.groups[0] == before.groups[0]
        g = after.groups[0]
        assert (g.group_state, g.group_epoch, g.assignor_name) == ("Stable", 1, "uniform")
        assert g.members[0].assignment[0].topic_name == "t" and g.members[0].client_id == "client-a"
        assert after.groups[1].error_code == E.GROUP_ID_NOT_FOUND
        listed = await again.ask(kp.LIST_GROUPS, 5, states_filter=[], types_filter=[])
        assert [(x.group_id, x.group_type) for x in listed.groups] == [("g", "consumer")]
        again.store.close()

    asyncio.run(run())


def test_heartbeat_and_describe_are_authorized_as_kafka_does(tmp_path: Path) -> None:
    def allow(*ops: Operation) -> tuple[Acl, ...]:
        return tuple(Acl(ALICE, Permission.ALLOW, op) for op in ops)

    group = Resource(ResourceType.GROUP, "g")
    topic = Resource(ResourceType.TOPIC, "t")

    async def run(acls: dict[Resource, tuple[Acl, ...]]) -> tuple[int, int]:
        node = Node(tmp_path / str(len(list(tmp_path.iterdir()))), acls)
        await node.service.start()
        node.logs.create_topic("t", 1, topic_id=new_topic_id())
        hb = (await node.hb(join("m"))).error_code
        described = (await node.describe("g")).groups[0].error_code
        node.store.close()
        return hb, described

    assert asyncio.run(run({})) == (E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED)
    assert asyncio.run(run({group: allow(Operation.READ)})) == (
        E.TOPIC_AUTHORIZATION_FAILED,
        E.GROUP_ID_NOT_FOUND,
    )
    assert asyncio.run(run({group: allow(Operation.READ), topic: allow(Operation.DESCRIBE)}))[0] == 0
    # Describe on the group but not on its assigned topic: Kafka 4 answers TOPIC_AUTHORIZATION_FAILED.
    both = {group: allow(Operation.READ), topic: allow(Operation.DESCRIBE)}

    async def hidden_topic() -> int:
        node = Node(tmp_path / "hidden", both)
        await node.service.start()
        node.logs.create_topic("t", 1, topic_id=new_topic_id())
        assert (await node.hb(join("m"))).error_code == 0
        node.broker.authorizer = RequestAuthorizer(
            Acls({group: allow(Operation.DESCRIBE)}), AuthorizerConfig()
        )
        node.broker._group_dispatch.authorizer = node.broker.authorizer  # type: ignore[union-attr]
        code: int = (await node.describe("g")).groups[0].error_code
        node.store.close()
        return code

    assert asyncio.run(hidden_topic()) == E.TOPIC_AUTHORIZATION_FAILED


class CatalogNode(Node):
    """The test node, its service also given the node's topic names (as `serve` gives them)."""

    def __init__(self, tmp: Path) -> None:
        self.logs = LogManager(tmp)
        self.store = FileRecordStore(tmp / "group-records", "always")
        self.service = GroupService(
            GroupConfig(),
            self.store,
            topics=topic_lookup(self.logs),
            topic_names=lambda: tuple(self.logs.topics),
            append_in_thread=False,
        )
        self.broker = Broker(ServerConfig(data_dir=tmp), self.logs, groups=self.service, authorizer=None)


def static_regex_join(member: str) -> Hb:
    return Hb(1, "g", member, 0, instance_id="inst", rebalance_timeout_ms=30_000,
              subscribed_topic_regex="^rx-.*", topic_partitions=())  # fmt: skip


def test_a_static_regex_member_survives_a_restart_of_the_node_and_of_itself(tmp_path: Path) -> None:
    async def run() -> None:
        node = CatalogNode(tmp_path)
        await node.service.start()
        node.logs.create_topic("rx-a", 2, topic_id=new_topic_id())
        node.logs.create_topic("other", 1, topic_id=new_topic_id())
        a, other = node.logs.topic_ids["rx-a"].hex, node.logs.topic_ids["other"].hex
        r = await node.hb(static_regex_join("m-1"))
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, ((a, (0, 1)),))
        assert other not in dict(r.assignment)
        (g,) = (await node.describe("g")).groups
        assert (g.members[0].instance_id, g.members[0].subscribed_topic_regex) == ("inst", "^rx-.*")
        left = await node.hb(Hb(1, "g", "m-1", -2, instance_id="inst"))
        assert (left.error_code, left.member_epoch) == (0, -2)
        await node.service.close()
        node.store.close()

        again = CatalogNode(tmp_path)
        await again.service.start()
        assert again.service.state.consumer_groups == node.service.state.consumer_groups
        assert set(again.service.state.consumer_groups["g"].regexes) == {"^rx-.*"}
        r = await again.hb(static_regex_join("m-2"))  # the member's new process, same instance id
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, ((a, (0, 1)),))
        (g,) = (await again.describe("g")).groups
        assert [(m.member_id, m.instance_id) for m in g.members] == [("m-2", "inst")]
        again.store.close()

    asyncio.run(run())
