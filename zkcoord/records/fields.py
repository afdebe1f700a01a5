"""Field codecs shared by the `__consumer_offsets` record codecs and the consumer-group API codec: the bounds-checked
cursor every decoder reads with (each read names the field it was reading when the data runs out or is malformed,
so any bytes decode or fail with a precise `MalformedRecord`), and the compact encodings of flexible versions."""

from __future__ import annotations

import struct

from zkcoord.records.errors import MalformedRecord

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordReader:
    """Cursor over one key or value; the schema-specific decoders add their string and array shapes to it."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def fail(self, reason: str) -> MalformedRecord:
        return MalformedRecord(self.what, reason, self.data)

    def take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self.fail(f"truncated at byte {self.pos} reading {field} ({n} bytes needed)")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int8(self, field: str) -> int:
        return int(_I8.unpack(self.take(1, field))[0])

    def int16(self, field: str) -> int:
        return int(_I16.unpack(self.take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_I32.unpack(self.take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_I64.unpack(self.take(8, field))[0])

    def uvarint(self, field: str) -> int:
        shift = result = 0
        while True:
            b = self.take(1, field)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise self.fail(f"varint too long in {field}")

    def utf8(self, raw: bytes, field: str) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not UTF-8: {exc}") from None

    def skip_tags(self, field: str) -> None:
        """A flexible version's tagged fields: none is known to these records, each is skipped whole."""
        for _ in range(self.uvarint(f"{field} tag count")):
            self.uvarint(f"{field} tag")
            self.take(self.uvarint(f"{field} tag size"), f"{field} tagged field")

    def done(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} trailing bytes after byte {self.pos}")


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_nstring(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def compact_array_len(n: int) -> bytes:
    return uvarint(n + 1)


def topic_partitions(parts: tuple[tuple[str, tuple[int, ...]], ...]) -> bytes:
    """((topic id hex, partitions), ...) as a compact array of (uuid, compact int32 array, no tags)."""
    out = [compact_array_len(len(parts))]
    for topic_id, ps in parts:
        out += (bytes.fromhex(topic_id), compact_array_len(len(ps)), *(_I32.pack(p) for p in ps), b"\x00")
    return b"".join(out)
