"""The one adapter over kafka-python 3.x protocol classes: decode request frames, encode response frames.

Nothing else in zkcoord imports `kafka.protocol`. Requests come out as a `RequestFrame` whose `body` is the
kafka-python request object, read only here: the group APIs are decoded into `zkcoord.group.messages` and the
data-plane APIs into `zkcoord.server.messages`, and responses are encoded here from those values. Every way a frame
can be wrong raises a `ProtocolError` subclass naming what was wrong; the wire layer decides whether it can
answer (UNSUPPORTED_VERSION, ApiVersions v0 fallback) or must close the connection.

Class lookups, flexible flags and compiled decoders are resolved once per (api key, version), not per request.
"""

from __future__ import annotations

import dataclasses
import re
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from zkcoord.errors import ZkcoordError
from zkcoord.group import consumer_messages as gcm
from zkcoord.group import messages as gm
from zkcoord.group.errors import ErrorCode
from zkcoord.security.acl import Session
from zkcoord.server import consumer_protocol, fastpath, prescan
from zkcoord.server import messages as dm

# Re-exported: the Metadata values predate `zkcoord.server.messages` and callers know them as kp.TopicMeta.
PartitionMeta = dm.PartitionMeta
TopicMeta = dm.TopicMeta

# -- API keys and the advertised table ---------------------------------------------------------------------------

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
DELETE_GROUPS = 42

API_NAMES = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit",
    OFFSET_FETCH: "OffsetFetch",
    FIND_COORDINATOR: "FindCoordinator",
    JOIN_GROUP: "JoinGroup",
    HEARTBEAT: "Heartbeat",
    LEAVE_GROUP: "LeaveGroup",
    SYNC_GROUP: "SyncGroup",
    DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups",
    API_VERSIONS: "ApiVersions",
    CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics",
    INIT_PRODUCER_ID: "InitProducerId",
    DELETE_GROUPS: "DeleteGroups",
}

# The Kafka 2.8 maxima (group-protocol.md §12.5): kafka-python infers "2.8" from them, librdkafka gets RecordBatch
# v2 (Produce >= 3, Fetch >= 4), kcat's librdkafka 2.0.2 picks its own maxima below these. Minimums are 0 as in
# 2.8, and served: Produce v0-v2 message sets are converted up, Fetch v0-v3 answers converted down
# (zkcoord.server.old_formats), OffsetCommit/OffsetFetch v0 go to ZooKeeper on a cluster node.
ADVERTISED: dict[int, tuple[int, int]] = {
    PRODUCE: (0, 9),
    FETCH: (0, 12),
    LIST_OFFSETS: (0, 6),
    METADATA: (0, 12),  # v12: topics by id, which librdkafka needs for KIP-848 assignments
    OFFSET_COMMIT: (0, 9),  # v9: consumer-protocol members (member id + member epoch, KIP-848)
    OFFSET_FETCH: (0, 9),
    FIND_COORDINATOR: (0, 3),
    JOIN_GROUP: (0, 7),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 4),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 5),  # v5: the group type (classic, consumer) and a types filter (KIP-848)
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (0, 7),
    DELETE_TOPICS: (0, 5),  # v6 names topics by id: not served (ids are derived from names, topic_ids.py)
    INIT_PRODUCER_ID: (0, 4),
    DELETE_GROUPS: (0, 2),
}

# What the server decodes and answers: the advertised windows, plus versions a client may send when pinned
# to a newer table (FindCoordinator v4 batched keys, ApiVersions v4, ...). Bounded by the class maxima.
ACCEPTED: dict[int, tuple[int, int]] = {
    **ADVERTISED,
    FIND_COORDINATOR: (0, 4),
    API_VERSIONS: (0, 4),
    JOIN_GROUP: (0, 9),
    LEAVE_GROUP: (0, 5),
    METADATA: (0, 12),
    LIST_OFFSETS: (0, 7),
}

_CLASSES: dict[int, tuple[Any, Any]] = {
    PRODUCE: (ProduceRequest, ProduceResponse),
    FETCH: (FetchRequest, FetchResponse),
    LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    METADATA: (MetadataRequest, MetadataResponse),
    OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
}

# Error codes the wire layer itself produces (from the one enum).
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION
INVALID_REQUEST = ErrorCode.INVALID_REQUEST

# -- errors ---------------------------------------------------------------------------------------------------


class ProtocolError(ZkcoordError, ValueError):
    """A request frame the server cannot serve; `correlation_id` is None when even the header is unreadable."""

    code = INVALID_REQUEST

    def __init__(
        self, reason: str, api_key: int = -1, api_version: int = -1, correlation_id: int | None = None
    ):
        name = API_NAMES.get(api_key, f"api_key {api_key}")
        where = f"{name} v{api_version}" if api_key >= 0 else "request"
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedFrame(ProtocolError):
    """The request header is truncated or garbled; the connection must be closed."""


class UnknownApiKey(ProtocolError):
    """An API this server does not implement; Kafka closes the connection."""


class UnsupportedVersion(ProtocolError):
    """A known API at a version outside the accepted window; answered with UNSUPPORTED_VERSION where possible."""

    code = UNSUPPORTED_VERSION


class MalformedBody(ProtocolError):
    """The body does not decode at the version in its header (truncated, trailing bytes, bad lengths)."""


