"""`__consumer_offsets` records of consumer-protocol groups (KIP-848): key versions 3-8 and 16 and their values, in
Kafka's byte formats (ConsumerGroupMetadataKey/Value ... ConsumerGroupCurrentMemberAssignmentKey/Value, and
ConsumerGroupRegularExpressionKey/Value: a subscribed regular expression's resolved topics).

Keys are an int16 version then non-flexible strings; values are an int16 version 0 then the flexible encoding
(compact strings and arrays, uuids as 16 bytes, a tagged-field section per struct). Writers emit value version 0;
decoders accept version 0 only, skip unknown tagged fields, and raise `MalformedRecord` naming the part and the
reason for anything else, trailing bytes included. Topic ids are carried as 32-digit hex strings.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zkcoord.records.fields import RecordReader, compact_array_len, compact_nstring, topic_partitions, uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = (
    16  # ConsumerGroupRegularExpressionKey (Kafka 4.0; 9-15 are share and streams groups' keys)
)
KEY_VERSIONS = frozenset((*range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1), REGULAR_EXPRESSION))
MAX_ITEMS = 1 << 20  # no array in a record is longer; a larger count is corruption, not data

Partitions = tuple[tuple[str, tuple[int, ...]], ...]  # ((topic id hex, sorted partitions), ...) by topic id


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Key versions 3 (group metadata), 4 (partition metadata), 6 (target assignment metadata): the group id."""

    version: int
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    """Key versions 5 (member metadata), 7 (target assignment member), 8 (current member assignment)."""

    version: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerRegexKey:
    """Key version 16 (a regular expression subscribed to in the group): the group id and the expression."""

    version: int
    group: str
    regex: str


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: str
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]  # sorted by name


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A classic-protocol member hosted in a consumer group (online migration): tagged field 0 of the member's
    metadata value. `protocols` are the JoinGroup's (name, metadata) in the member's preference order."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    server_assignor: str | None
    rebalance_timeout_ms: int
    classic: ClassicMemberMetadata | None = None  # None: the member speaks the consumer protocol
    subscribed_topic_regex: str | None = None  # None: the member subscribes by topic names only


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 stable, 1 unrevoked partitions, 2 unreleased partitions, 3 unknown (Kafka's MemberState)
    assigned: Partitions
    pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class RegexValue:
    """ConsumerGroupRegularExpressionValue: the topics the expression matched (sorted), the metadata version they
    were resolved at (zkcoord has no metadata image offset: 0) and when, in ms."""

    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


ConsumerKey = ConsumerGroupKey | ConsumerMemberKey | ConsumerRegexKey
CONSUMER_KEY_TYPES = (
    ConsumerGroupKey,
    ConsumerMemberKey,
    ConsumerRegexKey,
)  # for isinstance: one of ConsumerKey
ConsumerValue = (
    GroupEpochValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentEpochValue
    | TargetMemberValue
    | CurrentAssignmentValue
    | RegexValue
)

_VALUE_TYPES: dict[int, type] = {
    GROUP_METADATA: GroupEpochValue,
    PARTITION_METADATA: PartitionMetadataValue,
    MEMBER_METADATA: MemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: TargetAssignmentEpochValue,
    TARGET_ASSIGNMENT_MEMBER: TargetMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: CurrentAssignmentValue,
    REGULAR_EXPRESSION: RegexValue,
}
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})


def value_type(key: ConsumerKey) -> type:
    return _VALUE_TYPES[key.version]


# ------------------------------------------------------------------------------------------------------- encoding


def encode_consumer_key(key: ConsumerKey) -> bytes:
    raw = key.group.encode()
    out = _I16.pack(key.version) + _I16.pack(len(raw)) + raw
    if isinstance(key, ConsumerMemberKey):
        member = key.member_id.encode()
        out += _I16.pack(len(member)) + member
    elif isinstance(key, ConsumerRegexKey):
        regex = key.regex.encode()
        out += _I16.pack(len(regex)) + regex
    return out


