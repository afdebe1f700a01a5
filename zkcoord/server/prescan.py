"""A linear pre-scan of a request body against its Kafka schema, run before kafka-python's generated decoder.

Guarantees, for every (api, version) the server accepts: the scan costs time linear in the frame and allocates
nothing per element; an array count larger than the bytes left could hold, a string or bytes length past the
frame end, a null where the schema forbids one, or a tagged-field section running past the frame is a
`PrescanError` before the generic decoder allocates anything, and so is a request with more than
MAX_TAGGED_FIELDS tagged fields (counted from each section's count, so refusing costs at most that many). Nested
unknown tagged fields are dropped in one linear copy (`strip_unknown_tags`): kafka-python's decoder copies the
rest of the frame once per non-empty tagged section, which made a JoinGroup whose protocol entries each carry one
unknown tag cost quadratic time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kafka's own check (ByteBufferAccessor / MessageUtil): "Tried to allocate a collection of size N, but there are
# only M bytes remaining." The same rule here, with the element's smallest encoding instead of one byte.


class PrescanError(ValueError):
    """The body cannot be a valid encoding of its schema; the message names the field and the reason."""


# Tagged fields one request may carry, all sections together (the header's included, see kafka_protocol): the
# versions served here know at most a few per struct and real clients send a handful, while each costs the
# decoders Python work (a 3.2 MB JoinGroup of one-byte tags held the event loop 1.7 s). The scan stops at the
# first one beyond it, so the refusal itself costs no more than this many tags.
MAX_TAGGED_FIELDS = 1024


class _Tags:
    """The tagged-field budget of one scan."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, count: int, limit: int) -> None:
        self.left -= count
        if self.left < 0:
            raise PrescanError(f"more than {limit} tagged fields in one request")


_FIXED = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8, "bool": 1, "uuid": 16}
_VARIABLE = {"string", "bytes", "records"}


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # "fixed", "string", "bytes", "array", "struct"
    size: int  # fixed size, or the smallest encoding of one element/struct
    nullable: bool
    elem: _Field | None = None
    struct: _Struct | None = None


@dataclass(frozen=True, slots=True)
class _Struct:
    fields: tuple[_Field, ...]
    tagged: bool
    known_tags: frozenset[int]
    min_size: int


def _simple_plan(type_str: str, name: str, nullable: bool, flexible: bool) -> _Field:
    if type_str in _FIXED:
        return _Field(name, "fixed", _FIXED[type_str], False)
    if type_str == "string":
        return _Field(name, "string", 1 if flexible else 2, nullable)
    if type_str in ("bytes", "records"):
        return _Field(name, "bytes", 1 if flexible else 4, nullable)
    raise PrescanError(f"field {name}: type {type_str} has no pre-scan rule")


def _struct_plan(struct_field: Any, version: int, flexible: bool) -> _Struct:
    fields: list[_Field] = []
    for field in struct_field.untagged_fields(version):
        nullable = bool(field.nullable_for_version_q(version))
        if field.is_array():
            inner = field.array_of
            if inner.is_struct():
                sub = _struct_plan(inner, version, flexible)
                elem = _Field(field.name + "[]", "struct", sub.min_size, False, struct=sub)
            else:
                elem = _simple_plan(inner.type_str, field.name + "[]", False, flexible)
            fields.append(_Field(field.name, "array", 1 if flexible else 4, nullable, elem=elem))
        elif field.is_struct():
            sub = _struct_plan(field, version, flexible)
            size = sub.min_size + (1 if nullable else 0)
            fields.append(_Field(field.name, "struct", size, nullable, struct=sub))
        else:
            fields.append(_simple_plan(field.type_str, field.name, nullable, flexible))
    known = frozenset(f.tag for f in struct_field.fields.values() if f.tagged_field_q(version))
    min_size = sum(f.size for f in fields) + (1 if flexible else 0)
    return _Struct(tuple(fields), flexible, known, min_size)