# -- decoding -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestFrame:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # kafka-python's request object; for Heartbeat/OffsetCommit the zkcoord value (see the fast paths)
    flexible: bool
    session: Session | None = None  # who sent it (principal, client address); None: User:ANONYMOUS


@dataclass(frozen=True, slots=True)
class _Codec:
    request_cls: Any
    response_cls: Any
    decode: Callable[[memoryview, int], tuple[Any, int]]
    flexible: bool
    response_flexible: bool
    plan: prescan.Plan | None  # None: a hand-written codec that bounds itself


def _build_codecs() -> dict[tuple[int, int], _Codec]:
    codecs: dict[tuple[int, int], _Codec] = {}
    for key, (lo, hi) in ACCEPTED.items():
        req_cls, resp_cls = _CLASSES[key]
        hi = min(hi, req_cls.max_version)
        for version in range(lo, hi + 1):
            flexible = bool(req_cls.flexible_version_q(version))
            dec = req_cls._struct.compiled_decode_from(
                version, compact=flexible, tagged=flexible, data_class=req_cls
            )
            resp_flexible = bool(resp_cls.flexible_version_q(version)) and key != API_VERSIONS
            plan = prescan.Plan(req_cls, version, flexible)
            codecs[(key, version)] = _Codec(req_cls, resp_cls, dec, flexible, resp_flexible, plan)
    return codecs


_CODECS = _build_codecs()
_HEAD = struct.Struct(">hhih")
_CLIENT_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise IndexError("uvarint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("uvarint longer than 5 bytes")


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """(api_key, api_version, correlation_id) if the frame has them, else None."""
    if len(frame) < 8:
        return None
    key, version, corr = struct.unpack_from(">hhi", frame, 0)
    return key, version, corr


def decode_request(frame: bytes | bytearray | memoryview, session: Session | None = None) -> RequestFrame:
    """Decode one request frame (without its 4-byte size prefix), sent by `session`'s principal."""
    buf = memoryview(frame)
    if len(buf) < 10:
        peek = peek_header(buf)
        raise MalformedFrame(
            f"frame of {len(buf)} bytes is shorter than a request header (10 bytes)",
            *(peek if peek else (-1, -1, None)),
        )
    key, version, corr, cid_len = _HEAD.unpack_from(buf, 0)
    codec = _CODECS.get((key, version))
    if codec is None:
        if key not in ACCEPTED:
            raise UnknownApiKey(f"api key {key} is not supported", key, version, corr)
        lo, hi = ACCEPTED[key]
        raise UnsupportedVersion(
            f"version {version} is outside the supported range {lo}-{hi}", key, version, corr
        )
    pos = 10
    client_id: str | None = None
    try:
        if cid_len >= 0:
            if pos + cid_len > len(buf):
                raise IndexError(f"client_id of {cid_len} bytes runs past the frame end")
            client_id = bytes(buf[pos : pos + cid_len]).decode("utf-8")
            pos += cid_len
        elif cid_len != -1:
            raise ValueError(f"client_id length {cid_len}")
        header_tags = 0
        if codec.flexible:
            ntags, pos = _read_uvarint(buf, pos)
            if ntags > prescan.MAX_TAGGED_FIELDS:
                raise ValueError(
                    f"{ntags} tagged fields, more than {prescan.MAX_TAGGED_FIELDS} in one request"
                )
            header_tags = ntags
            for _ in range(ntags):
                _tag, pos = _read_uvarint(buf, pos)
                size, pos = _read_uvarint(buf, pos)
                pos += size
            if pos > len(buf):
                raise IndexError("header tagged fields run past the frame end")
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise MalformedFrame(f"bad request header: {exc}", key, version, corr) from exc
    fast = _fast_request(key, version, frame, pos)
    if fast is not None:
        return RequestFrame(key, version, corr, client_id, fast, codec.flexible, session)
    if codec.plan is None:  # a hand-written codec (consumer_protocol), bounded on its own
        try:
            body = codec.decode(buf, pos)[0]
        except consumer_protocol.BodyError as exc:
            raise MalformedBody(f"body does not decode: {exc}", key, version, corr) from exc
        return RequestFrame(key, version, corr, client_id, body, codec.flexible, session)
    try:
        # Bounded before the generic decoder runs: lengths against bytes left, forbidden nulls, and nested
        # unknown tagged fields dropped (kafka-python copies the rest of the frame per non-empty section).
        unknown_tags = codec.plan.scan(buf, pos, prescan.MAX_TAGGED_FIELDS - header_tags)
    except prescan.PrescanError as exc:
        raise MalformedBody(f"body does not decode: {exc}", key, version, corr) from exc
    if unknown_tags:
        buf = memoryview(prescan.strip_unknown_tags(buf, unknown_tags))
    try:
        body, end = codec.decode(buf, pos)
    except Exception as exc:  # kafka-python raises struct.error, IndexError, ValueError, ... on bad input
        raise MalformedBody(f"body does not decode: {type(exc).__name__}: {exc}", key, version, corr) from exc
    if end != len(buf):
        what = "is truncated" if end > len(buf) else f"has {len(buf) - end} trailing bytes"
        raise MalformedBody(
            f"body {what} (frame {len(buf)} bytes, decoded to byte {end})", key, version, corr
        )
    return RequestFrame(key, version, corr, client_id, body, codec.flexible, session)


def expects_response(req: RequestFrame) -> bool:
    """False only for Produce with acks=0, which Kafka never answers."""
    return not (req.api_key == PRODUCE and req.body.acks == 0)


def valid_client_software(req: RequestFrame) -> bool:
    """ApiVersions v3+: client_software_name/version must match Kafka's pattern (else INVALID_REQUEST)."""
    if req.api_version < 3:
        return True
    name = req.body.client_software_name or ""
    ver = req.body.client_software_version or ""
    return bool(_CLIENT_SOFTWARE.match(name)) and bool(_CLIENT_SOFTWARE.match(ver))


# -- encoding -------------------------------------------------------------------------------------------------


_RESP_HEAD = struct.Struct(">ii")
_RESP_HEAD_FLEX = struct.Struct(">iib")


def _frame(key: int, version: int, correlation_id: int, body: bytes | bytearray) -> bytes:
    codec = _CODECS.get((key, version))
    flexible = codec.response_flexible if codec else False
    if flexible:
        return _RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + bytes(body)
    return _RESP_HEAD.pack(len(body) + 4, correlation_id) + bytes(body)


def _encode(req: RequestFrame, resp: Any) -> bytes:
    return _frame(req.api_key, req.api_version, req.correlation_id, resp.encode(version=req.api_version))


def _resp_cls(req: RequestFrame) -> Any:
    return _CODECS[(req.api_key, req.api_version)].response_cls


def api_versions_response(req: RequestFrame, error_code: int = 0) -> bytes:
    cls = ApiVersionsResponse
    keys = [
        cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ADVERTISED.items())
    ]
    resp = cls(version=req.api_version, error_code=error_code, api_keys=keys, throttle_time_ms=0)
    return _encode(req, resp)


