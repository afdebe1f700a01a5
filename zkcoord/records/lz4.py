"""LZ4 as Kafka clients write it, bounded: one LZ4 frame per compressed batch or wrapper, its descriptor held to
what Kafka's reader accepts, read in chunks without ever inflating past the caller's limit.

Facts (Kafka's `KafkaLZ4BlockInputStream` and `KafkaLZ4BlockOutputStream`, the LZ4 frame format 1.5.1):
a frame is magic 0x184D2204 (little-endian) | FLG | BD | content size (8 bytes, when FLG bit 3) | HC | blocks |
end mark | content checksum (when FLG bit 2). HC is the second byte of XXH32(FLG..content size, seed 0). Kafka
refuses a version other than 01, the reserved FLG bits (bit 0, the dictionary id, included), dependent blocks and
reserved BD bits. Kafka 0.8.2-0.9 computed HC over the magic number as well (KAFKA-1493) and wrote no content
size; from 0.10 on Kafka ignores HC for magic 0 message sets (KAFKA-3160) and checks it everywhere else, and so
do we (`old_header_checksum`). Damage raises `Lz4Error`.
"""

from __future__ import annotations

import struct
from typing import Any

MAGIC = b"\x04\x22\x4d\x18"
_FLG_VERSION_MASK = 0xC0
_FLG_VERSION_01 = 0x40
_FLG_RESERVED = 0x03  # bit 1 reserved, bit 0 the dictionary id: Kafka's reader refuses both
_FLG_BLOCK_INDEPENDENCE = 0x20
_FLG_CONTENT_SIZE = 0x08
_BD_RESERVED = 0x8F
_CHUNK = 65536  # what one read inflates at most: memory stays bounded whatever the frame declares


class Lz4Error(ValueError):
    """LZ4 data that does not decode, or would inflate past the limit."""


def _frame() -> Any:
    import lz4.frame  # the lz4 bindings: imported on the first lz4 data only

    return lz4.frame


# -- XXH32, for the 2-14 bytes of a frame descriptor only (the lz4 bindings do not expose it) ------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of `data` (the reference algorithm; meant for short inputs such as a frame descriptor)."""
    n, pos = len(data), 0
    if n >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i, word in enumerate(struct.unpack_from("<4I", data, pos)):
                lanes[i] = (_rotl((lanes[i] + word * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


# -- reading ---------------------------------------------------------------------------------------------------


def _descriptor_end(data: bytes) -> int:
    """Where HC sits, after checking the descriptor against Kafka's reader rules."""
    if len(data) < 7:
        raise Lz4Error(f"truncated lz4 frame header ({len(data)} bytes)")
    if data[:4] != MAGIC:
        raise Lz4Error(f"not an lz4 frame (magic {data[:4].hex()})")
    flg, bd = data[4], data[5]
    if flg & _FLG_VERSION_MASK != _FLG_VERSION_01:
        raise Lz4Error(f"lz4 frame version {flg >> 6} (only 1)")
    if flg & _FLG_RESERVED:
        raise Lz4Error("lz4 frame sets a reserved FLG bit or a dictionary id")
    if not flg & _FLG_BLOCK_INDEPENDENCE:
        raise Lz4Error("lz4 frame with dependent blocks (Kafka requires independent blocks)")
    if bd & _BD_RESERVED or (bd >> 4) & 0x07 < 4:
        raise Lz4Error(f"lz4 frame block descriptor {bd:#04x} is invalid")
    end = 6 + (8 if flg & _FLG_CONTENT_SIZE else 0)
    if len(data) <= end:
        raise Lz4Error("truncated lz4 frame header")
    return end


def decompress(data: bytes, max_bytes: int = -1, *, old_header_checksum: bool = False) -> bytes:
    """The inflated bytes of exactly one frame; more than `max_bytes` (when >= 0) is refused before it is
    inflated past the bound. `old_header_checksum`: HC is not checked (magic 0 message sets, Kafka 0.8.2-0.9)."""
    hc_at = _descriptor_end(data)
    expected = _header_checksum(data[4:hc_at])
    if data[hc_at] != expected:
        if not old_header_checksum:
            raise Lz4Error(f"lz4 frame header checksum {data[hc_at]:#04x}, descriptor gives {expected:#04x}")
        # The decoder checks HC itself: give it the checksum Kafka's reader never looked at for magic 0.
        data = data[:hc_at] + bytes([expected]) + data[hc_at + 1 :]
    limit = max_bytes + 1 if max_bytes >= 0 else -1
    decoder = _frame().LZ4FrameDecompressor()
    chunks: list[bytes] = []
    got = 0
    pending = data
    try:
        while not decoder.eof and (limit < 0 or got < limit):
            chunk = decoder.decompress(pending, max_length=_CHUNK if limit < 0 else min(_CHUNK, limit - got))
            pending = b""
            if not chunk and not decoder.eof and not decoder.needs_input:
                raise Lz4Error("lz4 decoder made no progress")
            chunks.append(chunk)
            got += len(chunk)
            if decoder.needs_input and not decoder.eof:
                raise Lz4Error("lz4 frame is truncated")
    except RuntimeError as exc:  # the bindings report every LZ4F error as RuntimeError
        raise Lz4Error(f"lz4 frame does not decode: {exc}") from exc
    if max_bytes >= 0 and got > max_bytes:
        raise Lz4Error(f"lz4 frame inflates past {max_bytes} bytes")
    if decoder.unused_data:
        raise Lz4Error(f"{len(decoder.unused_data)} bytes after the lz4 frame")
    return b"".join(chunks)


# -- writing ---------------------------------------------------------------------------------------------------


def compress(data: bytes, *, old_header_checksum: bool = False) -> bytes:
    """One frame with independent blocks, as Kafka's clients write it; `old_header_checksum` writes it as Kafka
    0.8.2-0.9 did for magic 0 (no content size, HC over the magic number too)."""
    frame: bytes = _frame().compress(data, block_linked=False, store_size=not old_header_checksum)
    if not old_header_checksum:
        return frame
    hc_at = _descriptor_end(frame)
    return frame[:hc_at] + bytes([_header_checksum(frame[:hc_at])]) + frame[hc_at + 1 :]
