"""What the proxy (`zkcoord.proxy`) reads of the frames it forwards: the answers that carry broker addresses
(rewritten), the ApiVersions it caps (and the consumer-protocol APIs it lists itself), the group ids a request
names, the refusals it answers itself (TxnOffsetCommit, OffsetDelete of the groups it coordinates; a
ConsumerGroupHeartbeat of another group the broker does not serve), and the topic-id Metadata it asks the cluster.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.metadata import (
    ApiVersionsResponse,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
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


def proxy_version_caps() -> dict[int, int]:
    """The highest version of each API a client may use through the proxy: the address-carrying responses are
    decoded with kafka-python's classes, and the group APIs (FindCoordinator included) of the groups the proxy
    coordinates are answered by zkcoord's coordinator, so those stop at what zkcoord advertises."""
    caps = {key: int(cls.max_version) for key, cls in _ADDRESS_CLASSES.items()}
    for key in (*sorted(GROUP_APIS), FIND_COORDINATOR):
        caps[key] = min(caps.get(key, ADVERTISED[key][1]), ADVERTISED[key][1])
    return caps


# What a proxy that coordinates groups lists of ConsumerGroupHeartbeat/Describe (KIP-848), whatever the broker says:
# zkcoord's coordinator answers them for its groups (a broker without them, Tansu 0.6.0 or a Kafka 2.x, would hide
# them from the consumer-protocol members the proxy hosts).
CONSUMER_GROUP_VERSIONS: Mapping[int, tuple[int, int]] = {
    int(k): ADVERTISED[k] for k in sorted(CONSUMER_GROUP_APIS)
}


def listed_api_keys(api_version: int, frame: bytes | bytearray) -> frozenset[int]:
    """The API keys an ApiVersions response frame (without its size prefix) lists; none for an error answer or
    one that does not decode."""
    try:
        obj = ApiVersionsResponse.decode(bytes(frame), version=api_version, header=True)
    except Exception:
        return frozenset()
    if obj.error_code != 0:
        return frozenset()
    return frozenset(int(e.api_key) for e in obj.api_keys or ())


def unserved_heartbeat(req: RequestFrame) -> bytes:
    """The proxy's answer to a ConsumerGroupHeartbeat of a group it does not coordinate, on a connection whose
    broker does not list the API (the proxy lists it for its own groups): UNSUPPORTED_VERSION with the reason,
    what the client reports without the proxy (where the broker itself gets one, it closes the connection
    unanswered: Tansu 0.6.0 does)."""
    msg = (
        f"the cluster's broker does not serve ConsumerGroupHeartbeat (KIP-848) and group {req.body.group_id} is "
        "not coordinated by the zkcoord proxy (--bridge-zk-groups): use group.protocol=classic"
    )
    return consumer_group_response(req, gcm.ConsumerGroupHeartbeatResponse(UNSUPPORTED_VERSION, msg))


def consumer_group_split(req: RequestFrame, coordinated: Callable[[str], bool]) -> str:
    """Who answers a ConsumerGroupHeartbeat/Describe: "local" (every named group is coordinated by the proxy),
    "forward" (none is), "mixed" (a Describe naming both: the proxy answers it, the others NOT_COORDINATOR, so the
    client asks their coordinator for them alone)."""
    body = req.body
    ids = (body.group_id,) if req.api_key == CONSUMER_GROUP_HEARTBEAT else tuple(body.group_ids)
    mine = [coordinated(g) for g in ids]
    if mine and all(mine):
        return "local"
    return "mixed" if any(mine) else "forward"


def describe_only(req: RequestFrame, coordinated: Callable[[str], bool]) -> RequestFrame:
    """A mixed ConsumerGroupDescribe narrowed to the groups the proxy coordinates."""
    body = dataclasses.replace(req.body, group_ids=tuple(g for g in req.body.group_ids if coordinated(g)))
    return dataclasses.replace(req, body=body)


def describe_merged(req: RequestFrame, answered: Any) -> bytes:
    """The answer to a mixed ConsumerGroupDescribe: the proxy's own answers (a ConsumerGroupDescribeResponse of
    the narrowed request), NOT_COORDINATOR for the other groups."""
    mine = {g.group_id: g for g in answered.groups}
    groups = tuple(
        mine.get(g) or gcm.DescribedConsumerGroup(int(ErrorCode.NOT_COORDINATOR), g)
        for g in req.body.group_ids
    )
    return consumer_group_response(req, gcm.ConsumerGroupDescribeResponse(groups))


def topic_metadata_request(
    api_version: int, correlation_id: int, client_id: str, names: Sequence[str] | None
) -> bytes:
    """A framed Metadata request (v10+: topic ids) for `names` (None: every topic), creating none. Below v4 a
    request naming a topic creates it on a broker with auto.create.topics.enable: ask those for every topic."""
    if names is not None and api_version < 4:
        raise ValueError(f"Metadata v{api_version} naming topics may create them; ask for every topic (None)")
    if names is None:
        topics: list[Any] | None = [] if api_version == 0 else None  # v0: an empty list is every topic
    else:
        topic_cls = MetadataRequest.MetadataRequestTopic
        topics = [topic_cls(version=api_version, name=n, topic_id=None) for n in names]
    fields: dict[str, Any] = {"topics": topics}
    if api_version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= api_version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if api_version >= 8:
        fields["include_topic_authorized_operations"] = False
    obj = MetadataRequest(version=api_version, **fields)
    obj.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(obj.encode(header=True, framed=True))


def topic_partitions(
    api_version: int, frame: bytes | bytearray
) -> tuple[int, dict[str, tuple[str | None, int]]]:
    """(correlation id, name -> (topic id as 32 hex digits or None, partition count)) of a Metadata response frame
    (any version) without its size prefix: the topics the broker has, as its metadata cache does: answered without
    error, or LEADER_NOT_AVAILABLE (a topic being created); the id None below v10 or when it is the zero uuid."""
    try:
        obj = MetadataResponse.decode(bytes(frame), version=api_version, header=True)
    except Exception as exc:
        raise _response_error(METADATA, api_version, exc) from exc
    out: dict[str, tuple[str | None, int]] = {}
    for t in obj.topics or ():
        if t.error_code not in (0, ErrorCode.LEADER_NOT_AVAILABLE) or not t.name:
            continue
        tid = getattr(t, "topic_id", None)
        hexed = getattr(tid, "hex", None)
        out[t.name] = (
            hexed if isinstance(hexed, str) and hexed.strip("0") else None,
            len(t.partitions or ()),
        )
    return obj.header.correlation_id, out


def metadata_max_version(frame: bytes | bytearray) -> tuple[int, int]:
    """(correlation id, the highest Metadata version) of an ApiVersions v0 response frame without its size prefix;
    -1: Metadata not listed."""
    try:
        obj = ApiVersionsResponse.decode(bytes(frame), version=0, header=True)
    except Exception as exc:
        raise _response_error(API_VERSIONS, 0, exc) from exc
    top = max((int(e.max_version) for e in obj.api_keys or () if e.api_key == METADATA), default=-1)
    return obj.header.correlation_id, top


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
