"""What the proxy (`zkcoord.proxy`) reads of the frames it forwards: the answers that carry broker addresses
(rewritten), the ApiVersions it caps, the group ids a request names, and the refusals it answers itself for the
groups it coordinates (ConsumerGroupHeartbeat/Describe, TxnOffsetCommit, OffsetDelete).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from zkcoord.api_keys import CONSUMER_GROUP_APIS, GROUP_APIS, ApiKey, api_name
from zkcoord.group import consumer_messages as gcm
from zkcoord.group import messages as gm
from zkcoord.group.errors import ErrorCode
from zkcoord.server.kafka_protocol.codecs import ADVERTISED
from zkcoord.server.kafka_protocol.consumer_groups import consumer_group_response
from zkcoord.server.kafka_protocol.data_plane import find_coordinator_request
from zkcoord.server.kafka_protocol.frames import (
    UNSUPPORTED_VERSION,
    MalformedBody,
    ProtocolError,
    RequestFrame,
    peek_header,
)
from zkcoord.server.kafka_protocol.groups import group_requests

METADATA = ApiKey.METADATA
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT
OFFSET_DELETE = ApiKey.OFFSET_DELETE
CONSUMER_GROUP_HEARTBEAT = ApiKey.CONSUMER_GROUP_HEARTBEAT
API_VERSIONS = ApiKey.API_VERSIONS

_ADDRESS_CLASSES: dict[int, Any] = {
    METADATA: MetadataResponse,
    FIND_COORDINATOR: FindCoordinatorResponse,
    DESCRIBE_CLUSTER: DescribeClusterResponse,
}
# The APIs whose responses carry broker addresses: a proxy decodes these answers and rewrites the addresses.
ADDRESS_APIS = frozenset(map(int, _ADDRESS_CLASSES))
# (node id, host, port) as the broker answered -> (host, port) the client is to be told.
AddressOf = Callable[[int, str, int], tuple[str, int]]


def proxy_version_caps(hosts_groups: bool = False) -> dict[int, int]:
    """The highest version of each API a client may use through the proxy: the address-carrying responses are
    decoded with kafka-python's classes, and the group APIs (FindCoordinator included) of the groups the proxy
    coordinates are answered by zkcoord's coordinator, so those stop at what zkcoord advertises. A proxy that
    `hosts_groups` (mixed classic groups) does not offer ConsumerGroupHeartbeat/Describe (cap -1: left out), so
    a group.protocol=consumer client of such a group cannot reach the cluster's own coordinator."""
    caps = {key: int(cls.max_version) for key, cls in _ADDRESS_CLASSES.items()}
    for key in (*sorted(GROUP_APIS), FIND_COORDINATOR):
        caps[key] = min(caps.get(key, ADVERTISED[key][1]), ADVERTISED[key][1])
    if hosts_groups:
        for key in sorted(CONSUMER_GROUP_APIS):
            caps[key] = -1
    return caps


def consumer_group_refusal(req: RequestFrame, coordinated: Callable[[str], bool]) -> bytes | None:
    """The proxy's answer to a ConsumerGroupHeartbeat/Describe naming a group it coordinates (a classic group
    mixed with ZooKeeper members, where consumer-protocol members are not hosted): GROUP_ID_NOT_FOUND with the
    reason, as Kafka answers for a classic group; in a Describe, the other groups get NOT_COORDINATOR (the client
    asks again, alone). None when no named group is coordinated: the request goes to the cluster."""
    body = req.body
    if req.api_key == CONSUMER_GROUP_HEARTBEAT:
        if not coordinated(body.group_id):
            return None
        msg = _refusal_message(body.group_id)
        resp: Any = gcm.ConsumerGroupHeartbeatResponse(int(ErrorCode.GROUP_ID_NOT_FOUND), msg)
        return consumer_group_response(req, resp)
    if not any(coordinated(g) for g in body.group_ids):
        return None
    groups = tuple(
        gcm.DescribedConsumerGroup(int(ErrorCode.GROUP_ID_NOT_FOUND), g, _refusal_message(g))
        if coordinated(g)
        else gcm.DescribedConsumerGroup(int(ErrorCode.NOT_COORDINATOR), g)
        for g in body.group_ids
    )
    return consumer_group_response(req, gcm.ConsumerGroupDescribeResponse(groups))


_OFFSET_WRITE_CLASSES: dict[int, tuple[Any, Any]] = {
    TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
}
# Offset writes the proxy's coordinator does not implement: refused for its groups, forwarded for the others.
OFFSET_WRITE_APIS = frozenset(map(int, _OFFSET_WRITE_CLASSES))


