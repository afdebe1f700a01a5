"""CRC-32C (Castagnoli), as RecordBatch v2 uses it: the `crc32c` C extension when installed, else a table.

The pure-Python fallback is table-driven (one table lookup per byte); it is correct but slow (a few MB/s), so
servers that carry real traffic should have the `crc32c` package installed.
"""

from __future__ import annotations

from collections.abc import Callable

_POLY = 0x82F63B78  # reflected Castagnoli polynomial


def _make_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _make_table()


def crc32c_pure(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data`, continuing from `crc` (0 to start), in pure Python."""
    table = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _load_fast() -> Callable[[bytes | bytearray | memoryview], int] | None:
    try:
        import crc32c as _ext  # optional C extension (PyPI `crc32c`)
    except ImportError:
        return None
    fn = _ext.crc32c

    def fast(data: bytes | bytearray | memoryview) -> int:
        return int(fn(data))

    return fast


_FAST = _load_fast()
HAVE_FAST_CRC32C = _FAST is not None


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of `data` (check value: crc32c(b"123456789") == 0xE3069283)."""
    if _FAST is not None:
        return _FAST(data)
    return crc32c_pure(data)
