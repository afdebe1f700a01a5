"""The authorizer's answers, request by request, against Kafka 2.8's `KafkaApis` (the table in docs/security.md):
each test is one place where zkcoord used to answer differently, and fails without its fix."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import JoinGroupRequest as KJoin
from kafka.protocol.consumer import OffsetFetchRequest as KFetch

from zkcoord.errors import ErrorCode as E
from zkcoord.group import messages as gm
from zkcoord.security.acl import (
    CLUSTER,
    OPERATION_CODE,
    Acl,
    AuthorizerConfig,
    Operation,
    Permission,
    Resource,
    ResourceType,
    Session,
)
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.authorization import RequestAuthorizer
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager

ALICE = "User:alice"


class Acls:
    def __init__(self, table: dict[Resource, tuple[Acl, ...]]) -> None:
        self.table = table


def allow(*ops: Operation) -> tuple[Acl, ...]:
    return tuple(Acl(ALICE, Permission.ALLOW, op) for op in ops)


def group(name: str) -> Resource:
    return Resource(ResourceType.GROUP, name)


def topic(name: str) -> Resource:
    return Resource(ResourceType.TOPIC, name)


class RecordingGroups:
    """The coordinator behind the authorizer: what matters here is whether a request reached it."""

    def __init__(self) -> None:
        self.calls: list[gm.GroupRequest] = []
        self.deleted: list[tuple[str, int]] = []

    def heartbeat_now(self, r: gm.HeartbeatRequest) -> gm.HeartbeatResponse:
        self.calls.append(r)
        return gm.HeartbeatResponse(0)

    async def join_group(self, r: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        self.calls.append(r)
        return gm.JoinGroupResponse(0, 1, "consumer", "range", "m-1", False, "m-1", ())

    async def sync_group(self, r: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        self.calls.append(r)
        return gm.SyncGroupResponse(0, "consumer", "range", b"")

    async def offset_fetch(self, r: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        self.calls.append(r)
        return gm.OffsetFetchResponse(0, ())

    async def partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.deleted.extend(partitions)

    async def describe_groups(self, r: gm.DescribeGroupsRequest) -> gm.DescribeGroupsResponse:
        self.calls.append(r)
        return gm.DescribeGroupsResponse(
            tuple(gm.DescribedGroup(0, g, "Stable", "consumer", "range", ()) for g in r.groups)
        )


def node(tmp_path: Path, table: dict[Resource, tuple[Acl, ...]] | None) -> tuple[Broker, RecordingGroups]:
    groups = RecordingGroups()
    authz = None if table is None else RequestAuthorizer(Acls(table), AuthorizerConfig())
    broker = Broker(ServerConfig(data_dir=tmp_path), LogManager(tmp_path), groups=groups, authorizer=authz)  # type: ignore[arg-type]
    return broker, groups


def ask(broker: Broker, api: int, version: int, **fields: Any) -> Any:
    raw = kp.encode_request(api, version, 7, "c", **fields)
    answer = broker.dispatch(kp.decode_request(raw[4:], Session(principal=ALICE, host="127.0.0.1")))
    if isinstance(answer, Awaitable):

        async def wait() -> Any:
            return await answer

        answer = asyncio.run(wait())
    assert isinstance(answer, bytes)
    return kp.decode_response(api, version, answer[4:])[1]


def test_heartbeat_needs_read_on_the_group(tmp_path: Path) -> None:
    """Heartbeats are answered on a synchronous path of their own, which skipped the authorizer."""
    broker, groups = node(tmp_path, {group("g"): allow(Operation.DESCRIBE)})
    resp = ask(broker, kp.HEARTBEAT, 3, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED
    assert groups.calls == []


def test_refused_join_names_no_member(tmp_path: Path) -> None:
    """KafkaApis answers JoinGroupResult(UNKNOWN_MEMBER_ID, GROUP_AUTHORIZATION_FAILED): member id ""."""
    broker, groups = node(tmp_path, {})
    proto = KJoin.JoinGroupRequestProtocol(name="range", metadata=b"")
    resp = ask(
        broker, kp.JOIN_GROUP, 5, group_id="g", session_timeout_ms=6000, rebalance_timeout_ms=6000,
        member_id="m-claimed", group_instance_id=None, protocol_type="consumer", protocols=[proto],
    )  # fmt: skip
    assert (resp.error_code, resp.member_id) == (E.GROUP_AUTHORIZATION_FAILED, "")
    assert groups.calls == []


@pytest.mark.parametrize("version", [1, 2, 5])
def test_refused_offset_fetch_is_per_partition_before_v2_and_top_level_after(
    tmp_path: Path, version: int
) -> None:
    """OffsetFetchRequest.getErrorResponse: v0-1 an error in each asked partition, v2+ the top-level error and
    no partitions."""
    broker, groups = node(tmp_path, {})
    T = KFetch.OffsetFetchRequestTopic
    resp = ask(broker, kp.OFFSET_FETCH, version, group_id="g", topics=[T(name="t", partition_indexes=[0, 1])])
    if version < 2:
        assert [p.error_code for p in resp.topics[0].partitions] == [E.GROUP_AUTHORIZATION_FAILED] * 2
    else:
        assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED
        assert resp.topics == []
    assert groups.calls == []


def test_sync_v5_without_protocol_is_inconsistent_before_it_is_authorized(tmp_path: Path) -> None:
    broker, groups = node(tmp_path, {})
    resp = ask(
        broker, kp.SYNC_GROUP, 5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
        protocol_type=None, protocol_name=None, assignments=[],
    )  # fmt: skip
    assert resp.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert groups.calls == []


def _bits(*ops: Operation) -> set[int]:
    return {OPERATION_CODE[op] for op in ops}


def test_describe_groups_answers_authorized_operations(tmp_path: Path) -> None:
    """v3+ with include_authorized_operations: the principal's operations on the group (KIP-430)."""
    broker, _ = node(tmp_path, {group("g"): allow(Operation.READ)})
    resp = ask(broker, kp.DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=True)
    assert resp.groups[0].authorized_operations == _bits(Operation.READ, Operation.DESCRIBE)
    plain, _ = node(tmp_path / "open", None)  # no authorizer: every group operation, as Kafka
    resp = ask(plain, kp.DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=True)
    assert resp.groups[0].authorized_operations == _bits(Operation.READ, Operation.DESCRIBE, Operation.DELETE)


