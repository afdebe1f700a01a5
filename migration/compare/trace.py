"""The comparison trace format: one run directory = `run.json` metadata + an `events/` folder of Parquet parts.

Every part has exactly `EVENT_SCHEMA`; a run is complete when `run.json` says `"complete": true` (written last,
by `TraceWriter.close`). The writer is safe to call from several runner threads; rows are buffered and flushed
to a new part file every `flush_rows` rows, so a crash loses at most one buffer and never corrupts a part.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
META_FILE = "run.json"
EVENTS_DIR = "events"


class EventKind(Enum):
    """What a trace row records. Columns that a kind does not use are null."""

    ASSIGNMENT = "assignment"  # member was given (topic, partition) in `generation`; an empty assignment has null topic
    OWN_START = "own_start"  # member starts owning (topic, partition): may fetch/consume from now on
    OWN_END = "own_end"  # member stops owning (topic, partition)
    COMMIT = "commit"  # member committed `offset` (the next offset to read) for (topic, partition)
    CONSUME = "consume"  # member processed the record at `offset` of (topic, partition)
    PRODUCE = "produce"  # the producer's record at `offset` of (topic, partition) was acknowledged
    REBALANCE_START = (
        "rebalance_start"  # member begins rebalance `generation` (legacy: the runner's round number)
    )
    REBALANCE_END = "rebalance_end"  # member finished rebalance `generation` and owns its new share
    ZK_OP = "zk_op"  # one ZooKeeper request by member (detail: {"op": ..., "path": ...})
    CHURN = "churn"  # the runner injected a churn event (detail: {"event": ..., ...}; member = its target)


KINDS: tuple[str, ...] = tuple(k.value for k in EventKind)

EVENT_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("scenario", pa.string(), nullable=False),
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),  # wall-clock milliseconds since the Unix epoch
        pa.field("kind", pa.string(), nullable=False),
        pa.field("member", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("generation", pa.int32()),
        pa.field("detail", pa.string()),  # JSON text, kind-specific
    ]
)

_COLUMNS = tuple(EVENT_SCHEMA.names)


class TraceError(ValueError):
    """A trace directory or row does not match the trace format; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class RunMeta:
    """What `run.json` holds. `started_ms`/`ended_ms` bound every interval metric of the run; `stopping_ms`
    (optional) is when the runner began its orderly shutdown: ownership gaps and overlaps after it are not
    judged, so members stopping at the end do not count as gaps."""

    run_id: str
    scenario: str
    protocol: str
    strategy: str
    started_ms: int
    ended_ms: int | None = None
    complete: bool = False
    extra: Mapping[str, Any] | None = None
    stopping_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "scenario": self.scenario,
            "protocol": self.protocol,
            "strategy": self.strategy,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "stopping_ms": self.stopping_ms,
            "complete": self.complete,
            "extra": dict(self.extra or {}),
        }

    @staticmethod
    def from_json(data: Any, where: str) -> RunMeta:
        if not isinstance(data, dict):
            raise TraceError(f"{where}: expected a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TraceError(
                f"{where}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION})"
            )
        for key, typ in (
            ("run_id", str),
            ("scenario", str),
            ("protocol", str),
            ("strategy", str),
            ("started_ms", int),
        ):
            if not isinstance(data.get(key), typ) or isinstance(data.get(key), bool):
                raise TraceError(f"{where}: field {key!r} must be {typ.__name__}, got {data.get(key)!r}")
        ended = data.get("ended_ms")
        if ended is not None and (not isinstance(ended, int) or ended < data["started_ms"]):
            raise TraceError(
                f"{where}: field 'ended_ms' must be null or an integer >= started_ms, got {ended!r}"
            )
        stopping = data.get("stopping_ms")
        if stopping is not None and (
            not isinstance(stopping, int) or isinstance(stopping, bool) or stopping < data["started_ms"]
        ):
            raise TraceError(
                f"{where}: field 'stopping_ms' must be null or an integer >= started_ms, got {stopping!r}"
            )
        return RunMeta(
            stopping_ms=stopping,
            run_id=data["run_id"],
            scenario=data["scenario"],
            protocol=data["protocol"],
            strategy=data["strategy"],
            started_ms=data["started_ms"],
            ended_ms=ended,
            complete=bool(data.get("complete", False)),
            extra=data.get("extra") or {},
        )


