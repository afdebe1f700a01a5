"""OffsetCommit/OffsetFetch v0, which a cluster node answers from ZooKeeper without the coordinator, pass the same
authorizer as every other version: a principal without Read on the group gets GROUP_AUTHORIZATION_FAILED and the
ZooKeeper side is never called; a super user reaches it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from zkcoord.group import messages as gm
from zkcoord.group.errors import ErrorCode
from zkcoord.security.acl import AuthorizerConfig, Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.authorization import RequestAuthorizer
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager


class NoAcls:
    """No ACL anywhere: only super users may do anything (allow.everyone.if.no.acl.found is off)."""

    @property
    def table(self) -> dict[object, tuple[object, ...]]:
        return {}


class RecordingV0Store:
    """Stands in for the ZooKeeper side (tested on a real ZooKeeper in tests/e2e/test_old_clients.py): here only
    whether the broker reached it matters."""

    def __init__(self) -> None:
        self.calls: list[gm.GroupRequest] = []

    async def offset_commit(self, r: gm.OffsetCommitRequest) -> gm.OffsetCommitResponse:
        self.calls.append(r)
        return gm.OffsetCommitResponse(
            tuple(
                gm.OffsetCommitResponseTopic(t.name, tuple(gm.OffsetCommitResponsePartition(p.partition_index, 0)
                                                           for p in t.partitions))
                for t in r.topics
            )
        )  # fmt: skip

    async def offset_fetch(self, r: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        self.calls.append(r)
        return gm.OffsetFetchResponse(0, ())


def _commit_v0(principal: str) -> kp.RequestFrame:
    raw = kp.encode_request(kp.OFFSET_COMMIT, 0, 7, "old", group_id="g", topics=[("t", [(0, 42, "")])])
    return kp.decode_request(raw[4:], Session(principal=principal, host="127.0.0.1"))


def test_v0_commit_needs_read_on_the_group(tmp_path: Path) -> None:
    store = RecordingV0Store()
    authz = RequestAuthorizer(NoAcls(), AuthorizerConfig(super_users=frozenset({"User:admin"})))
    broker = Broker(
        ServerConfig(data_dir=tmp_path), LogManager(tmp_path), zk_offsets_v0=store, authorizer=authz
    )

    async def send(principal: str) -> bytes:
        answer = broker.dispatch(_commit_v0(principal))
        assert not isinstance(answer, bytes | None)
        result = await answer
        assert isinstance(result, bytes)
        return result

    refused = asyncio.run(send("User:mallory"))
    assert store.calls == []
    _corr, resp = kp.decode_response(kp.OFFSET_COMMIT, 0, refused[4:])
    code = resp.topics[0].partitions[0].error_code
    assert code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    asyncio.run(send("User:admin"))
    assert [type(c) for c in store.calls] == [gm.OffsetCommitRequest]
