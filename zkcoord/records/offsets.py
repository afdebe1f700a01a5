"""`__consumer_offsets` keys and values, byte-exact with Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value.

Each key and value is an int16 version followed by the body (`MessageUtil.toVersionPrefixedBytes`). The key's
version selects the record type: 0/1 offset commit, 2 group metadata. Writers use offset key v1, offset value v3
(v1 when the commit carries an explicit expire timestamp, as Kafka does for retention_time_ms), group key v2,
group value v3. Decoders accept every classic version (values 0-4, 4 being the flexible encoding) and raise
`MalformedRecord` naming the record part and the reason for anything else, including trailing bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from zkcoord.records.consumer_groups import (
    CONSUMER_KEY_TYPES,
    ConsumerKey,
    ConsumerValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from zkcoord.records.consumer_groups import (
    KEY_VERSIONS as CONSUMER_KEY_VERSIONS,
)
from zkcoord.records.fields import RecordReader

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader_epoch, metadata length
_OFFSET_V3_NO_METADATA = struct.Struct(">hqihq")  # ... + commit timestamp, when the metadata is empty

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


# Offset keys and values are NamedTuples rather than frozen dataclasses: equally immutable, but about three times
# cheaper to build, and a commit builds two per partition.
class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only value v1 carries it; -1 = none


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 = none
    members: tuple[MemberMetadataValue, ...]


RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerValue  # consumer groups: key versions 3-8
Record = tuple[RecordKey, RecordValue | None]  # value None = tombstone


# ------------------------------------------------------------------------------------------------------- encoding


def _str(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _nstr(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


@lru_cache(maxsize=4096)
def _offset_key_prefix(group: str, topic: str) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _str(group) + _str(topic)


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return _offset_key_prefix(key.group, key.topic) + _I32.pack(key.partition)
    if isinstance(key, CONSUMER_KEY_TYPES):
        return encode_consumer_key(key)
    return _I16.pack(GROUP_KEY_VERSION) + _str(key.group)


def encode_offset_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp >= 0:
        return b"".join(
            (
                _I16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRY),
                _I64.pack(value.offset),
                _str(value.metadata),
                _I64.pack(value.commit_timestamp),
                _I64.pack(value.expire_timestamp),
            )
        )
    if not value.metadata:
        return _OFFSET_V3_NO_METADATA.pack(
            OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, 0, value.commit_timestamp
        )
    meta = value.metadata.encode()
    return b"".join(
        (
            _OFFSET_V3_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, len(meta)),
            meta,
            _I64.pack(value.commit_timestamp),
        )
    )


def encode_group_value(value: GroupMetadataValue) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _str(value.protocol_type),
        _I32.pack(value.generation),
        _nstr(value.protocol),
        _nstr(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += (
            _str(m.member_id),
            _nstr(m.group_instance_id),
            _str(m.client_id),
            _str(m.client_host),
            _I32.pack(m.rebalance_timeout),
            _I32.pack(m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        )
    return b"".join(parts)


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return encode_offset_value(value)
    if isinstance(value, GroupMetadataValue):
        return encode_group_value(value)
    return encode_consumer_value(value)


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key, value = record
    if type(value) is OffsetCommitValue:
        return encode_key(key), encode_offset_value(value)
    return encode_key(key), encode_value(value)


def encode_records(records: list[Record] | tuple[Record, ...]) -> list[tuple[bytes, bytes | None]]:
    """`encode_record` over many records; commits of many partitions of one topic share the key prefix."""
    out: list[tuple[bytes, bytes | None]] = []
    append = out.append
    pack_partition = _I32.pack
    pack_plain = _OFFSET_V3_NO_METADATA.pack
    last: tuple[str, str] | None = None
    prefix = b""
    for key, value in records:
        if type(key) is OffsetCommitKey:
            group_topic = (key[0], key[1])
            if group_topic != last:
                prefix = _offset_key_prefix(key[0], key[1])
                last = group_topic
            raw_key = prefix + pack_partition(key[2])
            if value is None:
                append((raw_key, None))
            elif type(value) is OffsetCommitValue and not value[2] and value[4] < 0:
                append((raw_key, pack_plain(OFFSET_VALUE_VERSION, value[0], value[1], 0, value[3])))
            else:
                append((raw_key, encode_value(value)))
        else:
            append(encode_record((key, value)))
    return out


# ------------------------------------------------------------------------------------------------------- decoding


class _Reader(RecordReader):
    """The classic records' shapes: int16/int32 lengths, or compact ones in a flexible value version."""

    __slots__ = ("flexible",)

    def __init__(self, data: bytes, what: str) -> None:
        super().__init__(data, what)
        self.flexible = False

    def _length(self, field: str, wide: bool) -> int:
        # Returns -1 for null.
        if self.flexible:
            return self.uvarint(field) - 1
        return self.int32(field) if wide else self.int16(field)

    def nstring(self, field: str) -> str | None:
        n = self._length(field, wide=False)
        if n < -1:
            raise self.fail(f"negative length {n} for {field}")
        if n == -1:
            return None
        return self.utf8(self.take(n, field), field)

    def string(self, field: str) -> str:
        s = self.nstring(field)
        if s is None:
            raise self.fail(f"{field} is null but the schema does not allow it")
        return s

    def bytes_(self, field: str) -> bytes:
        n = self._length(field, wide=True)
        if n < 0:
            raise self.fail(f"{field} is null or has negative length {n}")
        return self.take(n, field)

    def array_len(self, field: str) -> int:
        n = self._length(field, wide=True)
        if n < 0:
            raise self.fail(f"{field} array is null or has negative length {n}")
        return n

    def tagged_fields(self, field: str) -> None:
        if self.flexible:
            self.skip_tags(field)