class TraceWriter:
    """Append trace rows for one run; `close(ended_ms)` flushes and marks the run complete.

    >>> w = TraceWriter(run_dir, RunMeta("r1", "demo", "legacy-fast", "range", started_ms=0))  # doctest: +SKIP
    >>> w.emit(5, EventKind.OWN_START, member="m0", topic="t", partition=0)                    # doctest: +SKIP
    >>> w.close(ended_ms=100)                                                                   # doctest: +SKIP
    """

    def __init__(self, run_dir: str | Path, meta: RunMeta, *, flush_rows: int = 50_000) -> None:
        if flush_rows < 1:
            raise ValueError("flush_rows must be >= 1")
        self.run_dir = Path(run_dir)
        self.meta = meta
        self._flush_rows = flush_rows
        self._lock = threading.Lock()
        self._rows: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
        self._parts = 0
        self._closed = False
        events = self.run_dir / EVENTS_DIR
        if events.exists() and any(events.iterdir()):
            raise TraceError(f"{events}: already holds a trace; use a fresh run directory")
        events.mkdir(parents=True, exist_ok=True)
        self._write_meta(meta)

    def emit(
        self,
        ts_ms: int,
        kind: EventKind,
        *,
        member: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        generation: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(kind, EventKind):
            raise TraceError(f"kind must be an EventKind, got {kind!r}")
        if (topic is None) != (partition is None) and kind is not EventKind.CHURN:
            raise TraceError(f"{kind.value} row: topic and partition must both be set or both be null")
        text = None if detail is None else json.dumps(dict(detail), sort_keys=True, separators=(",", ":"))
        with self._lock:
            if self._closed:
                raise TraceError(f"{self.run_dir}: trace is closed")
            r = self._rows
            r["run_id"].append(self.meta.run_id)
            r["scenario"].append(self.meta.scenario)
            r["protocol"].append(self.meta.protocol)
            r["ts_ms"].append(int(ts_ms))
            r["kind"].append(kind.value)
            r["member"].append(member)
            r["topic"].append(topic)
            r["partition"].append(partition)
            r["offset"].append(offset)
            r["generation"].append(generation)
            r["detail"].append(text)
            if len(r["run_id"]) >= self._flush_rows:
                self._flush_locked()

    def assignment(
        self, ts_ms: int, member: str, generation: int, partitions: Iterable[tuple[str, int]]
    ) -> None:
        """One row per assigned partition, or one row with null topic for an empty assignment."""
        tps = sorted(partitions)
        if not tps:
            self.emit(ts_ms, EventKind.ASSIGNMENT, member=member, generation=generation)
        for topic, partition in tps:
            self.emit(
                ts_ms,
                EventKind.ASSIGNMENT,
                member=member,
                topic=topic,
                partition=partition,
                generation=generation,
            )

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def close(
        self, ended_ms: int, extra: Mapping[str, Any] | None = None, *, stopping_ms: int | None = None
    ) -> Path:
        """Flush the last rows and write the final run.json (complete = true). Returns the run directory.
        `stopping_ms`: when the orderly shutdown began (see RunMeta); None keeps what the meta had."""
        stopping = self.meta.stopping_ms if stopping_ms is None else int(stopping_ms)
        if stopping is not None and not self.meta.started_ms <= stopping <= int(ended_ms):
            raise TraceError(f"stopping_ms {stopping} must lie within [started_ms, ended_ms]")
        with self._lock:
            if self._closed:
                return self.run_dir
            self._flush_locked()
            self._closed = True
        merged = {**(self.meta.extra or {}), **(extra or {})}
        self.meta = dataclasses.replace(
            self.meta, ended_ms=int(ended_ms), complete=True, extra=merged, stopping_ms=stopping
        )
        self._write_meta(self.meta)
        return self.run_dir

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        # An exception leaves the run marked incomplete (ended_ms unset) but keeps every row written so far.
        self.flush()

    def _flush_locked(self) -> None:
        if not self._rows["run_id"]:
            return
        table = pa.table({c: pa.array(self._rows[c], type=EVENT_SCHEMA.field(c).type) for c in _COLUMNS})
        table = table.cast(EVENT_SCHEMA)
        final = self.run_dir / EVENTS_DIR / f"part-{self._parts:05d}.parquet"
        tmp = final.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, final)  # readers never see a half-written part
        self._parts += 1
        self._rows = {c: [] for c in _COLUMNS}

    def _write_meta(self, meta: RunMeta) -> None:
        final = self.run_dir / META_FILE
        tmp = final.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, final)


def read_meta(run_dir: str | Path) -> RunMeta:
    path = Path(run_dir) / META_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read run metadata: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    return RunMeta.from_json(data, str(path))


def read_events(run_dir: str | Path) -> pa.Table:
    """All rows of one run, in file order, checked against EVENT_SCHEMA."""
    parts = event_parts(run_dir)
    tables = []
    for part in parts:
        table = pq.read_table(part)
        if not table.schema.equals(EVENT_SCHEMA, check_metadata=False):
            raise TraceError(f"{part}: schema does not match the trace format:\n{table.schema}")
        tables.append(table)
    if not tables:
        return EVENT_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def event_parts(run_dir: str | Path) -> list[Path]:
    return sorted((Path(run_dir) / EVENTS_DIR).glob("part-*.parquet"))


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories named by `paths`: each path is a run directory (it holds run.json) or a folder searched
    recursively for them. Sorted, without duplicates; raises TraceError when a path holds no run at all."""
    found: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise TraceError(f"{p}: no such file or directory")
        if (p / META_FILE).is_file():
            found.add(p.resolve())
            continue
        runs = {m.parent.resolve() for m in p.rglob(META_FILE)}
        if not runs:
            raise TraceError(f"{p}: holds no trace run (no {META_FILE} found beneath it)")
        found |= runs
    return sorted(found)
