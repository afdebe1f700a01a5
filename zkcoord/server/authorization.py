"""What each Kafka API needs of a request's principal, decided through Kafka's ACL model: the one place the
broker and the group dispatcher ask "may this request do that to this resource" (Kafka's `KafkaApis.authorize`).

Guarantees: each check reads the current ACL table once (an immutable snapshot) and decides with the pure
`zkcoord.security.acl.authorize`; a request without a session (a listener that names none) is
`User:ANONYMOUS`. Which operation each API needs is its row's `authorization` in `zkcoord.server.apis`, Kafka
2.x's `KafkaApis`: Produce Write on the topic, Fetch
Read, Metadata/ListOffsets Describe, CreateTopics (and auto-creation) Create on the cluster or the topic,
FindCoordinator Describe on the group, JoinGroup/SyncGroup/Heartbeat/LeaveGroup Read on the group, OffsetCommit
Read on the group and on each topic, OffsetFetch Describe on the group and each topic, DescribeGroups Describe,
ListGroups Describe on the cluster or else the groups described, DeleteGroups Delete, InitProducerId (idempotent)
IdempotentWrite on the cluster or (Kafka 3.0+) Write on any topic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Protocol

from zkcoord.errors import ErrorCode as E
from zkcoord.group import messages as gm
from zkcoord.group.common import error_response, join_error, sync_error
from zkcoord.security.acl import (
    CLUSTER,
    AclTable,
    AuthorizerConfig,
    Operation,
    Resource,
    ResourceType,
    Session,
    all_operations,
    authorize,
    authorize_any,
    authorized_operations,
)
from zkcoord.server.apis import API_TABLE, group_operation
from zkcoord.server.kafka_protocol import RequestFrame

ANONYMOUS_SESSION = Session()


class AclSource(Protocol):
    """Where the ACLs come from (zkcoord.zk.kafka_acls.AclCache): a table replaced whole on each change."""

    @property
    def table(self) -> AclTable: ...


class RequestAuthorizer:
    """Kafka's authorizer for one node: `acls` (kept current elsewhere) under `config`."""

    def __init__(self, acls: AclSource, config: AuthorizerConfig) -> None:
        self.acls = acls
        self.config = config

    def _session(self, req: RequestFrame) -> Session:
        return req.session if req.session is not None else ANONYMOUS_SESSION

    def allowed(self, req: RequestFrame, operation: Operation, resource: Resource) -> bool:
        return authorize(self.acls.table, self.config, self._session(req), operation, resource)

    def topic(self, req: RequestFrame, operation: Operation, name: str) -> bool:
        return self.allowed(req, operation, Resource(ResourceType.TOPIC, name))

    def group(self, req: RequestFrame, operation: Operation, name: str) -> bool:
        return self.allowed(req, operation, Resource(ResourceType.GROUP, name))

    def cluster(self, req: RequestFrame, operation: Operation) -> bool:
        return self.allowed(req, operation, CLUSTER)

    def transactional_id(self, req: RequestFrame, operation: Operation, name: str) -> bool:
        return self.allowed(req, operation, Resource(ResourceType.TRANSACTIONAL_ID, name))

    def operations(self, req: RequestFrame, resource: Resource) -> int:
        """The KIP-430 bit field of what `req`'s principal may do on `resource`."""
        return authorized_operations(self.acls.table, self.config, self._session(req), resource)

    def may_create_topic(self, req: RequestFrame, name: str) -> bool:
        """Kafka 2.0+: Create on the cluster, or on the topic."""
        return self.cluster(req, Operation.CREATE) or self.topic(req, Operation.CREATE, name)

    def may_write_idempotently(self, req: RequestFrame) -> bool:
        """InitProducerId without a transactional id: IdempotentWrite on the cluster (Kafka 2.x), or Write on
        any topic (Kafka 3.0+, KIP-679, which idempotent-by-default clients such as kafka-python 3 rely on)."""
        return self.cluster(req, Operation.IDEMPOTENT_WRITE) or authorize_any(
            self.acls.table, self.config, self._session(req), Operation.WRITE, ResourceType.TOPIC
        )

    def denied_topics(self, req: RequestFrame, operation: Operation, names: Iterable[str]) -> frozenset[str]:
        table = self.acls.table  # one snapshot for the whole request
        session = self._session(req)
        return frozenset(
            n
            for n in set(names)
            if not authorize(table, self.config, session, operation, Resource(ResourceType.TOPIC, n))
        )


# The group operation each group request needs (KafkaApis' handle*Request), from the API table's rows.
GROUP_OPERATION: dict[type[gm.GroupRequest], Operation] = {
    api.request: op
    for api in API_TABLE.values()
    if api.request is not None
    and issubclass(api.request, gm.GroupRequest)
    and (op := group_operation(api.request)) is not None
}


GroupCall = Callable[[gm.GroupRequest], Awaitable[gm.GroupResponse]]


