"""The wire codec of ConsumerGroupHeartbeat (68, v0-v1) and ConsumerGroupDescribe (69, v0), written by hand:
kafka-python 3.0 has no classes for them. Request bodies decode into `zkcoord.group.consumer_messages` values;
responses encode from them.

Both APIs are flexible in every version (compact strings and arrays, uuids as 16 bytes, a tagged-field section
after every struct). Decoding is bounded: every length is checked against the bytes left before anything is
allocated, a string is at most 32767 bytes (Kafka's limit), tagged fields at most `MAX_TAGGED_FIELDS` per
request, and any violation (truncation, trailing bytes, a null where the schema forbids one, bad UTF-8) raises
`BodyError` naming the field, which the adapter turns into a precise MalformedBody.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from zkcoord.api_keys import ApiKey
from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
    TopicPartitions,
)
from zkcoord.records.fields import compact_nstring, topic_partitions, uvarint

CONSUMER_GROUP_HEARTBEAT = ApiKey.CONSUMER_GROUP_HEARTBEAT  # key, name and versions: zkcoord.api_keys
CONSUMER_GROUP_DESCRIBE = ApiKey.CONSUMER_GROUP_DESCRIBE
MAX_STRING = 32767
MAX_TAGGED_FIELDS = 64  # as zkcoord.server.prescan.MAX_TAGGED_FIELDS

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class BodyError(ValueError):
    """The body does not decode; the message names the field and what was wrong."""


class _In:
    __slots__ = ("buf", "pos", "tags")

    def __init__(self, buf: memoryview | bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.tags = 0

    def _take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise BodyError(f"{field}: {n} bytes needed at byte {self.pos}, {len(self.buf) - self.pos} left")
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out

    def uvarint(self, field: str) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf):
                raise BodyError(f"{field}: varint runs past the end")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise BodyError(f"{field}: varint longer than 5 bytes")

    def int8(self, field: str) -> int:
        return int.from_bytes(self._take(1, field), "big", signed=True)

    def int32(self, field: str) -> int:
        return int(_I32.unpack(self._take(4, field))[0])

    def nstring(self, field: str) -> str | None:
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        if n > MAX_STRING:
            raise BodyError(f"{field}: length {n} exceeds {MAX_STRING}")
        raw = self._take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"{field}: not UTF-8 ({exc.reason} at byte {exc.start})") from None

    def string(self, field: str) -> str:
        s = self.nstring(field)
        if s is None:
            raise BodyError(f"{field}: null, but the field is not nullable")
        return s

    def narray(self, field: str, min_item_bytes: int) -> int | None:
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        if n * min_item_bytes > len(self.buf) - self.pos:
            raise BodyError(f"{field}: {n} items cannot fit in the {len(self.buf) - self.pos} bytes left")
        return n

    def array(self, field: str, min_item_bytes: int) -> int:
        n = self.narray(field, min_item_bytes)
        if n is None:
            raise BodyError(f"{field}: null, but the array is not nullable")
        return n

    def uuid(self, field: str) -> str:
        return self._take(16, field).hex()

    def tagged(self, field: str) -> None:
        count = self.uvarint(f"{field} tagged fields")
        self.tags += count
        if self.tags > MAX_TAGGED_FIELDS:
            raise BodyError(f"{field}: more than {MAX_TAGGED_FIELDS} tagged fields in one request")
        for _ in range(count):
            self.uvarint(f"{field} tag")
            self._take(self.uvarint(f"{field} tag size"), f"{field} tagged field")

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise BodyError(f"{len(self.buf) - self.pos} trailing bytes after byte {self.pos}")


def decode_heartbeat(buf: memoryview | bytes, pos: int, version: int) -> ConsumerGroupHeartbeatRequest:
    r = _In(buf, pos)
    group_id = r.string("GroupId")
    member_id = r.string("MemberId")
    member_epoch = r.int32("MemberEpoch")
    instance_id = r.nstring("InstanceId")
    rack_id = r.nstring("RackId")
    rebalance_timeout_ms = r.int32("RebalanceTimeoutMs")
    names: tuple[str, ...] | None = None
    n = r.narray("SubscribedTopicNames", 1)
    if n is not None:
        names = tuple(r.string(f"SubscribedTopicNames[{i}]") for i in range(n))
    regex = r.nstring("SubscribedTopicRegex") if version >= 1 else None
    assignor = r.nstring("ServerAssignor")
    owned: TopicPartitions | None = None
    n = r.narray("TopicPartitions", 18)
    if n is not None:
        parts = []
        for i in range(n):
            topic_id = r.uuid(f"TopicPartitions[{i}].TopicId")
            count = r.array(f"TopicPartitions[{i}].Partitions", 4)
            ps = tuple(r.int32(f"TopicPartitions[{i}].Partitions") for _ in range(count))
            r.tagged(f"TopicPartitions[{i}]")
            parts.append((topic_id, ps))
        owned = tuple(parts)
    r.tagged("ConsumerGroupHeartbeatRequest")
    r.end()
    return ConsumerGroupHeartbeatRequest(
        version, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms, names, regex,
        assignor, owned,
    )  # fmt: skip


def decode_describe(buf: memoryview | bytes, pos: int, version: int) -> ConsumerGroupDescribeRequest:
    r = _In(buf, pos)
    n = r.array("GroupIds", 1)
    groups = tuple(r.string(f"GroupIds[{i}]") for i in range(n))
    include = r.int8("IncludeAuthorizedOperations")
    r.tagged("ConsumerGroupDescribeRequest")
    r.end()
    return ConsumerGroupDescribeRequest(version, groups, include != 0)


DECODERS: dict[ApiKey, Callable[[memoryview | bytes, int, int], object]] = {
    CONSUMER_GROUP_HEARTBEAT: decode_heartbeat,
    CONSUMER_GROUP_DESCRIBE: decode_describe,
}

# ------------------------------------------------------------------------------------------------------- encoding


def encode_heartbeat_response(resp: ConsumerGroupHeartbeatResponse, version: int) -> bytes:
    out = [
        _I32.pack(0),  # ThrottleTimeMs
        _I16.pack(resp.error_code),
        compact_nstring(resp.error_message),
        compact_nstring(resp.member_id),
        _I32.pack(resp.member_epoch),
        _I32.pack(resp.heartbeat_interval_ms),
    ]
    if resp.assignment is None:
        out.append(b"\xff")  # a null struct: int8 -1
    else:
        out += (b"\x01", topic_partitions(resp.assignment), b"\x00")
    out.append(b"\x00")
    return b"".join(out)


def _described_assignment(parts: tuple[DescribedTopicPartitions, ...]) -> bytes:
    out = [uvarint(len(parts) + 1)]
    for tp in parts:
        out += (
            bytes.fromhex(tp.topic_id),
            compact_nstring(tp.topic_name),
            uvarint(len(tp.partitions) + 1),
            *(_I32.pack(p) for p in tp.partitions),
            b"\x00",
        )
    out.append(b"\x00")  # the Assignment struct's tagged fields
    return b"".join(out)


def encode_describe_response(resp: ConsumerGroupDescribeResponse, version: int) -> bytes:
    out = [_I32.pack(0), uvarint(len(resp.groups) + 1)]
    for g in resp.groups:
        out += (
            _I16.pack(g.error_code),
            compact_nstring(g.error_message),
            compact_nstring(g.group_id),
            compact_nstring(g.group_state),
            _I32.pack(g.group_epoch),
            _I32.pack(g.assignment_epoch),
            compact_nstring(g.assignor_name),
            uvarint(len(g.members) + 1),
        )
        for m in g.members:
            out += (
                compact_nstring(m.member_id),
                compact_nstring(m.instance_id),
                compact_nstring(m.rack_id),
                _I32.pack(m.member_epoch),
                compact_nstring(m.client_id),
                compact_nstring(m.client_host),
                uvarint(len(m.subscribed_topic_names) + 1),
                *(compact_nstring(n) for n in m.subscribed_topic_names),
                compact_nstring(m.subscribed_topic_regex),
                _described_assignment(m.assignment),
                _described_assignment(m.target_assignment),
                b"\x00",
            )
        out += (_I32.pack(g.authorized_operations), b"\x00")
    out.append(b"\x00")
    return b"".join(out)


def encode_heartbeat_request(req: ConsumerGroupHeartbeatRequest) -> bytes:
    """The request body at `req.api_version` (tests, benchmarks and the fuzzer speak the protocol with it)."""
    names = req.subscribed_topic_names
    out = [
        compact_nstring(req.group_id),
        compact_nstring(req.member_id),
        _I32.pack(req.member_epoch),
        compact_nstring(req.instance_id),
        compact_nstring(req.rack_id),
        _I32.pack(req.rebalance_timeout_ms),
        b"\x00" if names is None else uvarint(len(names) + 1) + b"".join(compact_nstring(n) for n in names),
    ]
    if req.api_version >= 1:
        out.append(compact_nstring(req.subscribed_topic_regex))
    out.append(compact_nstring(req.server_assignor))
    out.append(b"\x00" if req.topic_partitions is None else topic_partitions(req.topic_partitions))
    out.append(b"\x00")
    return b"".join(out)


def encode_describe_request(req: ConsumerGroupDescribeRequest) -> bytes:
    groups = b"".join(compact_nstring(g) for g in req.group_ids)
    return (
        uvarint(len(req.group_ids) + 1)
        + groups
        + (b"\x01" if req.include_authorized_operations else b"\x00")
        + b"\x00"
    )


def error_body(api_key: int, version: int, error_code: int) -> bytes | None:
    """A whole-request error answer for the heartbeat (its top-level code); None for Describe, which has none."""
    if api_key == CONSUMER_GROUP_HEARTBEAT:
        return encode_heartbeat_response(ConsumerGroupHeartbeatResponse(error_code), version)
    return None


# -------------------------------------------------------------------------- response decoding (tests, tools)


def _readtopic_partitions(r: _In, field: str) -> TopicPartitions:
    out = []
    for i in range(r.array(field, 18)):
        topic_id = r.uuid(f"{field}[{i}].TopicId")
        count = r.array(f"{field}[{i}].Partitions", 4)
        out.append((topic_id, tuple(r.int32(f"{field}[{i}].Partitions") for _ in range(count))))
        r.tagged(f"{field}[{i}]")
    return tuple(out)


def _read_described(r: _In, field: str) -> tuple[DescribedTopicPartitions, ...]:
    out = []
    for i in range(r.array(field, 18)):
        topic_id = r.uuid(f"{field}[{i}].TopicId")
        name = r.string(f"{field}[{i}].TopicName")
        count = r.array(f"{field}[{i}].Partitions", 4)
        ps = tuple(r.int32(f"{field}[{i}].Partitions") for _ in range(count))
        r.tagged(f"{field}[{i}]")
        out.append(DescribedTopicPartitions(topic_id, name, ps))
    r.tagged(field)
    return tuple(out)


def decode_response(api_key: int, version: int, body: bytes) -> object:
    """A response body (after the flexible response header) as the value it was encoded from."""
    r = _In(body, 0)
    r.int32("ThrottleTimeMs")
    if api_key == CONSUMER_GROUP_HEARTBEAT:
        code = int(_I16.unpack(r._take(2, "ErrorCode"))[0])
        message = r.nstring("ErrorMessage")
        member_id = r.nstring("MemberId")
        epoch = r.int32("MemberEpoch")
        interval = r.int32("HeartbeatIntervalMs")
        assignment = None
        if r.int8("Assignment") >= 0:
            assignment = _readtopic_partitions(r, "Assignment.TopicPartitions")
            r.tagged("Assignment")
        r.tagged("ConsumerGroupHeartbeatResponse")
        r.end()
        return ConsumerGroupHeartbeatResponse(code, message, member_id, epoch, interval, assignment)
    groups = []
    for _ in range(r.array("Groups", 1)):
        code = int(_I16.unpack(r._take(2, "ErrorCode"))[0])
        message = r.nstring("ErrorMessage")
        gid = r.string("GroupId")
        state = r.string("GroupState")
        epoch = r.int32("GroupEpoch")
        assignment_epoch = r.int32("AssignmentEpoch")
        assignor = r.string("AssignorName")
        members = []
        for _ in range(r.array("Members", 1)):
            mid = r.string("MemberId")
            instance = r.nstring("InstanceId")
            rack = r.nstring("RackId")
            member_epoch = r.int32("MemberEpoch")
            client_id = r.string("ClientId")
            host = r.string("ClientHost")
            names = tuple(r.string("SubscribedTopicNames") for _ in range(r.array("SubscribedTopicNames", 1)))
            regex = r.nstring("SubscribedTopicRegex")
            assigned = _read_described(r, "Assignment")
            target = _read_described(r, "TargetAssignment")
            r.tagged("Member")
            members.append(
                DescribedConsumerMember(
                    mid, instance, rack, member_epoch, client_id, host, names, assigned, target, regex
                )
            )
        ops = r.int32("AuthorizedOperations")
        r.tagged("DescribedGroup")
        groups.append(
            DescribedConsumerGroup(
                code, gid, message, state, epoch, assignment_epoch, assignor, tuple(members), ops
            )
        )
    r.tagged("ConsumerGroupDescribeResponse")
    r.end()
    return ConsumerGroupDescribeResponse(tuple(groups))
