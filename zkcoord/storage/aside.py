"""Bytes a recovery cuts from a file, kept beside it: durable writes and the `<file>.torn-<byte>` copies every log
(the coordinator's record log, the partition logs) makes before it truncates a torn tail, so nothing is deleted,
only moved aside."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries (a new or renamed file's name) survive a crash."""
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_durably(path: Path, data: bytes, mode: str = "wb") -> None:
    """Write `path` whole and fsync it (the caller fsyncs the directory once its names are final); `mode` "xb"
    refuses to replace an existing file."""
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def keep_torn_tail(path: Path, start: int, tail: bytes) -> Path:
    """Copy a torn tail (the bytes from `start` to the end of `path`) aside before the file is cut: the bytes are
    never deleted, only moved. The copy goes to `<file>.torn-<start>`, or `.torn-<start>.1`, `.2` ... when an
    earlier torn tail at the same byte is already kept there (a second crash at the same place): a kept copy is
    never overwritten."""
    suffix = 0
    while True:  # ends: each turn passes one existing file of a finite directory
        aside = path.with_name(f"{path.name}.torn-{start}" + (f".{suffix}" if suffix else ""))
        try:
            write_durably(aside, tail, "xb")
        except FileExistsError:
            suffix += 1
            continue
        fsync_dir(path.parent)
        return aside
