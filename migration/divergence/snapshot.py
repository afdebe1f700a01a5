"""Snapshots of both offset stores as Parquet tables with one schema (group, topic, partition, offset):
a ZooKeeper walk of /consumers/*/offsets, and the broker side through OffsetFetch per group or, without a
running broker, from `__consumer_offsets` records (a `zkcoord serve` record log directory).

The records are folded with the coordinator's own `replay` (zkcoord.group.model), so the snapshot holds exactly
what a coordinator loading that log would answer: the last commit per partition, tombstones delete."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from zkcoord.errors import ZkcoordError

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


class RecordLogError(ZkcoordError, ValueError):
    """A `__consumer_offsets` record does not decode, or two logs claim one group; names which and where."""


def broker_rows_from_records(
    records: Iterable[tuple[bytes, bytes | None]],
    groups: Collection[str] | None = None,
    source: str = "records",
) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, offset) rows of what the records leave committed, sorted; only `groups` when
    given. Pure. A record that does not decode raises RecordLogError naming its index: skipping it could hide a
    tombstone, and then the report would show an offset that no coordinator holds."""
    from zkcoord.group.model import PersistedView, replay
    from zkcoord.records.offsets import decode_record

    view = PersistedView()
    for index, (key, value) in enumerate(records):
        try:
            record = decode_record(key, value)
        except ValueError as exc:
            raise RecordLogError(f"{source}: record {index}: {exc}") from None
        replay(view, record)
    wanted = None if groups is None else set(groups)
    rows = [
        (group, topic, partition, value.offset)
        for group, offsets in view.offsets.items()
        if wanted is None or group in wanted
        for (topic, partition), value in offsets.items()
        if value.offset >= 0
    ]
    return sorted(rows)


def snapshot_broker_records(
    directories: Sequence[str | os.PathLike[str]],
    groups: Collection[str] | None,
    path: str | os.PathLike[str],
) -> int:
    """The broker side from record log directories (`<serve --data-dir>/group-records`), opened read-only: a
    torn tail of a log a coordinator is still writing is ignored, never cut. A group found in two logs is an
    error (which one is current cannot be told from the logs)."""
    from zkcoord.storage import FileRecordStore
    from zkcoord.storage.file_store import CorruptLog

    rows: list[tuple[str, str, int, int]] = []
    owner: dict[str, str] = {}
    for directory in directories:
        name = os.fspath(directory)
        if not os.path.isdir(name):
            raise RecordLogError(f"{name}: not a record log directory")
        try:
            store = FileRecordStore(name, read_only=True)
        except CorruptLog as exc:
            raise RecordLogError(str(exc)) from None
        try:
            found = broker_rows_from_records(store.load(), groups, source=name)
        finally:
            store.close()
        for group in sorted({r[0] for r in found}):
            if group in owner:
                raise RecordLogError(
                    f"group {group!r} has offsets in two record logs: {owner[group]} and {name}"
                )
            owner[group] = name
        rows.extend(found)
    return write_snapshot(rows, path)