class Plan:
    """The pre-scan rules of one request (api, version): built once, applied per frame."""

    __slots__ = ("root",)

    def __init__(self, request_cls: Any, version: int, flexible: bool) -> None:
        self.root = _struct_plan(request_cls._struct, version, flexible)

    def scan(
        self, buf: memoryview, pos: int, max_tagged_fields: int = MAX_TAGGED_FIELDS
    ) -> list[tuple[int, int]]:
        """Check the body at buf[pos:]; return the (start, end) spans of nested tagged sections holding only
        unknown tags (each can be replaced by one empty-section byte). Raises PrescanError, also when the body
        carries more than `max_tagged_fields` tagged fields (the header's already counted against it)."""
        unknown: list[tuple[int, int]] = []
        tags = _Tags(max_tagged_fields)
        end = _scan_struct(self.root, buf, pos, len(buf), unknown, tags, max_tagged_fields, top=True)
        if end != len(buf):
            raise PrescanError(f"body has {len(buf) - end} trailing bytes (frame {len(buf)} bytes)")
        return unknown


def strip_unknown_tags(buf: memoryview, spans: list[tuple[int, int]]) -> bytes:
    """The frame with each span replaced by an empty tagged section (one 0 byte): one linear copy."""
    parts: list[bytes] = []
    at = 0
    for start, end in spans:
        parts.append(bytes(buf[at:start]))
        parts.append(b"\x00")
        at = end
    parts.append(bytes(buf[at:]))
    return b"".join(parts)


def _uvarint(buf: memoryview, pos: int, limit: int, what: str) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= limit:
            raise PrescanError(f"{what}: varint runs past the frame end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise PrescanError(f"{what}: varint longer than 5 bytes")


def _length(field: _Field, buf: memoryview, pos: int, limit: int, flexible: bool) -> tuple[int, int]:
    """(length, pos after the length prefix); length -1 means null."""
    if flexible:
        raw, pos = _uvarint(buf, pos, limit, field.name)
        return raw - 1, pos
    width = 2 if field.kind == "string" else 4
    if pos + width > limit:
        raise PrescanError(f"{field.name}: length runs past the frame end")
    return int.from_bytes(buf[pos : pos + width], "big", signed=True), pos + width


def _scan_field(
    field: _Field,
    buf: memoryview,
    pos: int,
    limit: int,
    flexible: bool,
    unknown: list[tuple[int, int]],
    tags: _Tags,
    max_tags: int,
) -> int:
    kind = field.kind
    if kind == "fixed":
        pos += field.size
        if pos > limit:
            raise PrescanError(f"{field.name}: runs past the frame end")
        return pos
    if kind == "struct":
        assert field.struct is not None
        if field.nullable:
            if pos >= limit:
                raise PrescanError(f"{field.name}: runs past the frame end")
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:
                return pos
        return _scan_struct(field.struct, buf, pos, limit, unknown, tags, max_tags, top=False)
    n, pos = _length(field, buf, pos, limit, flexible)
    if n < 0:
        if n != -1 or not field.nullable:
            what = "null" if n == -1 else f"negative length {n}"
            raise PrescanError(f"{field.name}: {what} where the schema forbids it")
        return pos
    left = limit - pos
    if kind in ("string", "bytes"):
        if n > left:
            raise PrescanError(f"{field.name}: length {n} but only {left} bytes remain")
        return pos + n
    elem = field.elem
    assert elem is not None
    if n * elem.size > left:
        raise PrescanError(f"{field.name}: {n} elements cannot fit in the {left} bytes remaining")
    if elem.kind == "fixed":
        return pos + n * elem.size
    for _ in range(n):
        pos = _scan_field(elem, buf, pos, limit, flexible, unknown, tags, max_tags)
    return pos


def _scan_struct(
    plan: _Struct,
    buf: memoryview,
    pos: int,
    limit: int,
    unknown: list[tuple[int, int]],
    tags: _Tags,
    max_tags: int,
    top: bool,
) -> int:
    for field in plan.fields:
        pos = _scan_field(field, buf, pos, limit, plan.tagged, unknown, tags, max_tags)
    if not plan.tagged:
        return pos
    start = pos
    count, pos = _uvarint(buf, pos, limit, "tagged fields")
    if count == 0:
        return pos
    tags.take(count, max_tags)  # before walking them: a huge count costs nothing
    only_unknown = True
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, limit, "tag")
        size, pos = _uvarint(buf, pos, limit, f"tag {tag} size")
        if size > limit - pos:
            raise PrescanError(f"tag {tag}: size {size} runs past the frame end")
        pos += size
        if tag in plan.known_tags:
            only_unknown = False
    if only_unknown and not top:
        unknown.append((start, pos))
    return pos
