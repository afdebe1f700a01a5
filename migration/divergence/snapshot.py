"""Snapshots of both offset stores as Parquet tables with one schema (group, topic, partition, offset):
a ZooKeeper walk of /consumers/*/offsets, and the broker side through OffsetFetch per group."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

SCHEMA_FIELDS = (("group", "string"), ("topic", "string"), ("partition", "int32"), ("offset", "int64"))


def write_snapshot(rows: Iterable[tuple[str, str, int, int]], path: str | os.PathLike[str]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ordered = sorted(rows)
    table = pa.table(
        {
            "group": pa.array([r[0] for r in ordered], pa.string()),
            "topic": pa.array([r[1] for r in ordered], pa.string()),
            "partition": pa.array([r[2] for r in ordered], pa.int32()),
            "offset": pa.array([r[3] for r in ordered], pa.int64()),
        }
    )
    pq.write_table(table, path)
    return len(ordered)


def snapshot_zookeeper(client: Any, groups: Sequence[str] | None, path: str | os.PathLike[str]) -> int:
    """Every readable offset znode of `groups` (all groups when None); malformed znodes are logged and left out."""
    from zkcoord.zk.offset_store import walk_offsets

    return write_snapshot(walk_offsets(client, groups), path)


def snapshot_broker(
    broker_for: Callable[[str], Any], groups: Sequence[str], path: str | os.PathLike[str]
) -> tuple[int, list[str]]:
    """OffsetFetch (all partitions) for each group; groups that fail are listed, not silently dropped."""
    rows: list[tuple[str, str, int, int]] = []
    errors: list[str] = []
    for group in sorted(groups):
        read = broker_for(group).read_offsets(None)
        if read.request_error is not None:
            errors.append(f"group {group}: {read.request_error}")
            continue
        rows.extend((group, tp.topic, tp.partition, off) for tp, off in read.offsets.items())
    return write_snapshot(rows, path), errors