def test_metadata_illegal_name_without_create_is_topic_authorization_failed(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {topic("bad name!"): allow(Operation.DESCRIBE)})
    resp = ask(broker, kp.METADATA, 9, topics=[("bad name!",)], allow_auto_topic_creation=True,
               include_cluster_authorized_operations=False, include_topic_authorized_operations=False)  # fmt: skip
    assert resp.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_metadata_answers_cluster_and_topic_authorized_operations(tmp_path: Path) -> None:
    table = {CLUSTER: allow(Operation.DESCRIBE), topic("t"): allow(Operation.WRITE)}
    broker, _ = node(tmp_path, table)
    broker.logs.create_topic("t", 1)
    resp = ask(broker, kp.METADATA, 9, topics=[("t",)], allow_auto_topic_creation=False,
               include_cluster_authorized_operations=True, include_topic_authorized_operations=True)  # fmt: skip
    assert resp.authorized_operations == _bits(Operation.DESCRIBE)
    assert resp.topics[0].authorized_operations == _bits(Operation.WRITE, Operation.DESCRIBE)


def test_find_coordinator_for_a_transaction_needs_describe_on_the_transactional_id(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {})
    resp = ask(broker, kp.FIND_COORDINATOR, 2, key="tx", key_type=1)
    assert resp.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactional_init_producer_id_needs_write_on_the_transactional_id(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {})
    resp = ask(broker, kp.INIT_PRODUCER_ID, 1, transactional_id="tx", transaction_timeout_ms=60000)
    assert resp.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_follower_fetch_needs_cluster_action_not_read(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {topic("t"): allow(Operation.READ)})
    broker.logs.create_topic("t", 1)
    T = kp.FetchRequest.FetchTopic
    P = T.FetchPartition
    fetch = T(topic="t", partitions=[P(partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1024,
                                       current_leader_epoch=-1)])  # fmt: skip
    common = dict(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[fetch])
    as_consumer = ask(broker, kp.FETCH, 7, replica_id=-1, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                      **common)  # fmt: skip
    assert as_consumer.responses[0].partitions[0].error_code == 0
    as_follower = ask(broker, kp.FETCH, 7, replica_id=2, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                      **common)  # fmt: skip
    assert as_follower.responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_create_topics_refuses_a_repeated_name_before_authorizing(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {CLUSTER: allow(Operation.CREATE)})
    C = kp.CreateTopicsRequest.CreatableTopic
    t = C(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])
    resp = ask(broker, kp.CREATE_TOPICS, 4, topics=[t, t], timeout_ms=1000, validate_only=False)
    assert [x.error_code for x in resp.topics] == [E.INVALID_REQUEST, E.INVALID_REQUEST]
    assert "t" not in broker.logs.topics


def test_create_topics_hides_configs_without_describe_configs(tmp_path: Path) -> None:
    broker, _ = node(tmp_path, {CLUSTER: allow(Operation.CREATE)})
    C = kp.CreateTopicsRequest.CreatableTopic
    t = C(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])
    resp = ask(broker, kp.CREATE_TOPICS, 5, topics=[t], timeout_ms=1000, validate_only=False)
    assert resp.topics[0].error_code == 0
    assert resp.topics[0].topic_config_error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_delete_topics_needs_delete_on_each_topic(tmp_path: Path) -> None:
    """KafkaApis 2.8: Delete on the topic (else TOPIC_AUTHORIZATION_FAILED, before existence is told), then
    UNKNOWN_TOPIC_OR_PARTITION; only the authorized topic's logs and group offsets go."""
    broker, groups = node(
        tmp_path,
        {
            topic("mine"): allow(Operation.DELETE),
            topic("theirs"): allow(Operation.DESCRIBE),
            topic("gone"): allow(Operation.DELETE),
        },
    )
    broker.logs.create_topic("mine", 2)
    broker.logs.create_topic("theirs", 1)
    resp = ask(broker, kp.DELETE_TOPICS, 5, topic_names=["mine", "theirs", "nope", "gone"], timeout_ms=1000)
    assert [(t.name, t.error_code) for t in resp.responses] == [
        ("mine", 0),
        ("theirs", E.TOPIC_AUTHORIZATION_FAILED),
        ("nope", E.TOPIC_AUTHORIZATION_FAILED),
        ("gone", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert sorted(broker.logs.topics) == ["theirs"]
    assert groups.deleted == [("mine", 0), ("mine", 1)]


@pytest.mark.parametrize(("version", "error"), [(2, E.INVALID_REQUEST), (3, E.TOPIC_DELETION_DISABLED)])
def test_delete_topics_disabled_answers_by_version(tmp_path: Path, version: int, error: int) -> None:
    groups = RecordingGroups()
    logs = LogManager(tmp_path)
    logs.create_topic("t", 1)
    broker = Broker(ServerConfig(data_dir=tmp_path, delete_topic_enable=False), logs, groups=groups)  # type: ignore[arg-type]
    resp = ask(broker, kp.DELETE_TOPICS, version, topic_names=["t"], timeout_ms=1000)
    assert [(t.name, t.error_code) for t in resp.responses] == [("t", error)]
    assert "t" in logs.topics