def api_versions_fallback(correlation_id: int) -> bytes:
    """KIP-511: an ApiVersions version this server does not know is answered in the v0 body encoding with
    UNSUPPORTED_VERSION and the one ApiVersions entry, so the client can retry with a version we support."""
    lo, hi = ADVERTISED[API_VERSIONS]
    cls = ApiVersionsResponse
    resp = cls(
        version=0,
        error_code=UNSUPPORTED_VERSION,
        api_keys=[cls.ApiVersion(api_key=API_VERSIONS, min_version=lo, max_version=hi)],
    )
    return _frame_v0(correlation_id, resp.encode(version=0))


def _frame_v0(correlation_id: int, body: bytes | bytearray) -> bytes:
    return _RESP_HEAD.pack(len(body) + 4, correlation_id) + bytes(body)


def error_response(req: RequestFrame, error_code: int) -> bytes | None:
    """A whole-request error answer for APIs whose response has a top-level error code; else None."""
    if req.api_key in consumer_protocol.WINDOWS:
        body = consumer_protocol.error_body(req.api_key, req.api_version, error_code)
        return None if body is None else _frame(req.api_key, req.api_version, req.correlation_id, body)
    cls = _resp_cls(req)
    fields = cls._struct.fields
    if "error_code" not in fields or not fields["error_code"].for_version_q(req.api_version):
        return None
    resp = cls(version=req.api_version, error_code=error_code)
    return _encode(req, resp)