def offset_write_refusal(frame: bytes | bytearray, coordinated: Callable[[str], bool]) -> bytes | None:
    """The proxy's answer (framed) to a TxnOffsetCommit/OffsetDelete request frame (without its size prefix)
    naming a group it coordinates: UNSUPPORTED_VERSION for every partition (and OffsetDelete's top level), as a
    coordinator without the API would answer; nothing is written. None when the group is not coordinated or the
    frame does not decode: the request goes to the cluster, which answers it as without the proxy."""
    head = peek_header(frame)
    if head is None or head[0] not in _OFFSET_WRITE_CLASSES:
        return None
    key, version, correlation_id = head
    req_cls, resp_cls = _OFFSET_WRITE_CLASSES[key]
    if not req_cls.min_version <= version <= req_cls.max_version:
        return None
    try:
        req = req_cls.decode(bytes(frame), version=version, header=True)
    except Exception:
        return None
    if not coordinated(req.group_id):
        return None
    topic_cls = (
        resp_cls.OffsetDeleteResponseTopic if key == OFFSET_DELETE else resp_cls.TxnOffsetCommitResponseTopic
    )
    part_cls = (
        topic_cls.OffsetDeleteResponsePartition
        if key == OFFSET_DELETE
        else topic_cls.TxnOffsetCommitResponsePartition
    )
    topics = [
        topic_cls(
            version=version,
            name=t.name,
            partitions=[
                part_cls(version=version, partition_index=p.partition_index, error_code=UNSUPPORTED_VERSION)
                for p in t.partitions
            ],
        )
        for t in req.topics or ()
    ]
    fields: dict[str, Any] = {"throttle_time_ms": 0, "topics": topics}
    if key == OFFSET_DELETE:
        fields["error_code"] = UNSUPPORTED_VERSION
    resp = resp_cls(version=version, **fields)
    resp.with_header(correlation_id=correlation_id)
    return bytes(resp.encode(header=True, framed=True))


def _refusal_message(group_id: str) -> str:
    return (
        f"group {group_id} is a classic group coordinated by the zkcoord proxy (mixed with ZooKeeper members): "
        "consumer-protocol members are not hosted there, use group.protocol=classic"
    )


def _response_error(api_key: int, api_version: int, exc: Exception) -> ProtocolError:
    name = api_name(api_key)
    return MalformedBody(f"{name} v{api_version} response does not decode: {type(exc).__name__}: {exc}",
                         api_key, api_version)  # fmt: skip


def rewrite_addresses(
    api_key: int,
    api_version: int,
    frame: bytes | bytearray,
    address_of: AddressOf,
    extra: Sequence[tuple[int, str, int]] = (),
) -> bytes:
    """A Metadata / FindCoordinator / DescribeCluster response frame (without its size prefix) with every
    broker address replaced by `address_of(node_id, host, port)`, and the brokers `extra` (node id, host, port)
    listed after the cluster's in Metadata and DescribeCluster answers (the proxy's coordinators: a client may
    drop a coordinator its metadata does not list); returned framed (size prefix included). A response that does
    not decode raises MalformedBody: the proxy never passes an address it did not map."""
    cls = _ADDRESS_CLASSES[api_key]
    try:
        obj = cls.decode(bytes(frame), version=api_version, header=True)
    except Exception as exc:  # kafka-python raises struct.error, IndexError, ValueError ... on bad input
        raise _response_error(api_key, api_version, exc) from exc
    if api_key == FIND_COORDINATOR:
        entries = list(obj.coordinators or ()) if api_version >= 4 else [obj]
        for entry in entries:
            if entry.node_id >= 0 and entry.host:
                entry.host, entry.port = address_of(entry.node_id, entry.host, entry.port)
    else:
        brokers = list(obj.brokers or ())
        for broker in brokers:
            node_id = broker.broker_id if api_key == DESCRIBE_CLUSTER else broker.node_id
            broker.host, broker.port = address_of(node_id, broker.host, broker.port)
        listed = {b.broker_id if api_key == DESCRIBE_CLUSTER else b.node_id for b in brokers}
        for node_id, host, port in extra:
            if node_id in listed:
                continue
            if api_key == DESCRIBE_CLUSTER:
                brokers.append(cls.DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=None))
            else:
                brokers.append(cls.MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=None))
        obj.brokers = brokers
    return bytes(obj.encode(header=True, framed=True))


def cap_api_versions(
    api_version: int,
    frame: bytes | bytearray,
    caps: dict[int, int],
    own: Mapping[int, tuple[int, int]] | None = None,
) -> bytes:
    """An ApiVersions response frame (without its size prefix) with each capped API's maximum lowered to
    `caps` (an API whose minimum is above its cap is left out), and the APIs in `own` listed with exactly that
    (min, max) whatever the broker said (the proxy's own SASL login); returned framed. An error answer (the
    KIP-511 v0 fallback among them) passes unchanged: it lists no version the client could use beyond the cap."""
    try:
        obj = ApiVersionsResponse.decode(bytes(frame), version=api_version, header=True)
    except Exception as exc:
        raise _response_error(API_VERSIONS, api_version, exc) from exc
    if obj.error_code != 0:
        return _SIZE.pack(len(frame)) + bytes(frame)
    kept = []
    for entry in obj.api_keys or ():
        cap = caps.get(entry.api_key)
        if cap is not None:
            if entry.min_version > cap:
                continue
            entry.max_version = min(entry.max_version, cap)
        if own is None or entry.api_key not in own:
            kept.append(entry)
    if own:
        kept.extend(
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in own.items()
        )
        kept.sort(key=lambda e: e.api_key)
    obj.api_keys = kept
    return bytes(obj.encode(header=True, framed=True))


_SIZE = struct.Struct(">i")


def group_ids(req: RequestFrame) -> tuple[str, ...]:
    """The group ids a group-API request (or a FindCoordinator for groups) names, in request order; none for
    ListGroups or a FindCoordinator for transactions."""
    if req.api_key == FIND_COORDINATOR:
        found = find_coordinator_request(req)
        return found.keys if found.key_type == 0 else ()
    ids: list[str] = []
    for r in group_requests(req):
        if isinstance(r, gm.DescribeGroupsRequest):
            ids.extend(r.groups)
        elif isinstance(r, gm.DeleteGroupsRequest):
            ids.extend(r.groups_names)
        elif not isinstance(r, gm.ListGroupsRequest):
            ids.append(r.group_id)
    return tuple(ids)
