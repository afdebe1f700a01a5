"""Random Kafka requests for fuzzing the wire server: valid-but-extreme requests of every API and version the
server accepts (built from kafka-python's schemas), and hostile mutations of them.

Deterministic for a given `random.Random`, so a failing case replays from its seed. Names are drawn from small
pools that never include `PROTECTED_TOPIC` / `PROTECTED_GROUP`, which a fuzz run uses to check that stored data
did not change; group ids are fresh per request so no request waits on members another request left behind.
"""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

from zkcoord.group import consumer_messages as gcm
from zkcoord.records.batch import build_batch
from zkcoord.records.message_set import LegacyMessage, encode_message_set
from zkcoord.server import kafka_protocol as kp

PROTECTED_TOPIC = "fuzz-keep"
PROTECTED_GROUP = "fuzz-keep-group"

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_TOPICS = ("fuzz-t", "", "__consumer_offsets", "x" * 249, "bad/name", "fuzz-t2")
_GROUP_FIELDS = {"group_id", "groups", "groups_names", "key", "coordinator_keys"}


def _int(rng: random.Random, type_str: str) -> int:
    lo, hi = _INTS[type_str]
    pick = rng.random()
    if pick < 0.5:
        return rng.choice((lo, hi, 0, -1 if lo < 0 else 1, 1))
    if pick < 0.8:
        return rng.randint(-5 if lo < 0 else 0, 100)
    return rng.randint(lo, hi)


def _string(rng: random.Random, name: str, nullable: bool) -> str | None:
    if nullable and rng.random() < 0.15:
        return None
    if name in _GROUP_FIELDS or name.endswith("group_id"):
        return f"fuzz-{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}" if rng.random() < 0.9 else ""
    if name in ("name", "topic", "topic_name"):
        return rng.choice(_TOPICS)
    if name == "protocol_type":
        return rng.choice(("consumer", "", "connect"))
    if name in ("client_software_name", "client_software_version"):
        return rng.choice(("kafka-python", "x", "", "bad name!"))
    pick = rng.random()
    if pick < 0.3:
        return ""
    if pick < 0.4:
        return "y" * rng.choice((255, 1000, 5000))
    return "".join(rng.choice("abcdef-_.é") for _ in range(rng.randint(1, 12)))


def _bytes(rng: random.Random, name: str, nullable: bool) -> bytes | None:
    if nullable and rng.random() < 0.15:
        return None
    if name == "records" and rng.random() < 0.5:
        count = rng.randint(1, 4)
        if (
            rng.random() < 0.5
        ):  # message sets of magic 0/1, as old Produce/Fetch versions carry, maybe compressed
            magic = rng.choice((0, 1))
            msgs = [
                LegacyMessage(i, None, rng.randbytes(rng.randint(0, 50)), magic=magic) for i in range(count)
            ]
            return encode_message_set(msgs, magic=magic, codec=rng.choice((0, 1, 2, 3)))
        return build_batch(
            [(None, rng.randbytes(rng.randint(0, 50)))] * count, compression=rng.choice((0, 1, 3))
        )
    return rng.randbytes(rng.choice((0, 1, 8, 64)))


def _value(rng: random.Random, field: Any, version: int, depth: int) -> Any:
    nullable = bool(field.nullable_for_version_q(version))
    if field.is_array():
        if nullable and rng.random() < 0.15:
            return None
        n = rng.choice((0, 1, 1, 2, 3)) if depth < 3 else 0
        inner = field.array_of
        if inner.is_struct():
            return [_struct(rng, inner, version, depth + 1) for _ in range(n)]
        return [_simple(rng, inner.type_str, field.name, False) for _ in range(n)]
    if field.is_struct():
        if nullable and rng.random() < 0.3:
            return None
        return _struct(rng, field, version, depth + 1)
    return _simple(rng, field.type_str, field.name, nullable)


def _simple(rng: random.Random, type_str: str, name: str, nullable: bool) -> Any:
    if type_str in _INTS:
        return _int(rng, type_str)
    if type_str == "bool":
        return rng.random() < 0.5
    if type_str == "float64":
        return rng.choice((0.0, -1.0, 1e308))
    if type_str == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if type_str == "string":
        return _string(rng, name, nullable)
    return _bytes(rng, name, nullable)


