"""Append-only segment files of CRC-framed records; recovery drops a torn tail and keeps every earlier record.

Layout of a directory: `<first record index, 20 digits>.seg` files, rolled at `segment_bytes`. A frame is
`length: uint32 | crc32: uint32 | payload`, with payload `key_len: uint32 | key | value_len: int32 (-1 = null) | value`
and the CRC-32 (zlib) over the payload. On open, the last segment is scanned: a frame that is incomplete or fails
its CRC there is a torn write from a crash, and the segment is truncated before it (logged with the byte count).
The same damage in an earlier segment cannot be a torn write, so it raises `CorruptLog` and changes nothing.

fsync policy: "always" (fsync before `append` returns), "interval" (at most every `fsync_interval_ms`, and on
close), "never" (leave it to the OS; a process crash loses nothing, a machine crash may).
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from zkcoord.errors import ConfigError, ErrorCode, ZkcoordError
from zkcoord.storage.store import RawRecord

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">II")
_KLEN = struct.Struct(">I")
_VLEN = struct.Struct(">i")
SUFFIX = ".seg"
FSYNC_POLICIES = ("always", "interval", "never")


class CorruptLog(ZkcoordError):
    """A record log is damaged somewhere a crash cannot explain; names the file and byte position."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, path: Path, position: int, reason: str) -> None:
        super().__init__(f"corrupt record log {path} at byte {position}: {reason}")
        self.path = path
        self.position = position


def frame(key: bytes, value: bytes | None) -> bytes:
    payload = b"".join(
        (
            _KLEN.pack(len(key)),
            key,
            _VLEN.pack(-1 if value is None else len(value)),
            b"" if value is None else value,
        )
    )
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def frames(records: Sequence[RawRecord]) -> bytes:
    """`frame` over many records, as one buffer for a single write."""
    parts: list[bytes] = []
    append = parts.append
    head = _FRAME.pack
    crc32 = zlib.crc32
    klen = _KLEN.pack
    vlen = _VLEN.pack
    for key, value in records:
        if value is None:
            payload = klen(len(key)) + key + b"\xff\xff\xff\xff"
        else:
            payload = b"".join((klen(len(key)), key, vlen(len(value)), value))
        append(head(len(payload), crc32(payload)))
        append(payload)
    return b"".join(parts)


def _parse_payload(payload: bytes) -> RawRecord | None:
    if len(payload) < 8:
        return None
    (klen,) = _KLEN.unpack_from(payload, 0)
    if 4 + klen + 4 > len(payload):
        return None
    key = payload[4 : 4 + klen]
    (vlen,) = _VLEN.unpack_from(payload, 4 + klen)
    start = 8 + klen
    if vlen == -1:
        return (key, None) if start == len(payload) else None
    if vlen < 0 or start + vlen != len(payload):
        return None
    return key, payload[start:]


def scan(data: bytes) -> tuple[list[RawRecord], int, str]:
    """Parse frames from the start of `data`: (records, end of the last good frame, why it stopped or "")."""
    records: list[RawRecord] = []
    pos = 0
    n = len(data)
    while pos < n:
        if pos + 8 > n:
            return records, pos, "incomplete frame header"
        length, crc = _FRAME.unpack_from(data, pos)
        end = pos + 8 + length
        if end > n:
            return records, pos, f"frame of {length} bytes runs past the end"
        payload = data[pos + 8 : end]
        if zlib.crc32(payload) != crc:
            return records, pos, "CRC mismatch"
        record = _parse_payload(payload)
        if record is None:
            return records, pos, "frame payload does not parse"
        records.append(record)
        pos = end
    return records, pos, ""


class FileRecordStore:
    """A `RecordStore` over segment files in `directory` (created if missing)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        fsync: str = "always",
        *,
        fsync_interval_ms: int = 1000,
        segment_bytes: int = 104_857_600,
        read_only: bool = False,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {FSYNC_POLICIES}, got {fsync!r}")
        if fsync_interval_ms < 0:
            raise ConfigError(f"fsync_interval_ms must be >= 0, got {fsync_interval_ms}")
        if segment_bytes < 64:
            raise ConfigError(f"segment_bytes must be >= 64, got {segment_bytes}")
        self.directory = Path(directory)
        self.fsync = fsync
        self.fsync_interval_ms = fsync_interval_ms
        self.segment_bytes = segment_bytes
        self.read_only = read_only
        self.dropped_tail_bytes = 0
        if read_only:
            if not self.directory.is_dir():
                raise ConfigError(f"record log directory {self.directory} does not exist")
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._records: list[RawRecord] | None = None
        self._count = 0
        self._active: Path | None = None
        self._fd = -1
        self._size = 0
        self._last_sync = time.monotonic()
        self._recover()

    # -------------------------------------------------------------------------------------------- recovery

    def segments(self) -> list[Path]:
        return sorted(p for p in self.directory.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())

    def _recover(self) -> None:
        segments = self.segments()
        records: list[RawRecord] = []
        for i, path in enumerate(segments):
            data = path.read_bytes()
            found, good_end, why = scan(data)
            if why:
                if i != len(segments) - 1:
                    raise CorruptLog(path, good_end, why)
                self.dropped_tail_bytes = len(data) - good_end
                log.warning(
                    "record log %s: %s torn tail of %d bytes at byte %d (%s)",
                    path,
                    "ignoring" if self.read_only else "dropping",
                    len(data) - good_end,
                    good_end,
                    why,
                )
                if not self.read_only:
                    with open(path, "r+b") as f:
                        f.truncate(good_end)
                        f.flush()
                        os.fsync(f.fileno())
                data = data[:good_end]
            records.extend(found)
            self._size = len(data)
        self._records = records
        self._count = len(records)
        self._active = segments[-1] if segments else None

    # -------------------------------------------------------------------------------------------- protocol

    def load(self) -> Iterator[RawRecord]:
        """Every record in append order. The first call after open returns what recovery read."""
        if self._records is not None:
            records, self._records = self._records, None
            return iter(records)
        out: list[RawRecord] = []
        segments = self.segments()
        for i, path in enumerate(segments):
            found, end, why = scan(path.read_bytes())
            if why and not (self.read_only and i == len(segments) - 1):
                raise CorruptLog(path, end, why)
            out.extend(found)
        return iter(out)

    def append(self, records: Sequence[RawRecord]) -> None:
        if self.read_only:
            raise ZkcoordError(f"record log {self.directory} is open read-only")
        if not records:
            return
        blob = frames(records)
        if self._fd < 0 or (self._size > 0 and self._size + len(blob) > self.segment_bytes):
            self._roll()
        written = 0
        view = memoryview(blob)
        while written < len(blob):
            written += os.write(self._fd, view[written:])
        self._size += len(blob)
        self._count += len(records)
        if self.fsync == "always":
            os.fsync(self._fd)
        elif self.fsync == "interval":
            now = time.monotonic()
            if (now - self._last_sync) * 1000 >= self.fsync_interval_ms:
                os.fsync(self._fd)
                self._last_sync = now

    def _roll(self) -> None:
        if self._fd >= 0:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
            self._active = None
        if self._active is None:
            self._active = self.directory / f"{self._count:020d}{SUFFIX}"
            self._size = 0
        self._fd = os.open(self._active, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if self.fsync != "never":
            # The new file's directory entry must survive a crash too.
            dfd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def close(self) -> None:
        if self._fd >= 0:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileRecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
