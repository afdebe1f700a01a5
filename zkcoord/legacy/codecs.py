"""Znode payloads of the 0.8-era tree: a byte-exact reproduction of Kafka 0.8.2-0.10.2 `Json.encode` for
writing, and key-order agnostic readers that raise `MalformedZnode(path, reason, data)` on anything else.

Writer facts (reference §1.2): no whitespace; strings written between quotes **without escaping**; numbers as
their decimal text; `null`; maps in a fixed key order per payload (the order the Scala map iterated in, §1.3 and
Appendix A). Because the JVM writer does not escape, a string that would need escaping produces unreadable
bytes there; this writer refuses such a string (`ValueError`) instead, except for the wildcard regex, which
Kafka pre-escapes with `JSONEscapeString` and so do we (`json_escape_string`).

Reader facts: any key order, whitespace, `\\/` and `\\uXXXX` escapes and unknown extra keys are accepted
(later brokers add fields). Every JSON number Kafka reads is a 32-bit int (that is why timestamps are
strings), so int fields are checked against int32; offsets are Java longs in decimal text.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final, NoReturn, Self

from zkcoord.errors import MalformedZnode

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]

# --- the writer -------------------------------------------------------------------------------------------------

# Characters that make `"` + s + `"` unreadable or ambiguous as JSON text.
_NEEDS_ESCAPE = re.compile('["\\\\\u0000-\u001f]')


def json_escape_string(s: str) -> str:
    """`Utils.JSONEscapeString` (0.8.2) / `CoreUtils.JSONEscapeString` (0.9+), character for character."""
    out: list[str] = []
    for ch in s:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "/":
            out.append("\\/")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code <= 0x1F or 0x7F <= code <= 0x9F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


class Escaped(str):
    """A string already escaped by `json_escape_string`; the writer copies it verbatim."""

    __slots__ = ()


def encode_json(value: JsonValue) -> str:
    """Kafka 0.8.2-0.10.2 `Json.encode`: no whitespace, mapping order as given, strings unescaped.

    Raises `ValueError` for a plain string the JVM writer would have turned into invalid JSON, and for types
    Kafka never writes (floats).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Escaped):
        return f'"{value}"'
    if isinstance(value, str):
        bad = _NEEDS_ESCAPE.search(value)
        if bad:
            raise ValueError(
                f"string {value!r} contains {bad.group()!r}, which the unescaping Kafka writer cannot represent"
            )
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{encode_json(k)}:{encode_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(encode_json(v) for v in value) + "]"
    raise ValueError(f"Kafka's JSON writer never writes {type(value).__name__} values: {value!r}")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8")


# --- the reader -------------------------------------------------------------------------------------------------


class _Reader:
    """Field access on one parsed znode; every failure is a MalformedZnode naming the path."""

    def __init__(self, path: str, data: bytes | None) -> None:
        self.path = path
        self.data = b"" if data is None else bytes(data)

    def fail(self, reason: str) -> NoReturn:
        raise MalformedZnode(self.path, reason, self.data)

    def text(self) -> str:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(f"not UTF-8 ({exc.reason} at byte {exc.start})")

    def parse(self) -> object:
        text = self.text()
        if text.strip() == "":
            self.fail("empty data where JSON was expected")

        def no_constant(name: str) -> object:
            raise ValueError(f"{name} is not JSON")

        try:
            return json.loads(text, parse_constant=no_constant)
        except (ValueError, RecursionError) as exc:
            self.fail(f"not JSON ({exc})")

    def obj(self) -> Mapping[str, object]:
        value = self.parse()
        if not isinstance(value, dict):
            self.fail(f"expected a JSON object, got {_kind(value)}")
        return value

    def field(self, obj: Mapping[str, object], key: str) -> object:
        if key not in obj:
            self.fail(f"missing key {key!r}")
        return obj[key]

    def int32(self, value: object, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{what} must be an integer, got {_kind(value)}")
        if not INT32_MIN <= value <= INT32_MAX:
            self.fail(f"{what} {value} does not fit a 32-bit int")
        return value

    def string(self, value: object, what: str) -> str:
        if not isinstance(value, str):
            self.fail(f"{what} must be a string, got {_kind(value)}")
        return value

    def timestamp(self, value: object, what: str = "timestamp") -> int:
        # The JVM writes epoch millis as a JSON string; accept a bare number too (Jackson-era writers).
        if isinstance(value, str):
            return self.long_text(value, what)
        if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
            return value
        self.fail(f"{what} must be a decimal string, got {_kind(value)}")

    def long_text(self, text: str, what: str) -> int:
        if not _LONG.fullmatch(text):
            self.fail(f"{what} {text!r} is not a decimal integer")
        number = int(text)
        if not INT64_MIN <= number <= INT64_MAX:
            self.fail(f"{what} {text!r} does not fit a 64-bit long")
        return number

    def int_list(self, value: object, what: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            self.fail(f"{what} must be a list, got {_kind(value)}")
        return tuple(self.int32(v, f"{what} element") for v in value)


# Java Long.parseLong: optional sign, ASCII digits, nothing else (no spaces, no underscores).
_LONG = re.compile(r"[+-]?[0-9]+")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a non-integer number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


# --- /consumers/[g]/ids/[id] ----------------------------------------------------------------------------------


class SubscriptionPattern(StrEnum):
    STATIC = "static"
    WHITE_LIST = "white_list"
    BLACK_LIST = "black_list"


@dataclass(frozen=True, slots=True)
class ConsumerRegistration:
    """The ids znode of one member: `{"version":1,"subscription":{...},"pattern":"static","timestamp":"<ms>"}`.

    `subscription` keeps the pairs in the order they are written and were read. For a wildcard registration it
    holds exactly one pair, (normalised regex, unescaped, stream count). `timestamp_ms` is None only when a
    foreign writer left it out (Kafka's reader ignores it).
    """

    subscription: tuple[tuple[str, int], ...]
    pattern: SubscriptionPattern = SubscriptionPattern.STATIC
    timestamp_ms: int | None = None
    version: int = 1

    @classmethod
    def static(cls, topic_counts: Mapping[str, int], *, timestamp_ms: int) -> Self:
        """A static subscription, written in the mapping's order; every count must be >= 1."""
        for topic, count in topic_counts.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"stream count for topic {topic!r} must be an int >= 1, got {count!r}")
        return cls(tuple(topic_counts.items()), SubscriptionPattern.STATIC, timestamp_ms)

    @classmethod
    def wildcard(
        cls, regex: str, num_streams: int, *, pattern: SubscriptionPattern, timestamp_ms: int
    ) -> Self:
        """A white_list/black_list subscription; `regex` is the TopicFilter-normalised regex."""
        if pattern is SubscriptionPattern.STATIC:
            raise ValueError("a wildcard registration needs pattern white_list or black_list")
        if isinstance(num_streams, bool) or not isinstance(num_streams, int) or num_streams < 1:
            raise ValueError(f"num_streams must be an int >= 1, got {num_streams!r}")
        return cls(((regex, num_streams),), pattern, timestamp_ms)

    @property
    def is_wildcard(self) -> bool:
        return self.pattern is not SubscriptionPattern.STATIC

    @property
    def topic_counts(self) -> dict[str, int]:
        """Static: topic -> stream count. Wildcard: {regex: stream count}."""
        return dict(self.subscription)

    def encode(self) -> bytes:
        if self.timestamp_ms is None:
            raise ValueError("a registration is written with a timestamp; timestamp_ms is None")
        if self.is_wildcard:
            if len(self.subscription) != 1:
                raise ValueError("a wildcard registration has exactly one (regex, streams) entry")
            ((regex, streams),) = self.subscription
            sub: dict[str, JsonValue] = {Escaped(json_escape_string(regex)): streams}
        else:
            sub = dict(self.subscription)
        return _bytes(
            encode_json(
                {
                    "version": self.version,
                    "subscription": sub,
                    "pattern": self.pattern.value,
                    "timestamp": str(self.timestamp_ms),
                }
            )
        )

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        """`TopicCount.constructTopicCount`: needs `pattern` and `subscription`; an empty subscription or a
        pattern other than white_list/black_list is static (an unknown pattern string reads as static)."""
        r = _Reader(path, data)
        obj = r.obj()
        raw_pattern = r.string(r.field(obj, "pattern"), "pattern")
        raw_sub = r.field(obj, "subscription")
        if not isinstance(raw_sub, dict):
            r.fail(f"subscription must be an object, got {_kind(raw_sub)}")
        pairs = tuple((k, r.int32(v, f"stream count of {k!r}")) for k, v in raw_sub.items())
        for key, count in pairs:
            if count < 1:
                r.fail(f"stream count of {key!r} is {count}; Kafka asserts >= 1")
        wildcard = bool(pairs) and raw_pattern in ("white_list", "black_list")
        if wildcard and len(pairs) != 1:
            r.fail(f"wildcard registration has {len(pairs)} subscription entries; exactly one expected")
        pattern = SubscriptionPattern(raw_pattern) if wildcard else SubscriptionPattern.STATIC
        version = r.int32(obj["version"], "version") if "version" in obj else 1
        timestamp = r.timestamp(obj["timestamp"]) if "timestamp" in obj else None
        return cls(pairs, pattern, timestamp, version)


# --- owners, offsets, controller epoch: plain text ----------------------------------------------------------


def encode_owner(thread_id: str) -> bytes:
    """An owner znode holds the owning thread id, e.g. `group1_consumer1-0`."""
    if not thread_id:
        raise ValueError("thread id must not be empty")
    return _bytes(thread_id)


def decode_owner(path: str, data: bytes | None) -> str:
    r = _Reader(path, data)
    text = r.text()
    if text == "":
        r.fail("empty owner; expected a thread id")
    return text


def encode_offset(offset: int) -> bytes:
    """The next offset to consume, as `Long.toString`."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not INT64_MIN <= offset <= INT64_MAX:
        raise ValueError(f"offset must be a 64-bit int, got {offset!r}")
    return _bytes(str(offset))


def decode_offset(path: str, data: bytes | None) -> int:
    """`offsetStr.toLong` (Java `Long.parseLong`: optional sign and digits, no whitespace)."""
    r = _Reader(path, data)
    return r.long_text(r.text(), "offset")


def encode_controller_epoch(epoch: int) -> bytes:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not INT32_MIN <= epoch <= INT32_MAX:
        raise ValueError(f"controller epoch must be a 32-bit int, got {epoch!r}")
    return _bytes(str(epoch))


def decode_controller_epoch(path: str, data: bytes | None) -> int:
    r = _Reader(path, data)
    value = r.long_text(r.text(), "controller epoch")
    return r.int32(value, "controller epoch")


# --- /brokers/ids/[id] ---------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """`LISTENER://host:port` (IPv6 hosts may be bracketed) -> (listener, host, port); ValueError otherwise."""
    m = _ENDPOINT.fullmatch(endpoint)
    if m is None:
        raise ValueError(f"endpoint {endpoint!r} is not LISTENER://host:port")
    port = int(m.group(3))
    if not INT32_MIN <= port <= INT32_MAX:
        raise ValueError(f"endpoint {endpoint!r} port out of range")
    return m.group(1), m.group(2), port


def format_endpoint(listener: str, host: str, port: int) -> str:
    return f"{listener}://[{host}]:{port}" if ":" in host else f"{listener}://{host}:{port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker's ids znode, versions 1-4 (reference §1.3).

    `host`/`port` are the compatibility fields (the first PLAINTEXT endpoint, or None/-1 when there is none).
    `endpoints` are `LISTENER://host:port` strings (v2+); `listener_security_protocol_map` maps listener
    names to security protocols (v4). `writer` picks between the two key orders in which a v2 znode exists:
    "0.9" (0.9.0.x-0.10.1.x, the default) or "0.10.2" (Broker.toJson's mutable HashMap); v1 is always the 0.8
    order, v3 the 0.10.0/0.10.1 order, v4 the 0.10.2 order.
    """

    version: int
    host: str | None
    port: int
    jmx_port: int = -1
    timestamp_ms: int | None = None
    endpoints: tuple[str, ...] = ()
    listener_security_protocol_map: tuple[tuple[str, str], ...] = ()
    rack: str | None = None
    writer: str = field(default="0.9", compare=False)

    @classmethod
    def create(
        cls,
        host: str,
        port: int,
        *,
        version: int = 4,
        timestamp_ms: int,
        jmx_port: int = -1,
        endpoints: Sequence[str] | None = None,
        rack: str | None = None,
        writer: str = "0.9",
    ) -> Self:
        """What a broker of that version registers: endpoints default to `PLAINTEXT://host:port`, the v4
        protocol map to `{listener: listener}`, and `rack` is kept only from v3 on (as Kafka does)."""
        if version not in (1, 2, 3, 4):
            raise ValueError(f"broker registration version must be 1..4, got {version!r}")
        if version == 1:
            return cls(1, host, port, jmx_port, timestamp_ms)
        eps = tuple(endpoints) if endpoints is not None else (format_endpoint("PLAINTEXT", host, port),)
        parsed = [parse_endpoint(e) for e in eps]
        plaintext = next(((h, p) for name, h, p in parsed if name == "PLAINTEXT"), None)
        compat_host, compat_port = plaintext if plaintext is not None else (None, -1)
        lspm: tuple[tuple[str, str], ...] = ()
        if version == 4:
            lspm = tuple(dict.fromkeys((name, name) for name, _, _ in parsed))
        return cls(
            version,
            compat_host,
            compat_port,
            jmx_port,
            timestamp_ms,
            eps,
            lspm,
            rack if version >= 3 else None,
            writer,
        )

    def encode(self) -> bytes:
        ts = None if self.timestamp_ms is None else str(self.timestamp_ms)
        v: dict[str, JsonValue] = {
            "jmx_port": self.jmx_port,
            "timestamp": ts,
            "endpoints": list(self.endpoints),
            "host": self.host,
            "version": self.version,
            "port": self.port,
            "listener_security_protocol_map": dict(self.listener_security_protocol_map),
            "rack": self.rack,
        }
        if self.timestamp_ms is None:
            raise ValueError("a broker registration is written with a timestamp; timestamp_ms is None")
        if self.version == 1:
            order = ["jmx_port", "timestamp", "host", "version", "port"]
        elif self.version == 4:
            order = ["listener_security_protocol_map", "endpoints", "jmx_port", "host", "timestamp", "port"]
            order.append("version")
            if self.rack is not None:
                order.insert(2, "rack")
        elif self.version == 2 and self.writer == "0.10.2":
            order = ["endpoints", "jmx_port", "host", "timestamp", "port", "version"]
        else:
            order = ["jmx_port", "timestamp", "endpoints", "host", "version", "port"]
            if self.version == 3 and self.rack is not None:
                order.append("rack")
        return _bytes(encode_json({k: v[k] for k in order}))

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        """0.10.2 `Broker.createBroker`: version >= 1 required; v1 reads host/port, v2+ needs `endpoints`."""
        r = _Reader(path, data)
        obj = r.obj()
        version = r.int32(r.field(obj, "version"), "version")
        if version < 1:
            r.fail(f"unsupported broker registration version {version}")
        jmx_port = r.int32(obj.get("jmx_port", -1), "jmx_port")
        timestamp = r.timestamp(obj["timestamp"]) if obj.get("timestamp") is not None else None
        raw_host = obj.get("host")
        host = None if raw_host is None else r.string(raw_host, "host")
        port = r.int32(obj.get("port", -1), "port")
        if version == 1:
            if host is None:
                r.fail("version 1 registration without host")
            if "port" not in obj:
                r.fail("missing key 'port'")
            return cls(1, host, port, jmx_port, timestamp)
        raw_eps = r.field(obj, "endpoints")
        if not isinstance(raw_eps, list):
            r.fail(f"endpoints must be a list, got {_kind(raw_eps)}")
        eps = tuple(r.string(e, "endpoint") for e in raw_eps)
        for e in eps:
            try:
                parse_endpoint(e)
            except ValueError as exc:
                r.fail(str(exc))
        lspm: tuple[tuple[str, str], ...] = ()
        raw_map = obj.get("listener_security_protocol_map")
        if raw_map is not None:
            if not isinstance(raw_map, dict):
                r.fail(f"listener_security_protocol_map must be an object, got {_kind(raw_map)}")
            lspm = tuple((k, r.string(p, f"security protocol of {k!r}")) for k, p in raw_map.items())
        raw_rack = obj.get("rack")
        rack = None if raw_rack is None else r.string(raw_rack, "rack")
        return cls(version, host, port, jmx_port, timestamp, eps, lspm, rack, _writer_of(r, version))

    def plaintext_endpoint(self) -> tuple[str, int] | None:
        """(host, port) a PLAINTEXT client connects to, or None when the broker has no such listener."""
        return self.endpoint_for("PLAINTEXT")

    def listeners(self) -> tuple[tuple[str, str, str, int], ...]:
        """Every registered listener as (listener name, security protocol, host, port), in registration order;
        the top-level host/port of a registration without endpoints (v1) is a PLAINTEXT listener."""
        protocols = dict(self.listener_security_protocol_map)
        found: list[tuple[str, str, str, int]] = []
        for endpoint in self.endpoints:
            name, host, port = parse_endpoint(endpoint)
            found.append((name, protocols.get(name, name), host, port))
        if not found and self.host is not None and self.port >= 0:
            found.append(("PLAINTEXT", "PLAINTEXT", self.host, self.port))
        return tuple(found)

    def endpoint_for(self, protocol: str) -> tuple[str, int] | None:
        """(host, port) of the broker's listener of security protocol `protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT,
        SASL_SSL), or None; the top-level host/port of old registrations is a PLAINTEXT listener."""
        protocols = dict(self.listener_security_protocol_map)
        for endpoint in self.endpoints:
            name, host, port = parse_endpoint(endpoint)
            if protocols.get(name, name) == protocol:
                return host, port
        if protocol == "PLAINTEXT" and self.host is not None and self.port >= 0:
            return self.host, self.port
        return None


def _writer_of(r: _Reader, version: int) -> str:
    # A v2 znode whose first key is "endpoints" came from the 0.10.2 writer; keep that so re-encoding is exact.
    if version == 2 and r.text().lstrip().startswith('{"endpoints"'):
        return "0.10.2"
    return "0.9"


# --- /brokers/topics/[t] and .../partitions/[p]/state ------------------------------------------------------


# Kafka's `Uuid.toString`: the 16 bytes in URL-safe base64 without padding (22 characters). `Uuid.fromString`
# takes Java's URL-safe decoder; a stored id is read only in that canonical form (what every Kafka writes), so a
# value that would decode to another id's bytes under a lenient decoder is refused rather than guessed.
_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")  # the last character carries 2 bits: its low 4 are zero
ZERO_UUID: Final = uuid.UUID(int=0)  # Kafka's "no id"
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)  # Kafka's reserved id of the KRaft metadata topic


def kafka_uuid_string(value: uuid.UUID) -> str:
    """`Uuid.toString`: 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """`Uuid.fromString` for the canonical form only; ValueError for anything else."""
    if not _KAFKA_UUID.fullmatch(text):
        raise ValueError(f"{text[:40]!r} is not a Kafka uuid (22 characters of URL-safe base64)")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/T` (Kafka's TopicZNode): `{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}` as 0.8-2.3
    wrote it; version 2 (Kafka 2.4, KIP-455) adds `adding_replicas` and `removing_replicas` (partition -> replica
    list, only partitions being reassigned); version 3 (Kafka 2.8, KIP-516) adds `"topic_id"`, the topic's
    `Uuid.toString`. Every reader since 0.8 looks at `partitions` only, so the later fields are safe to add.
    Partitions are kept sorted by id (Kafka wrote them in hash order, which no reader may depend on, so we write
    ascending). A topic id is written the way Kafka 2.8+ does: version 3, the two reassignment maps (empty when
    none), then `topic_id`; an assignment without id and reassignments keeps its 0.8 bytes."""

    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    version: int = 1
    topic_id: uuid.UUID | None = None
    adding_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()
    removing_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @classmethod
    def of(
        cls, replicas: Mapping[int, Sequence[int]], *, version: int = 1, topic_id: uuid.UUID | None = None
    ) -> Self:
        """From partition -> replicas; with `topic_id`, a version-3 assignment (ValueError for a reserved id)."""
        for p, rs in replicas.items():
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= INT32_MAX:
                raise ValueError(f"partition id must be an int in 0..2^31-1, got {p!r}")
            for b in rs:
                if isinstance(b, bool) or not isinstance(b, int) or not INT32_MIN <= b <= INT32_MAX:
                    raise ValueError(f"replica of partition {p} must be a 32-bit int, got {b!r}")
        parts = tuple(sorted((p, tuple(rs)) for p, rs in replicas.items()))
        if topic_id is None:
            return cls(parts, version)
        return cls(parts, version).with_topic_id(topic_id)

    def with_topic_id(self, topic_id: uuid.UUID) -> Self:
        """This assignment carrying `topic_id` (Kafka's `setTopicIds`: version 3, nothing else changes)."""
        if topic_id in (ZERO_UUID, METADATA_TOPIC_ID):
            raise ValueError(f"topic id {topic_id} is reserved by Kafka")
        return replace(self, version=max(3, self.version), topic_id=topic_id)

    @property
    def partition_ids(self) -> list[int]:
        return [p for p, _ in self.partitions]

    @property
    def replicas(self) -> dict[int, tuple[int, ...]]:
        return dict(self.partitions)

    def encode(self) -> bytes:
        doc: dict[str, JsonValue] = {
            "version": self.version,
            "partitions": {str(p): list(rs) for p, rs in self.partitions},
        }
        if self.version >= 2 or self.adding_replicas or self.removing_replicas:
            doc["adding_replicas"] = {str(p): list(rs) for p, rs in self.adding_replicas}
            doc["removing_replicas"] = {str(p): list(rs) for p, rs in self.removing_replicas}
        if self.topic_id is not None:
            doc["topic_id"] = kafka_uuid_string(self.topic_id)
        return _bytes(encode_json(doc))

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        r = _Reader(path, data)
        obj = r.obj()
        version = r.int32(obj["version"], "version") if "version" in obj else 1
        parts = _replica_map(r, r.field(obj, "partitions"), "partitions")
        topic_id: uuid.UUID | None = None
        if "topic_id" in obj:
            text = r.string(obj["topic_id"], "topic_id")
            try:
                topic_id = parse_kafka_uuid(text)
            except ValueError as exc:
                r.fail(f"topic_id: {exc}")
            if topic_id in (ZERO_UUID, METADATA_TOPIC_ID):
                r.fail(f"topic_id {text!r} is an id Kafka reserves, not a topic's")
        return cls(
            parts,
            version,
            topic_id,
            _replica_map(r, obj.get("adding_replicas", {}), "adding_replicas"),
            _replica_map(r, obj.get("removing_replicas", {}), "removing_replicas"),
        )


def _replica_map(r: _Reader, raw: object, what: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """A `{"<partition>":[replica, ...]}` object of a topic znode, sorted by partition."""
    if not isinstance(raw, dict):
        r.fail(f"{what} must be an object, got {_kind(raw)}")
    parts: dict[int, tuple[int, ...]] = {}
    for key, replicas in raw.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 10):
            r.fail(f"partition id {key[:20]!r} in {what} is not a 32-bit non-negative decimal integer")
        pid = r.int32(int(key), "partition id")
        if pid in parts:
            r.fail(f"partition {pid} appears twice in {what}")
        parts[pid] = r.int_list(replicas, f"replicas of partition {key}")
    return tuple(sorted(parts.items()))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """`{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`; leader -1 = none."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = 1

    def encode(self) -> bytes:
        return _bytes(
            encode_json(
                {
                    "controller_epoch": self.controller_epoch,
                    "leader": self.leader,
                    "version": self.version,
                    "leader_epoch": self.leader_epoch,
                    "isr": list(self.isr),
                }
            )
        )

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        r = _Reader(path, data)
        obj = r.obj()
        return cls(
            leader=r.int32(r.field(obj, "leader"), "leader"),
            leader_epoch=r.int32(r.field(obj, "leader_epoch"), "leader_epoch"),
            isr=r.int_list(r.field(obj, "isr"), "isr"),
            controller_epoch=r.int32(r.field(obj, "controller_epoch"), "controller_epoch"),
            version=r.int32(obj["version"], "version") if "version" in obj else 1,
        )


# --- /controller ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """`{"version":1,"brokerid":0,"timestamp":"<ms>"}`. A pre-0.8.1 bare integer payload reads as version 0
    with no timestamp, and a version-0 value is written back as that bare integer."""

    brokerid: int
    timestamp_ms: int | None
    version: int = 1

    def encode(self) -> bytes:
        if self.version == 0:
            return _bytes(str(self.brokerid))
        if self.timestamp_ms is None:
            raise ValueError("a controller znode is written with a timestamp; timestamp_ms is None")
        return _bytes(
            encode_json(
                {"version": self.version, "brokerid": self.brokerid, "timestamp": str(self.timestamp_ms)}
            )
        )

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        """`KafkaController.parseControllerId`: JSON `brokerid`, else the whole payload as an int."""
        r = _Reader(path, data)
        text = r.text()
        if _LONG.fullmatch(text.strip()):
            return cls(r.int32(int(text.strip()), "controller id"), None, 0)
        obj = r.obj()
        brokerid = r.int32(r.field(obj, "brokerid"), "brokerid")
        timestamp = r.timestamp(obj["timestamp"]) if "timestamp" in obj else None
        version = r.int32(obj["version"], "version") if "version" in obj else 1
        return cls(brokerid, timestamp, version)


# --- /config/topics/[t] ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """`{"version":1,"config":{"retention.ms":"..."}}`: topic overrides, values as strings."""

    config: tuple[tuple[str, str], ...] = ()
    version: int = 1

    def encode(self) -> bytes:
        return _bytes(encode_json({"version": self.version, "config": dict(self.config)}))

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> Self:
        r = _Reader(path, data)
        obj = r.obj()
        raw = r.field(obj, "config")
        if not isinstance(raw, dict):
            r.fail(f"config must be an object, got {_kind(raw)}")
        pairs = tuple((k, r.string(v, f"config {k!r}")) for k, v in raw.items())
        version = r.int32(obj["version"], "version") if "version" in obj else 1
        return cls(pairs, version)