def _struct(rng: random.Random, struct_field: Any, version: int, depth: int) -> Any:
    values = {f.name: _value(rng, f, version, depth) for f in struct_field.untagged_fields(version)}
    return struct_field.data_class(version=version, **values)


def accepted_versions() -> list[tuple[int, int]]:
    """Every (api key, version) the server decodes."""
    return sorted(kp._CODECS)


def random_request(
    rng: random.Random, api_key: int, version: int, correlation_id: int, **overrides: Any
) -> tuple[bytes, Any]:
    """(framed request, its body object): every field present at `version`, values at the edges, except the
    top-level `overrides` present at that version (a benchmark pins Fetch's max_wait_ms so windows keep moving)."""
    if api_key in kp.CONSUMER_GROUP_APIS:
        value = _consumer_group_request(rng, api_key, version)
        return kp.encode_consumer_group_request(correlation_id, rng.choice(("fuzz", None, "")), value), value
    req_cls = kp._CLASSES[api_key][0]
    untagged = req_cls._struct.untagged_fields(version)
    fields = {f.name: _value(rng, f, version, 0) for f in untagged}
    fields.update({k: v for k, v in overrides.items() if k in fields})
    obj = req_cls(version=version, **fields)
    obj.with_header(correlation_id=correlation_id, client_id=rng.choice(("fuzz", None, "")))
    return bytes(obj.encode(header=True, framed=True)), obj


def _consumer_group_request(rng: random.Random, api_key: int, version: int) -> Any:
    """ConsumerGroupHeartbeat/Describe (hand-written codecs, no kafka-python schema): the same edge values."""
    if api_key == kp.CONSUMER_GROUP_DESCRIBE:
        groups = tuple(_string(rng, "group_id", False) or "" for _ in range(rng.choice((0, 1, 2))))
        return gcm.ConsumerGroupDescribeRequest(version, groups, rng.random() < 0.5)
    owned = None
    if rng.random() < 0.7:
        owned = tuple(
            (
                uuid.UUID(int=rng.getrandbits(128)).hex,
                tuple(_int(rng, "int32") for _ in range(rng.choice((0, 1, 3)))),
            )
            for _ in range(rng.choice((0, 1, 2)))
        )
    names = None
    if rng.random() < 0.8:
        names = tuple(rng.choice(_TOPICS) for _ in range(rng.choice((0, 1, 2))))
    return gcm.ConsumerGroupHeartbeatRequest(
        api_version=version,
        group_id=_string(rng, "group_id", False) or "",
        member_id=_string(rng, "member_id", False) or "",
        member_epoch=rng.choice((0, 0, -1, -2, 1, _int(rng, "int32"))),
        instance_id=_string(rng, "instance_id", True),
        rack_id=_string(rng, "rack_id", True),
        rebalance_timeout_ms=rng.choice((-1, 1000, _int(rng, "int32"))),
        subscribed_topic_names=names,
        subscribed_topic_regex=_string(rng, "regex", True) if version >= 1 else None,
        server_assignor=rng.choice((None, "uniform", "range", "sticky", "")),
        topic_partitions=owned,
    )


def mutate(rng: random.Random, framed: bytes) -> bytes:
    """A hostile variant of a framed request: flipped bytes, a cut, a grown tail, a lying length field or a
    huge array count, re-framed with a size prefix that matches the new body (or, sometimes, lies)."""
    body = bytearray(framed[4:])
    kind = rng.randrange(6)
    if kind == 0 and body:
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    elif kind == 1 and len(body) > 8:
        del body[rng.randint(8, len(body) - 1) :]
    elif kind == 2:
        body += rng.randbytes(rng.randint(1, 16))
    elif kind == 3 and len(body) > 12:
        at = rng.randrange(8, len(body) - 4)
        struct.pack_into(">i", body, at, rng.choice((2**31 - 1, -2, 2**20, 0x7FFF)))
    elif kind == 4 and len(body) > 10:
        at = rng.randrange(8, len(body))
        body[at:at] = b"\xff\xff\xff\x7f"  # a 4-byte uvarint near 2^28: a huge compact array/string length
    else:
        struct.pack_into(">h", body, 2, rng.choice((-1, 99, 32767)))  # a version nobody supports
    size = len(body) if rng.random() < 0.95 else rng.choice((len(body) + 1000, 0))
    return struct.pack(">i", size) + bytes(body)