def unsupported_version_response(api_key: int, api_version: int, correlation_id: int) -> bytes | None:
    """UNSUPPORTED_VERSION for a known API at a version the classes can still encode; else None (close)."""
    if api_key == consumer_protocol.CONSUMER_GROUP_HEARTBEAT and api_version >= 0:
        # Kafka answers with the highest version it knows; every version of this response is flexible.
        hi = consumer_protocol.WINDOWS[api_key][1]
        body = consumer_protocol.error_body(api_key, hi, UNSUPPORTED_VERSION)
        assert body is not None
        return _RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + body
    pair = _CLASSES.get(api_key)
    if pair is None:
        return None
    resp_cls = pair[1]
    if not 0 <= api_version <= resp_cls.max_version:
        return None
    fields = resp_cls._struct.fields
    if "error_code" not in fields or not fields["error_code"].for_version_q(api_version):
        return None
    try:
        body = resp_cls(version=api_version, error_code=UNSUPPORTED_VERSION).encode(version=api_version)
    except Exception:
        return None
    flexible = bool(resp_cls.flexible_version_q(api_version))
    if flexible:
        return _RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + bytes(body)
    return _frame_v0(correlation_id, body)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, **fields: Any
) -> bytes:
    """A framed request (for tests and benchmarks that speak the wire protocol without a client library)."""
    req_cls = _CLASSES[api_key][0]
    obj = req_cls(version=api_version, **fields)
    obj.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(obj.encode(header=True, framed=True))


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, response object) for one response frame without its size prefix (tests, benchmarks)."""
    resp_cls = _CLASSES[api_key][1]
    obj = resp_cls.decode(frame, version=api_version, header=True)
    return obj.header.correlation_id, obj


# -- group APIs: kafka-python objects <-> zkcoord.group.messages ------------------------------------------------

GROUP_APIS = frozenset(
    {
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        DELETE_GROUPS,
    }
)


def _s(value: str | None) -> str:
    return value if value is not None else ""


def group_requests(req: RequestFrame, client_host: str = "") -> list[gm.GroupRequest]:
    """The zkcoord request(s) for one group-API frame: one, except OffsetFetch v8+ (one per group)."""
    b = req.body
    v = req.api_version
    key = req.api_key
    if type(b) in _FAST_VALUES:
        return [b]  # already a zkcoord value (decoded by zkcoord.server.fastpath)
    if key == HEARTBEAT:
        return [
            gm.HeartbeatRequest(
                v, b.group_id, b.generation_id, b.member_id, b.group_instance_id if v >= 3 else None
            )
        ]
    if key == JOIN_GROUP:
        return [
            gm.JoinGroupRequest(
                api_version=v,
                group_id=b.group_id,
                session_timeout_ms=b.session_timeout_ms,
                rebalance_timeout_ms=b.rebalance_timeout_ms if v >= 1 else -1,
                member_id=b.member_id,
                group_instance_id=b.group_instance_id if v >= 5 else None,
                protocol_type=b.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in b.protocols),
                reason=b.reason if v >= 8 else None,
                client_id=_s(req.client_id),
                client_host=client_host,
            )
        ]
    if key == SYNC_GROUP:
        return [
            gm.SyncGroupRequest(
                api_version=v,
                group_id=b.group_id,
                generation_id=b.generation_id,
                member_id=b.member_id,
                group_instance_id=b.group_instance_id if v >= 3 else None,
                protocol_type=b.protocol_type if v >= 5 else None,
                protocol_name=b.protocol_name if v >= 5 else None,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in b.assignments or ()),
            )
        ]
    if key == LEAVE_GROUP:
        if v >= 3:
            members = tuple(
                gm.LeaveGroupMember(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                for m in b.members
            )
        else:
            members = (gm.LeaveGroupMember(b.member_id, None),)
        return [gm.LeaveGroupRequest(v, b.group_id, members)]
    if key == OFFSET_COMMIT:
        topics = tuple(
            gm.OffsetCommitRequestTopic(
                t.name,
                tuple(
                    gm.OffsetCommitRequestPartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                        committed_metadata=p.committed_metadata,
                        commit_timestamp=p.commit_timestamp if v == 1 else -1,
                    )
                    for p in t.partitions
                ),
            )
            for t in b.topics
        )
        return [
            gm.OffsetCommitRequest(
                api_version=v,
                group_id=b.group_id,
                generation_id=b.generation_id_or_member_epoch if v >= 1 else -1,
                member_id=b.member_id if v >= 1 else "",
                topics=topics,
                group_instance_id=b.group_instance_id if v >= 7 else None,
                retention_time_ms=b.retention_time_ms if 2 <= v <= 4 else -1,
            )
        ]
    if key == OFFSET_FETCH:
        stable = bool(b.require_stable) if v >= 7 else False
        if v >= 8:
            return [
                gm.OffsetFetchRequest(
                    v,
                    g.group_id,
                    None
                    if g.topics is None
                    else tuple(
                        gm.OffsetFetchRequestTopic(t.name, tuple(t.partition_indexes)) for t in g.topics
                    ),
                    stable,
                    g.member_id if v >= 9 else None,
                    g.member_epoch if v >= 9 else -1,
                )
                for g in b.groups
            ]
        topics_v = (
            None
            if b.topics is None
            else tuple(gm.OffsetFetchRequestTopic(t.name, tuple(t.partition_indexes)) for t in b.topics)
        )
        return [gm.OffsetFetchRequest(v, b.group_id, topics_v, stable)]
    if key == DESCRIBE_GROUPS:
        return [
            gm.DescribeGroupsRequest(
                v, tuple(b.groups), bool(b.include_authorized_operations) if v >= 3 else False
            )
        ]
    if key == LIST_GROUPS:
        return [
            gm.ListGroupsRequest(
                v,
                tuple(b.states_filter or ()) if v >= 4 else (),
                tuple(b.types_filter or ()) if v >= 5 else (),
            )
        ]
    if key == DELETE_GROUPS:
        return [gm.DeleteGroupsRequest(v, tuple(b.groups_names))]
    raise UnknownApiKey("not a group API", key, v, req.correlation_id)


_HEARTBEAT_V0 = struct.Struct(">h")
_HEARTBEAT_V1 = struct.Struct(">ih")


def group_response(req: RequestFrame, responses: Sequence[gm.GroupResponse]) -> bytes:
    """Encode the zkcoord response(s) to one group-API frame at its version."""
    v = req.api_version
    key = req.api_key
    r: Any = responses[0]
    if key == HEARTBEAT:
        # The hottest group API: its body is fixed fields, so it is packed directly (byte-identical to
        # HeartbeatResponse.encode, checked in tests) instead of building a response object per heartbeat.
        if v == 0:
            body = _HEARTBEAT_V0.pack(r.error_code)
        elif v < 4:
            body = _HEARTBEAT_V1.pack(0, r.error_code)
        else:
            body = _HEARTBEAT_V1.pack(0, r.error_code) + b"\x00"  # v4 is flexible: empty tagged fields
        return _frame(key, v, req.correlation_id, body)
    if key == JOIN_GROUP:
        M = JoinGroupResponse.JoinGroupResponseMember
        protocol_name = r.protocol_name if v >= 7 else _s(r.protocol_name)
        resp = JoinGroupResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=protocol_name,
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                M(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
                for m in r.members
            ],
        )
        return _encode(req, resp)
    if key == SYNC_GROUP:
        resp = SyncGroupResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )
        return _encode(req, resp)
    if key == LEAVE_GROUP:
        MR = LeaveGroupResponse.MemberResponse
        if v >= 3:
            resp = LeaveGroupResponse(
                version=v,
                throttle_time_ms=0,
                error_code=r.error_code,
                members=[
                    MR(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error_code)
                    for m in r.members
                ],
            )
        else:
            error = r.error_code if r.error_code != 0 or not r.members else r.members[0].error_code
            resp = LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=error)
        return _encode(req, resp)
    if key == OFFSET_COMMIT:
        packed = fastpath.offset_commit_response(v, req.correlation_id, r.topics)
        if packed is not None:
            return packed
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        resp = OffsetCommitResponse(
            version=v,
            throttle_time_ms=0,
            topics=[
                T(
                    name=t.name,
                    partitions=[
                        P(partition_index=p.partition_index, error_code=p.error_code) for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )
        return _encode(req, resp)
    if key == OFFSET_FETCH:
        return _encode(req, _offset_fetch_response(req, responses))
    if key == DESCRIBE_GROUPS:
        G = DescribeGroupsResponse.DescribedGroup
        DM = G.DescribedGroupMember
        resp = DescribeGroupsResponse(
            version=v,
            throttle_time_ms=0,
            groups=[
                G(
                    error_code=g.error_code,
                    error_message=None,
                    group_id=g.group_id,
                    group_state=g.group_state,
                    protocol_type=g.protocol_type,
                    protocol_data=g.protocol_data,
                    members=[
                        DM(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.member_metadata,
                            member_assignment=m.member_assignment,
                        )
                        for m in g.members
                    ],
                    authorized_operations=_bitfield(g.authorized_operations),
                )
                for g in r.groups
            ],
        )
        return _encode(req, resp)
    if key == LIST_GROUPS:
        LG = ListGroupsResponse.ListedGroup
        resp = ListGroupsResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error_code,
            groups=[
                LG(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.group_state,
                    group_type=g.group_type,
                )
                for g in r.groups
            ],
        )
        return _encode(req, resp)
    if key == DELETE_GROUPS:
        DR = DeleteGroupsResponse.DeletableGroupResult
        resp = DeleteGroupsResponse(
            version=v,
            throttle_time_ms=0,
            results=[DR(group_id=x.group_id, error_code=x.error_code) for x in r.results],
        )
        return _encode(req, resp)
    raise UnknownApiKey("not a group API", key, v, req.correlation_id)


def _offset_fetch_response(req: RequestFrame, responses: Sequence[gm.GroupResponse]) -> Any:
    v = req.api_version
    cls = OffsetFetchResponse
    if v >= 8:
        G = cls.OffsetFetchResponseGroup
        GT = G.OffsetFetchResponseTopics
        GP = GT.OffsetFetchResponsePartitions
        groups = []
        for greq, gresp in zip(group_requests(req), responses, strict=True):
            assert isinstance(greq, gm.OffsetFetchRequest) and isinstance(gresp, gm.OffsetFetchResponse)
            groups.append(
                G(
                    group_id=greq.group_id,
                    error_code=gresp.error_code,
                    topics=[
                        GT(
                            name=t.name,
                            partitions=[
                                GP(
                                    partition_index=p.partition_index,
                                    committed_offset=p.committed_offset,
                                    committed_leader_epoch=p.committed_leader_epoch,
                                    metadata=p.metadata,
                                    error_code=p.error_code,
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in gresp.topics
                    ],
                )
            )
        return cls(version=v, throttle_time_ms=0, groups=groups)
    r = responses[0]
    assert isinstance(r, gm.OffsetFetchResponse)
    T = cls.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    return cls(
        version=v,
        throttle_time_ms=0,
        error_code=r.error_code,
        topics=[
            T(
                name=t.name,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        # before v2 there is no top-level error: a group-wide error goes into each partition
                        error_code=p.error_code if v >= 2 or r.error_code == 0 else r.error_code,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )


def _bitfield(value: int) -> set[int] | None:
    """kafka-python encodes authorized-operations bitfields from a set of bit numbers; None = INT32_MIN (omitted)."""
    if value == -(2**31):
        return None
    return {bit for bit in range(32) if value >> bit & 1}


# -- data-plane APIs: kafka-python objects <-> zkcoord.server.messages ------------------------------------------
# One decoder per request and one encoder per response, as for the group APIs above: the broker reads and
# writes only `zkcoord.server.messages` values. Version differences are settled here.


def metadata_request(req: RequestFrame) -> dm.MetadataRequest:
    b = req.body
    v = req.api_version
    names: tuple[str, ...] | None = None
    ids: tuple[uuid.UUID, ...] = ()
    if b.topics is not None and not (v == 0 and not b.topics):  # v0 asks for every topic by an empty list
        names = tuple(t.name for t in b.topics if t.name is not None)
        if v >= 10:
            ids = tuple(t.topic_id for t in b.topics if t.name is None and t.topic_id is not None)
    return dm.MetadataRequest(
        v,
        names,
        v < 4 or bool(b.allow_auto_topic_creation),
        8 <= v <= 10 and bool(b.include_cluster_authorized_operations),
        v >= 8 and bool(b.include_topic_authorized_operations),
        ids,
    )


_ZERO_UUID = uuid.UUID(int=0)


def metadata_response(req: RequestFrame, r: dm.MetadataResponse) -> bytes:
    cls = MetadataResponse
    B, T = cls.MetadataResponseBroker, cls.MetadataResponseTopic
    P = T.MetadataResponsePartition
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        brokers=[B(node_id=b.node_id, host=b.host, port=b.port, rack=None) for b in r.brokers],
        cluster_id=r.cluster_id,
        controller_id=r.controller_id,
        topics=[
            T(
                error_code=t.error_code,
                name=t.name,
                topic_id=t.topic_id or _ZERO_UUID,
                is_internal=t.internal,
                authorized_operations=_bitfield(t.authorized_operations),
                partitions=[
                    P(
                        error_code=p.error_code,
                        partition_index=p.index,
                        leader_id=p.leader,
                        leader_epoch=0,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.replicas),
                        offline_replicas=[],
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
        authorized_operations=_bitfield(r.cluster_authorized_operations),
    )
    return _encode(req, resp)


def find_coordinator_request(req: RequestFrame) -> dm.FindCoordinatorRequest:
    b = req.body
    v = req.api_version
    keys = tuple(b.coordinator_keys or ()) if v >= 4 else (b.key,)
    return dm.FindCoordinatorRequest(v, b.key_type if v >= 1 else 0, keys)


def find_coordinator_response(req: RequestFrame, r: dm.FindCoordinatorResponse) -> bytes:
    cls = FindCoordinatorResponse
    if req.api_version >= 4:
        C = cls.Coordinator
        resp = cls(
            version=req.api_version,
            throttle_time_ms=0,
            coordinators=[
                C(
                    key=c.key,
                    node_id=c.node_id,
                    host=c.host,
                    port=c.port,
                    error_code=c.error_code,
                    error_message=c.error_message,
                )
                for c in r.coordinators
            ],
        )
    else:
        c = r.coordinators[0]
        resp = cls(
            version=req.api_version,
            throttle_time_ms=0,
            error_code=c.error_code,
            error_message=c.error_message,
            node_id=c.node_id,
            host=c.host,
            port=c.port,
        )
    return _encode(req, resp)


def create_topics_request(req: RequestFrame) -> dm.CreateTopicsRequest:
    b = req.body
    v = req.api_version
    topics = tuple(
        dm.CreatableTopic(
            t.name,
            t.num_partitions,
            t.replication_factor,
            len(t.assignments or ()),
            tuple((c.name, c.value) for c in (t.configs or ())),
        )
        for t in b.topics
    )
    return dm.CreateTopicsRequest(v, topics, bool(b.validate_only) if v >= 1 else False)


def create_topics_response(req: RequestFrame, r: dm.CreateTopicsResponse) -> bytes:
    cls = CreateTopicsResponse
    R = cls.CreatableTopicResult
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        topics=[
            R(
                name=t.name,
                error_code=t.error_code,
                error_message=t.error_message,
                num_partitions=t.num_partitions if t.error_code == 0 else -1,
                replication_factor=1 if t.error_code == 0 else -1,
                configs=[],
                topic_config_error_code=t.topic_config_error_code,
            )
            for t in r.topics
        ],
    )
    return _encode(req, resp)


def delete_topics_request(req: RequestFrame) -> dm.DeleteTopicsRequest:
    b = req.body
    return dm.DeleteTopicsRequest(req.api_version, tuple(b.topic_names or ()), int(b.timeout_ms))


def delete_topics_response(req: RequestFrame, r: dm.DeleteTopicsResponse) -> bytes:
    cls = DeleteTopicsResponse
    R = cls.DeletableTopicResult
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        responses=[R(name=t.name, error_code=t.error_code, error_message=t.error_message) for t in r.topics],
    )
    return _encode(req, resp)


def produce_request(req: RequestFrame) -> dm.ProduceRequest:
    b = req.body
    topics = tuple(
        dm.ProduceTopic(t.name, tuple(dm.ProducePartition(p.index, p.records) for p in t.partition_data))
        for t in b.topic_data
    )
    return dm.ProduceRequest(req.api_version, b.acks, topics)


def produce_response(req: RequestFrame, r: dm.ProduceResponse) -> bytes:
    cls = ProduceResponse
    T = cls.TopicProduceResponse
    P = T.PartitionProduceResponse
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        responses=[
            T(
                name=t.name,
                partition_responses=[
                    P(
                        index=p.index,
                        error_code=p.error_code,
                        base_offset=p.base_offset,
                        log_append_time_ms=-1,
                        log_start_offset=p.log_start_offset,
                        record_errors=[],
                        error_message=p.error_message,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return _encode(req, resp)


def list_offsets_request(req: RequestFrame) -> dm.ListOffsetsRequest:
    topics = tuple(
        dm.ListOffsetsTopic(
            t.name, tuple(dm.ListOffsetsPartition(p.partition_index, p.timestamp) for p in t.partitions)
        )
        for t in req.body.topics
    )
    return dm.ListOffsetsRequest(req.api_version, topics)


def list_offsets_response(req: RequestFrame, r: dm.ListOffsetsResponse) -> bytes:
    cls = ListOffsetsResponse
    T = cls.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    v0 = req.api_version == 0
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        topics=[
            T(
                name=t.name,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        old_style_offsets=[p.offset] if v0 and p.offset >= 0 else [],
                        timestamp=p.timestamp,
                        offset=p.offset,
                        leader_epoch=-1 if p.offset < 0 else 0,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return _encode(req, resp)


def fetch_request(req: RequestFrame) -> dm.FetchRequest:
    b = req.body
    v = req.api_version
    topics = tuple(
        dm.FetchTopic(
            t.topic,
            tuple(
                dm.FetchPartition(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions
            ),
        )
        for t in b.topics
    )
    return dm.FetchRequest(
        v, b.max_wait_ms, b.min_bytes, b.max_bytes if v >= 3 else 2**31 - 1, topics, b.replica_id
    )


def fetch_response(req: RequestFrame, r: dm.FetchResponse) -> bytes:
    cls = FetchResponse
    T = cls.FetchableTopicResponse
    P = T.PartitionData
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=r.error_code,
        session_id=0,
        responses=[
            T(
                topic=t.topic,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.high_watermark,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=p.records,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return _encode(req, resp)


def init_producer_id_request(req: RequestFrame) -> dm.InitProducerIdRequest:
    return dm.InitProducerIdRequest(req.api_version, req.body.transactional_id)


def init_producer_id_response(req: RequestFrame, r: dm.InitProducerIdResponse) -> bytes:
    resp = InitProducerIdResponse(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=r.error_code,
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
    )
    return _encode(req, resp)


# -- fast paths: Heartbeat and OffsetCommit without the generic per-field machinery ---------------------------
# zkcoord.server.fastpath reads these requests straight into zkcoord values (the frame's `body` is then that
# value, which `group_requests` passes through) and packs OffsetCommit answers; anything it is not sure of comes
# back None and takes the generic path above. Equality with the generic path is a property test.

_FAST_VALUES = (gm.HeartbeatRequest, gm.OffsetCommitRequest)


def _fast_request(
    key: int, version: int, frame: bytes | bytearray | memoryview, pos: int
) -> gm.HeartbeatRequest | gm.OffsetCommitRequest | None:
    if key == HEARTBEAT:
        return fastpath.decode_heartbeat(frame if type(frame) is bytes else bytes(frame), pos, version)
    if key == OFFSET_COMMIT:
        return fastpath.decode_offset_commit(frame if type(frame) is bytes else bytes(frame), pos, version)
    return None


# -- SASL: SaslHandshake (17) and SaslAuthenticate (36) ------------------------------------------------------------
# Kept in one section of its own (issue 15): the codecs are added to the tables above at import, so the wire
# layer decodes and answers them like any other API. Kafka 2.8's windows: SaslHandshake 0-1 (v1: the tokens go in
# SaslAuthenticate), SaslAuthenticate 0-2 (v2 flexible). Handshake v0 is advertised because librdkafka enables
# SASL only when the window includes 0, but the v0 raw-token flow (tokens without a Kafka header after a v0
# handshake) is not served: a v0 handshake is answered UNSUPPORTED_VERSION (listener_security).

from kafka.protocol.sasl import (  # noqa: E402  (the section's own imports, kept with it)
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


def _add_sasl_apis() -> None:
    for key, name, window, classes in (
        (SASL_HANDSHAKE, "SaslHandshake", (0, 1), (SaslHandshakeRequest, SaslHandshakeResponse)),
        (SASL_AUTHENTICATE, "SaslAuthenticate", (0, 2), (SaslAuthenticateRequest, SaslAuthenticateResponse)),
    ):
        API_NAMES[key] = name
        ADVERTISED[key] = ACCEPTED[key] = window
        _CLASSES[key] = classes
        req_cls, resp_cls = classes
        for version in range(window[0], window[1] + 1):
            flexible = bool(req_cls.flexible_version_q(version))
            dec = req_cls._struct.compiled_decode_from(
                version, compact=flexible, tagged=flexible, data_class=req_cls
            )
            plan = prescan.Plan(req_cls, version, flexible)
            _CODECS[(key, version)] = _Codec(req_cls, resp_cls, dec, flexible, flexible, plan)


_add_sasl_apis()


def sasl_handshake_mechanism(req: RequestFrame) -> str:
    return str(req.body.mechanism)


def sasl_handshake_response(req: RequestFrame, error_code: int, mechanisms: Sequence[str]) -> bytes:
    return _encode(
        req,
        SaslHandshakeResponse(version=req.api_version, error_code=error_code, mechanisms=list(mechanisms)),
    )


def sasl_auth_bytes(req: RequestFrame) -> bytes:
    return bytes(req.body.auth_bytes)


def sasl_authenticate_response(
    req: RequestFrame, error_code: int, error_message: str | None, auth_bytes: bytes = b""
) -> bytes:
    resp = SaslAuthenticateResponse(
        version=req.api_version,
        error_code=error_code,
        error_message=error_message,
        auth_bytes=auth_bytes,
        session_lifetime_ms=0,  # no re-authentication required (KIP-368 off)
    )
    return _encode(req, resp)


# -- the consumer rebalance protocol (KIP-848): ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) ----------
# kafka-python has no classes for them: the codecs are hand-written in zkcoord.server.consumer_protocol and added to
# the tables here, so the wire layer advertises, decodes and frames them like any other API.

CONSUMER_GROUP_HEARTBEAT = consumer_protocol.CONSUMER_GROUP_HEARTBEAT
CONSUMER_GROUP_DESCRIBE = consumer_protocol.CONSUMER_GROUP_DESCRIBE
CONSUMER_GROUP_APIS = frozenset(consumer_protocol.WINDOWS)


def _add_consumer_group_apis() -> None:
    for key, (lo, hi) in consumer_protocol.WINDOWS.items():
        API_NAMES[key] = consumer_protocol.NAMES[key]
        ADVERTISED[key] = ACCEPTED[key] = (lo, hi)
        decode = consumer_protocol.DECODERS[key]
        for version in range(lo, hi + 1):

            def dec(buf: memoryview, pos: int, _d: Any = decode, _v: int = version) -> tuple[Any, int]:
                return _d(buf, pos, _v), len(buf)

            _CODECS[(key, version)] = _Codec(None, None, dec, True, True, None)


_add_consumer_group_apis()


def consumer_group_request(req: RequestFrame, client_host: str = "") -> Any:
    """The zkcoord value of a ConsumerGroupHeartbeat/Describe frame; the heartbeat gets the header's client id and
    the connection's host."""
    body = req.body
    if req.api_key == CONSUMER_GROUP_HEARTBEAT:
        host = client_host or (req.session.host if req.session is not None else "")
        return dataclasses.replace(body, client_id=req.client_id or "", client_host=host)
    return body