async def authorized_group_call(
    authz: RequestAuthorizer, req: RequestFrame, r: gm.GroupRequest, call: GroupCall
) -> gm.GroupResponse:
    """Answer `r` as Kafka would for `req`'s principal: refused parts get 29/30 and never reach the coordinator
    (so nothing changes for them), the allowed rest is `call`ed and the answers merged in request order."""
    denied_group = E.GROUP_AUTHORIZATION_FAILED
    if isinstance(r, gm.ListGroupsRequest):
        response = await call(r)
        assert isinstance(response, gm.ListGroupsResponse)
        if authz.cluster(req, Operation.DESCRIBE):
            return response
        kept = tuple(g for g in response.groups if authz.group(req, Operation.DESCRIBE, g.group_id))
        return replace(response, groups=kept)
    if isinstance(r, gm.DescribeGroupsRequest):
        allowed = tuple(g for g in r.groups if authz.group(req, Operation.DESCRIBE, g))
        described: dict[str, gm.DescribedGroup] = {}
        if allowed:
            got = await call(replace(r, groups=allowed))
            assert isinstance(got, gm.DescribeGroupsResponse)
            described = {g.group_id: g for g in got.groups}
            if r.include_authorized_operations and r.api_version >= 3:
                described = {
                    name: g
                    if g.error_code != 0
                    else replace(g, authorized_operations=authz.operations(req, Resource(ResourceType.GROUP, name)))
                    for name, g in described.items()
                }  # fmt: skip
        refused = gm.DescribedGroup(int(denied_group), "", "", "", "", ())
        groups = tuple(described.get(g) or replace(refused, group_id=g) for g in r.groups)
        return gm.DescribeGroupsResponse(groups)
    if isinstance(r, gm.DeleteGroupsRequest):
        allowed = tuple(g for g in r.groups_names if authz.group(req, Operation.DELETE, g))
        deleted: dict[str, gm.DeletableGroupResult] = {}
        if allowed:
            got = await call(replace(r, groups_names=allowed))
            assert isinstance(got, gm.DeleteGroupsResponse)
            deleted = {x.group_id: x for x in got.results}
        results = tuple(
            deleted.get(g) or gm.DeletableGroupResult(g, int(denied_group)) for g in r.groups_names
        )
        return gm.DeleteGroupsResponse(results)
    if (
        isinstance(r, gm.SyncGroupRequest)
        and r.api_version >= 5
        and None in (r.protocol_type, r.protocol_name)
    ):
        # KafkaApis refuses a v5+ SyncGroup without its mandatory protocol type and name before it authorizes
        return sync_error(E.INCONSISTENT_GROUP_PROTOCOL)
    if not authz.group(req, GROUP_OPERATION[type(r)], r.group_id):
        return _group_refused(r)
    if isinstance(r, gm.OffsetCommitRequest):
        return await _commit(authz, req, r, call)
    if isinstance(r, gm.OffsetFetchRequest):
        return await _fetch(authz, req, r, call)
    return await call(r)


def _group_refused(r: gm.GroupRequest) -> gm.GroupResponse:
    """Kafka's answer to a principal refused on the group: as any group-wide error, except that JoinGroup names
    no member (UNKNOWN_MEMBER_ID, "") and OffsetFetch v2+ carries the error at the top, with no partitions."""
    denied = E.GROUP_AUTHORIZATION_FAILED
    if isinstance(r, gm.JoinGroupRequest):
        return join_error(r.api_version, "", denied)
    if isinstance(r, gm.OffsetFetchRequest) and r.api_version >= 2:
        return gm.OffsetFetchResponse(int(denied), ())
    return error_response(r, denied)


def with_every_operation(
    req: gm.DescribeGroupsRequest, r: gm.DescribeGroupsResponse
) -> gm.DescribeGroupsResponse:
    """A node without an authorizer: Kafka answers include_authorized_operations with every group operation."""
    if not (req.include_authorized_operations and req.api_version >= 3):
        return r
    every = all_operations(ResourceType.GROUP)
    return replace(
        r, groups=tuple(g if g.error_code != 0 else replace(g, authorized_operations=every) for g in r.groups)
    )


async def _commit(
    authz: RequestAuthorizer, req: RequestFrame, r: gm.OffsetCommitRequest, call: GroupCall
) -> gm.GroupResponse:
    denied = authz.denied_topics(req, Operation.READ, (t.name for t in r.topics))
    if not denied:
        return await call(r)
    allowed = tuple(t for t in r.topics if t.name not in denied)
    answered: dict[str, gm.OffsetCommitResponseTopic] = {}
    if allowed:
        got = await call(replace(r, topics=allowed))
        assert isinstance(got, gm.OffsetCommitResponse)
        answered = {t.name: t for t in got.topics}
    refused = int(E.TOPIC_AUTHORIZATION_FAILED)
    topics = tuple(
        answered.get(t.name)
        or gm.OffsetCommitResponseTopic(
            t.name, tuple(gm.OffsetCommitResponsePartition(p.partition_index, refused) for p in t.partitions)
        )
        for t in r.topics
        if t.name in denied or t.name in answered
    )
    return gm.OffsetCommitResponse(topics)


async def _fetch(
    authz: RequestAuthorizer, req: RequestFrame, r: gm.OffsetFetchRequest, call: GroupCall
) -> gm.GroupResponse:
    got = await call(r)
    assert isinstance(got, gm.OffsetFetchResponse)
    denied = authz.denied_topics(req, Operation.DESCRIBE, (t.name for t in got.topics))
    if not denied:
        return got
    if r.topics is None:  # every committed partition: Kafka leaves out the topics the principal cannot see
        return replace(got, topics=tuple(t for t in got.topics if t.name not in denied))
    refused = int(E.TOPIC_AUTHORIZATION_FAILED)
    topics = tuple(
        t
        if t.name not in denied
        else replace(t, partitions=tuple(replace(p, committed_offset=-1, committed_leader_epoch=-1,
                                                 metadata="", error_code=refused) for p in t.partitions))
        for t in got.topics
    )  # fmt: skip
    return replace(got, topics=topics)
