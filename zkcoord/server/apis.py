"""The server's one row per API: for every API in `zkcoord.api_keys.SERVED`, how its request is read (decode), how
its answer is written (encode), what Kafka's `KafkaApis` requires of the principal (authorization) and who answers
it (handler), composed from the adapter (`zkcoord.server.kafka_protocol`) and Kafka's ACL model.

Adding an API: its key, name and windows in `zkcoord.api_keys`, its codec in the adapter, a row here, and its
handler; tests/unit/test_api_table.py fails while an advertised API lacks any of them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from zkcoord.api_keys import SERVED, ApiKey
from zkcoord.group import consumer_messages as gcm
from zkcoord.group import messages as gm
from zkcoord.security.acl import Operation, ResourceType
from zkcoord.server import kafka_protocol as kp
from zkcoord.server import messages as dm


class Handler(enum.Enum):
    """Who answers an API once its frame is decoded."""

    BROKER = "broker"  # zkcoord.server.broker.Broker: ApiVersions and the data plane
    GROUPS = "group dispatch"  # zkcoord.server.groups.GroupDispatch, to the group coordinator
    LOGIN = (
        "listener login"  # zkcoord.server.listener_security.SaslAuthenticator, before a SASL login completes
    )


@dataclass(frozen=True, slots=True)
class Need:
    """`operation` on the `resource` (of each one the request names), or else `alternative` (Kafka 2.0+'s
    Create on the cluster or on the topic, ListGroups' Describe on the cluster or on each group listed)."""

    resource: ResourceType
    operation: Operation
    alternative: Need | None = None


T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
PUBLIC: Final[tuple[Need, ...]] = ()  # answered to anyone, before or without a login (ApiVersions, SASL)


@dataclass(frozen=True, slots=True)
class Api:
    """One served API. `request` is the value `decode` gives (None: the adapter's object is read in place);
    `authorization` every `Need` KafkaApis checks, in its order (PUBLIC: none)."""

    key: ApiKey
    decode: Callable[..., Any]
    encode: Callable[..., Any]
    authorization: tuple[Need, ...]
    handler: Handler
    request: type | None = None


_READ_GROUP = (Need(G, Operation.READ),)

API_TABLE: Final[Mapping[ApiKey, Api]] = MappingProxyType(
    {
        api.key: api
        for api in (
            Api(ApiKey.PRODUCE, kp.produce_request, kp.produce_response,
                (Need(X, Operation.WRITE), Need(T, Operation.WRITE)), Handler.BROKER, dm.ProduceRequest),
            Api(ApiKey.FETCH, kp.fetch_request, kp.fetch_response,
                (Need(T, Operation.READ),), Handler.BROKER, dm.FetchRequest),
            Api(ApiKey.LIST_OFFSETS, kp.list_offsets_request, kp.list_offsets_response,
                (Need(T, Operation.DESCRIBE),), Handler.BROKER, dm.ListOffsetsRequest),
            Api(ApiKey.METADATA, kp.metadata_request, kp.metadata_response,
                (Need(T, Operation.DESCRIBE), Need(C, Operation.CREATE, Need(T, Operation.CREATE))),
                Handler.BROKER, dm.MetadataRequest),
            Api(ApiKey.OFFSET_COMMIT, kp.group_requests, kp.group_response,
                (Need(G, Operation.READ), Need(T, Operation.READ)), Handler.GROUPS, gm.OffsetCommitRequest),
            Api(ApiKey.OFFSET_FETCH, kp.group_requests, kp.group_response,
                (Need(G, Operation.DESCRIBE), Need(T, Operation.DESCRIBE)), Handler.GROUPS, gm.OffsetFetchRequest),
            Api(ApiKey.FIND_COORDINATOR, kp.find_coordinator_request, kp.find_coordinator_response,
                (Need(G, Operation.DESCRIBE, Need(X, Operation.DESCRIBE)),), Handler.BROKER,
                dm.FindCoordinatorRequest),
            Api(ApiKey.JOIN_GROUP, kp.group_requests, kp.group_response, _READ_GROUP, Handler.GROUPS,
                gm.JoinGroupRequest),
            Api(ApiKey.HEARTBEAT, kp.group_requests, kp.group_response, _READ_GROUP, Handler.GROUPS,
                gm.HeartbeatRequest),
            Api(ApiKey.LEAVE_GROUP, kp.group_requests, kp.group_response, _READ_GROUP, Handler.GROUPS,
                gm.LeaveGroupRequest),
            Api(ApiKey.SYNC_GROUP, kp.group_requests, kp.group_response, _READ_GROUP, Handler.GROUPS,
                gm.SyncGroupRequest),
            Api(ApiKey.DESCRIBE_GROUPS, kp.group_requests, kp.group_response, (Need(G, Operation.DESCRIBE),),
                Handler.GROUPS, gm.DescribeGroupsRequest),
            Api(ApiKey.LIST_GROUPS, kp.group_requests, kp.group_response,
                (Need(C, Operation.DESCRIBE, Need(G, Operation.DESCRIBE)),), Handler.GROUPS, gm.ListGroupsRequest),
            Api(ApiKey.SASL_HANDSHAKE, kp.sasl_handshake_mechanism, kp.sasl_handshake_response, PUBLIC,
                Handler.LOGIN),
            Api(ApiKey.API_VERSIONS, kp.valid_client_software, kp.api_versions_response, PUBLIC, Handler.BROKER),
            Api(ApiKey.CREATE_TOPICS, kp.create_topics_request, kp.create_topics_response,
                (Need(C, Operation.CREATE, Need(T, Operation.CREATE)),), Handler.BROKER, dm.CreateTopicsRequest),
            Api(ApiKey.DELETE_TOPICS, kp.delete_topics_request, kp.delete_topics_response,
                (Need(T, Operation.DELETE),), Handler.BROKER, dm.DeleteTopicsRequest),
            Api(ApiKey.INIT_PRODUCER_ID, kp.init_producer_id_request, kp.init_producer_id_response,
                (Need(X, Operation.WRITE, Need(C, Operation.IDEMPOTENT_WRITE, Need(T, Operation.WRITE))),),
                Handler.BROKER, dm.InitProducerIdRequest),
            Api(ApiKey.SASL_AUTHENTICATE, kp.sasl_auth_bytes, kp.sasl_authenticate_response, PUBLIC,
                Handler.LOGIN),
            Api(ApiKey.DELETE_GROUPS, kp.group_requests, kp.group_response, (Need(G, Operation.DELETE),),
                Handler.GROUPS, gm.DeleteGroupsRequest),
            Api(ApiKey.CONSUMER_GROUP_HEARTBEAT, kp.consumer_group_request, kp.consumer_group_response,
                (Need(G, Operation.READ), Need(T, Operation.DESCRIBE)), Handler.GROUPS,
                gcm.ConsumerGroupHeartbeatRequest),
            Api(ApiKey.CONSUMER_GROUP_DESCRIBE, kp.consumer_group_request, kp.consumer_group_response,
                (Need(G, Operation.DESCRIBE), Need(T, Operation.DESCRIBE)), Handler.GROUPS,
                gcm.ConsumerGroupDescribeRequest),
        )
    }
)  # fmt: skip


def handled_by(handler: Handler) -> frozenset[ApiKey]:
    """The served APIs `handler` answers."""
    return frozenset(k for k, api in API_TABLE.items() if api.handler is handler and k in SERVED)


def group_operation(request: type) -> Operation | None:
    """The operation on the group itself a group request needs (KafkaApis' handle*Request): the first `Need` of
    its row when that is on the group alone; None for a request whose row has none (ListGroups)."""
    for api in API_TABLE.values():
        if api.request is request and api.authorization and api.authorization[0].resource is G:
            need = api.authorization[0]
            return need.operation if need.alternative is None else None
    return None