def consumer_group_response(req: RequestFrame, resp: Any) -> bytes:
    if req.api_key == CONSUMER_GROUP_HEARTBEAT:
        body = consumer_protocol.encode_heartbeat_response(resp, req.api_version)
    else:
        body = consumer_protocol.encode_describe_response(resp, req.api_version)
    return _frame(req.api_key, req.api_version, req.correlation_id, body)


def encode_consumer_group_request(correlation_id: int, client_id: str | None, value: Any) -> bytes:
    """A framed ConsumerGroupHeartbeat/Describe request (request header v2) for tests, benchmarks and the fuzzer."""
    if isinstance(value, gcm.ConsumerGroupHeartbeatRequest):
        key, body = CONSUMER_GROUP_HEARTBEAT, consumer_protocol.encode_heartbeat_request(value)
    else:
        key, body = CONSUMER_GROUP_DESCRIBE, consumer_protocol.encode_describe_request(value)
    cid = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    )
    head = struct.pack(">hhi", key, value.api_version, correlation_id) + cid + b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + body


def decode_consumer_group_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, response value) of a ConsumerGroupHeartbeat/Describe response frame without its size
    prefix (tests): the inverse of `consumer_group_response`."""
    correlation_id = struct.unpack_from(">i", frame, 0)[0]
    return correlation_id, consumer_protocol.decode_response(api_key, api_version, frame[5:])


# -- the proxy (zkcoord.proxy): the few responses it must read -------------------------------------------------

DESCRIBE_CLUSTER = 60
_ADDRESS_CLASSES: dict[int, Any] = {
    METADATA: MetadataResponse,
    FIND_COORDINATOR: FindCoordinatorResponse,
    DESCRIBE_CLUSTER: DescribeClusterResponse,
}
# The APIs whose responses carry broker addresses: a proxy decodes these answers and rewrites the addresses.
ADDRESS_APIS = frozenset(_ADDRESS_CLASSES)
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
        for key in CONSUMER_GROUP_APIS:
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


TXN_OFFSET_COMMIT = 28
OFFSET_DELETE = 47
_OFFSET_WRITE_CLASSES: dict[int, tuple[Any, Any]] = {
    TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
}
# Offset writes the proxy's coordinator does not implement: refused for its groups, forwarded for the others.
OFFSET_WRITE_APIS = frozenset(_OFFSET_WRITE_CLASSES)


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
    name = API_NAMES.get(api_key, f"api_key {api_key}")
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


def produce_acks(frame: bytes | bytearray | memoryview) -> int:
    """The `acks` of a Produce request frame (without its size prefix), read without decoding the records:
    header (client id, tagged fields from v9), then v3+'s transactional id. acks=0 gets no response."""
    buf = memoryview(frame)
    try:
        _key, version, _corr, cid_len = _HEAD.unpack_from(buf, 0)
        pos = 10 + max(cid_len, 0)
        flexible = version >= 9
        if flexible:
            ntags, pos = _read_uvarint(buf, pos)
            for _ in range(ntags):
                _tag, pos = _read_uvarint(buf, pos)
                size, pos = _read_uvarint(buf, pos)
                pos += size
        if version >= 3:
            if flexible:
                n, pos = _read_uvarint(buf, pos)
                pos += max(n - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", buf, pos)
                pos += 2 + max(n, 0)
        (acks,) = struct.unpack_from(">h", buf, pos)
    except (struct.error, IndexError, ValueError) as exc:
        raise MalformedFrame(f"Produce header does not decode: {exc}", PRODUCE) from exc
    return int(acks)


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