def encode_consumer_value(value: ConsumerValue) -> bytes:
    head = _I16.pack(0)
    if isinstance(value, GroupEpochValue):
        body = _I32.pack(value.epoch)
    elif isinstance(value, TargetAssignmentEpochValue):
        body = _I32.pack(value.assignment_epoch)
    elif isinstance(value, PartitionMetadataValue):
        parts = [compact_array_len(len(value.topics))]
        for t in value.topics:
            # TopicId, TopicName, NumPartitions, PartitionMetadata (racks: none known here), tags
            parts += (
                bytes.fromhex(t.topic_id),
                compact_nstring(t.name),
                _I32.pack(t.partitions),
                compact_array_len(0),
                b"\x00",
            )
        body = b"".join(parts)
    elif isinstance(value, MemberMetadataValue):
        body = b"".join(
            (
                compact_nstring(value.instance_id),
                compact_nstring(value.rack_id),
                compact_nstring(value.client_id),
                compact_nstring(value.client_host),
                compact_array_len(len(value.subscribed_topic_names)),
                *(compact_nstring(n) for n in value.subscribed_topic_names),
                compact_nstring(value.subscribed_topic_regex),
                _I32.pack(value.rebalance_timeout_ms),
                compact_nstring(value.server_assignor),
            )
        )
        if (
            value.classic is not None
        ):  # tagged field 0, ClassicMemberMetadata, then the value has no other tag
            c = value.classic
            tagged = b"".join(
                (
                    _I32.pack(c.session_timeout_ms),
                    compact_array_len(len(c.protocols)),
                    *(compact_nstring(n) + uvarint(len(m) + 1) + m + b"\x00" for n, m in c.protocols),
                    b"\x00",
                )
            )
            return head + body + b"\x01\x00" + uvarint(len(tagged)) + tagged
    elif isinstance(value, TargetMemberValue):
        body = topic_partitions(value.partitions)
    elif isinstance(value, RegexValue):
        body = b"".join(
            (
                compact_array_len(len(value.topics)),
                *(compact_nstring(t) for t in value.topics),
                _I64.pack(value.version),
                _I64.pack(value.timestamp_ms),
            )
        )
    else:
        body = b"".join(
            (
                _I32.pack(value.member_epoch),
                _I32.pack(value.previous_member_epoch),
                _I8.pack(value.state),
                topic_partitions(value.assigned),
                topic_partitions(value.pending_revocation),
            )
        )
    return head + body + b"\x00"


# ------------------------------------------------------------------------------------------------------- decoding


class _Reader(RecordReader):
    """The consumer-group records' shapes: int16 strings in keys, compact strings and arrays in values."""

    __slots__ = ()

    def string16(self, field: str) -> str:
        n = self.int16(field)
        if n < 0:
            raise self.fail(f"{field} has negative length {n}")
        return self.utf8(self.take(n, field), field)

    def cnstring(self, field: str) -> str | None:
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        return self.utf8(self.take(n, field), field)

    def cstring(self, field: str) -> str:
        s = self.cnstring(field)
        if s is None:
            raise self.fail(f"{field} is null but the schema does not allow it")
        return s

    def carray(self, field: str) -> int:
        n = self.uvarint(field) - 1
        if n < 0:
            raise self.fail(f"{field} array is null")
        if n > MAX_ITEMS or n > len(self.data) - self.pos:
            raise self.fail(f"{field} claims {n} items, more than the {len(self.data) - self.pos} bytes left")
        return n

    def uuid(self, field: str) -> str:
        return self.take(16, field).hex()

    def tags(self, field: str) -> None:
        self.skip_tags(field)


def decode_consumer_key(data: bytes) -> ConsumerKey:
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16("version")
    if version not in KEY_VERSIONS:
        raise r.fail(f"key version {version} is not a consumer-group record (3-8, 16)")
    group = r.string16("group")
    key: ConsumerKey
    if version in _MEMBER_KEYS:
        key = ConsumerMemberKey(version, group, r.string16("member_id"))
    elif version == REGULAR_EXPRESSION:
        key = ConsumerRegexKey(version, group, r.string16("regular_expression"))
    else:
        key = ConsumerGroupKey(version, group)
    r.done()
    return key


def _read_partitions(r: _Reader, field: str) -> Partitions:
    out = []
    for i in range(r.carray(field)):
        topic_id = r.uuid(f"{field}[{i}].topic_id")
        ps = tuple(r.int32(f"{field}[{i}].partitions") for _ in range(r.carray(f"{field}[{i}].partitions")))
        r.tags(f"{field}[{i}]")
        out.append((topic_id, ps))
    return tuple(out)


