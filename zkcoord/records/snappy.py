"""Snappy as Kafka clients write it, bounded: raw snappy blocks or snappy-java's xerial framing (a 16-byte
header, then length-prefixed blocks), read without ever inflating past the caller's limit.

Every Kafka generation reads both: the Java client (snappy-java's `SnappyOutputStream`) and old kafka-python
write the xerial framing, librdkafka writes raw snappy. Each raw block states its uncompressed length in a varint
preamble, so the bound is checked before any block is inflated. Damage raises `SnappyError`.
"""

from __future__ import annotations

import struct
from typing import Any

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_BLOCK_LENGTH = struct.Struct(">i")
XERIAL_BLOCK_SIZE = 32 * 1024


class SnappyError(ValueError):
    """Snappy data that does not decode, or would inflate past the limit."""


def _codec() -> Any:
    import snappy  # python-snappy (over cramjam): imported on the first snappy data only

    return snappy


def _uncompressed_length(block: bytes) -> int:
    value, shift = 0, 0
    for i, byte in enumerate(block[:5]):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
        if i == 4:
            break
    raise SnappyError("snappy block has no valid length preamble")


def _block(data: bytes, budget: int) -> bytes:
    size = _uncompressed_length(data)
    if budget >= 0 and size > budget:
        raise SnappyError(f"snappy block inflates to {size} bytes, past the limit")
    try:
        out: bytes = _codec().decompress(data)
    except Exception as exc:  # python-snappy raises its own UncompressError and cramjam's errors
        raise SnappyError(f"snappy block does not decode: {exc}") from exc
    if len(out) != size:
        raise SnappyError(f"snappy block says {size} bytes but holds {len(out)}")
    return out


def decompress(data: bytes, max_bytes: int = -1) -> bytes:
    """The inflated bytes (xerial framing or one raw block); more than `max_bytes` (when >= 0) is refused."""
    if not data.startswith(XERIAL_MAGIC):
        return _block(data, max_bytes)
    if len(data) < _XERIAL_HEADER.size:
        raise SnappyError("truncated xerial snappy header")
    out = bytearray()
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise SnappyError("truncated xerial block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise SnappyError(f"xerial block of {length} bytes runs past the end")
        out += _block(data[pos : pos + length], max_bytes - len(out) if max_bytes >= 0 else -1)
        pos += length
    return bytes(out)


def compress(data: bytes, xerial: bool = True) -> bytes:
    """Snappy in the xerial framing the Java client writes (or one raw block, as librdkafka writes)."""
    codec = _codec()
    if not xerial:
        return bytes(codec.compress(data))
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for start in range(0, max(len(data), 1), XERIAL_BLOCK_SIZE):
        block = bytes(codec.compress(data[start : start + XERIAL_BLOCK_SIZE]))
        out += _BLOCK_LENGTH.pack(len(block)) + block
    return bytes(out)