def decode_key(data: bytes) -> RecordKey:
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16("version")
    key: RecordKey
    if version in (0, 1):
        key = OffsetCommitKey(r.string("group"), r.string("topic"), r.int32("partition"))
    elif version == 2:
        key = GroupMetadataKey(r.string("group"))
    elif version in CONSUMER_KEY_VERSIONS:
        return decode_consumer_key(data)
    else:
        raise r.fail(
            f"unsupported key version {version} (0/1 offset commit, 2 group metadata, 3-8 and 16 consumer group are known)"
        )
    r.done()
    return key


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data, "offset commit value")
    version = r.int16("version")
    if not 0 <= version <= 4:
        raise r.fail(f"unsupported offset commit value version {version} (0-4 are known)")
    r.flexible = version >= 4
    offset = r.int64("offset")
    leader_epoch = r.int32("leader_epoch") if version >= 3 else -1
    metadata = r.string("metadata")
    commit_timestamp = r.int64("commit_timestamp")
    expire_timestamp = r.int64("expire_timestamp") if version == 1 else -1
    r.tagged_fields("offset commit value")
    r.done()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "group metadata value")
    version = r.int16("version")
    if not 0 <= version <= 4:
        raise r.fail(f"unsupported group metadata value version {version} (0-4 are known)")
    r.flexible = version >= 4
    protocol_type = r.string("protocol_type")
    generation = r.int32("generation")
    protocol = r.nstring("protocol")
    leader = r.nstring("leader")
    current_state_timestamp = r.int64("current_state_timestamp") if version >= 2 else -1
    members = []
    for i in range(r.array_len("members")):
        member_id = r.string(f"members[{i}].member_id")
        instance = r.nstring(f"members[{i}].group_instance_id") if version >= 3 else None
        client_id = r.string(f"members[{i}].client_id")
        client_host = r.string(f"members[{i}].client_host")
        session_or_rebalance = r.int32(f"members[{i}].rebalance_timeout/session_timeout")
        if version >= 1:
            rebalance_timeout, session_timeout = (
                session_or_rebalance,
                r.int32(f"members[{i}].session_timeout"),
            )
        else:
            # v0 has no rebalance timeout; Kafka substitutes the session timeout when loading.
            rebalance_timeout = session_timeout = session_or_rebalance
        subscription = r.bytes_(f"members[{i}].subscription")
        assignment = r.bytes_(f"members[{i}].assignment")
        r.tagged_fields(f"members[{i}]")
        members.append(
            MemberMetadataValue(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.tagged_fields("group metadata value")
    r.done()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


def decode_record(key: bytes, value: bytes | None) -> Record:
    if len(key) >= 2 and _I16.unpack_from(key)[0] in CONSUMER_KEY_VERSIONS:
        ck = decode_consumer_key(key)
        return ck, (None if value is None else decode_consumer_value(ck, value))
    k = decode_key(key)
    if value is None:
        return k, None
    if isinstance(k, OffsetCommitKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)