def _read_member_tags(r: _Reader) -> ClassicMemberMetadata | None:
    """The member metadata value's tagged fields: tag 0 is ClassicMemberMetadata (read whole, its size checked),
    others are skipped."""
    classic = None
    for _ in range(r.uvarint("MemberMetadataValue tag count")):
        tag = r.uvarint("MemberMetadataValue tag")
        size = r.uvarint("MemberMetadataValue tag size")
        if tag != 0:
            r.take(size, "MemberMetadataValue tagged field")
            continue
        end = r.pos + size
        timeout = r.int32("classic_member_metadata.session_timeout_ms")
        protocols = []
        for i in range(r.carray("classic_member_metadata.supported_protocols")):
            name = r.cstring(f"classic_member_metadata.supported_protocols[{i}].name")
            n = r.uvarint(f"classic_member_metadata.supported_protocols[{i}].metadata") - 1
            if n < 0:
                raise r.fail(f"classic_member_metadata.supported_protocols[{i}].metadata is null")
            meta = r.take(n, f"classic_member_metadata.supported_protocols[{i}].metadata")
            r.tags(f"classic_member_metadata.supported_protocols[{i}]")
            protocols.append((name, meta))
        r.tags("classic_member_metadata")
        if r.pos != end:
            raise r.fail(f"classic_member_metadata is {r.pos - end + size} bytes, its tag says {size}")
        classic = ClassicMemberMetadata(timeout, tuple(protocols))
    return classic


def decode_consumer_value(key: ConsumerKey, data: bytes) -> ConsumerValue:
    kind = _VALUE_TYPES[key.version].__name__
    r = _Reader(data, f"{kind} (key version {key.version})")
    version = r.int16("version")
    if version != 0:
        raise r.fail(f"unsupported value version {version} (0 is known)")
    value: ConsumerValue
    if key.version == GROUP_METADATA:
        value = GroupEpochValue(r.int32("epoch"))
    elif key.version == TARGET_ASSIGNMENT_METADATA:
        value = TargetAssignmentEpochValue(r.int32("assignment_epoch"))
    elif key.version == PARTITION_METADATA:
        topics = []
        for i in range(r.carray("topics")):
            tid = r.uuid(f"topics[{i}].topic_id")
            name = r.cstring(f"topics[{i}].topic_name")
            count = r.int32(f"topics[{i}].num_partitions")
            for j in range(r.carray(f"topics[{i}].partition_metadata")):
                r.int32(f"topics[{i}].partition_metadata[{j}].partition")
                for k in range(r.carray(f"topics[{i}].partition_metadata[{j}].racks")):
                    r.cstring(f"topics[{i}].partition_metadata[{j}].racks[{k}]")
                r.tags(f"topics[{i}].partition_metadata[{j}]")
            r.tags(f"topics[{i}]")
            topics.append(TopicMetadata(tid, name, count))
        value = PartitionMetadataValue(tuple(topics))
    elif key.version == MEMBER_METADATA:
        instance = r.cnstring("instance_id")
        rack = r.cnstring("rack_id")
        client_id = r.cstring("client_id")
        client_host = r.cstring("client_host")
        names = tuple(
            r.cstring(f"subscribed_topic_names[{i}]") for i in range(r.carray("subscribed_topic_names"))
        )
        regex = r.cnstring("subscribed_topic_regex")
        timeout = r.int32("rebalance_timeout_ms")
        assignor = r.cnstring("server_assignor")
        classic = _read_member_tags(r)
        value = MemberMetadataValue(
            instance, rack, client_id, client_host, names, assignor, timeout, classic, regex or None
        )
        r.done()
        return value
    elif key.version == TARGET_ASSIGNMENT_MEMBER:
        value = TargetMemberValue(_read_partitions(r, "topic_partitions"))
    elif key.version == REGULAR_EXPRESSION:
        count = r.carray("topics")
        matched = tuple(r.cstring(f"topics[{i}]") for i in range(count))
        value = RegexValue(matched, r.int64("version"), r.int64("timestamp"))
    else:
        epoch = r.int32("member_epoch")
        previous = r.int32("previous_member_epoch")
        state = r.int8("state")
        assigned = _read_partitions(r, "assigned_partitions")
        pending = _read_partitions(r, "partitions_pending_revocation")
        value = CurrentAssignmentValue(epoch, previous, state, assigned, pending)
    r.tags(kind)
    r.done()
    return value
