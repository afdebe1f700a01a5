"""Offset export and import, the one implementation behind `zkcoord migrate export|import` and `zkcoord legacy
export|import`: three formats — ExportZkOffsets lines (`<znode path>:<value>`), JSON lines and Parquet — and an
import that validates the whole input before writing anything, writes in batches through the ZooKeeper offset
store (or the broker), keeps a journal so an interrupted import resumes where it stopped, and can refuse to
lower any stored offset.

Two dialects of input. `STRICT` (migrate): offsets in [0, 2^63), a partition given twice with different values
is an error. `KAFKA` (the legacy tools, as kafka.tools.ImportZkOffsets): any signed 64-bit value (-1 is what the
0.8 consumer stores for "no offset"), and the last of two values wins. Both, on purpose unlike the original:
paths must be /consumers/G/offsets/T/P with a canonical partition id (the original wrote anything verbatim);
the value is split at the last ':' so a group id containing ':' survives; an empty line in the middle is an
error, not a silent end of input; writes follow sorted (group, topic, partition) order, not hash order.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.ids import utf16_key
from zkcoord.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FORMATS = ("zk", "jsonl", "parquet")
_PATH_RE = re.compile(r"/consumers/(?P<group>[^/]+)/offsets/(?P<topic>[^/]+)/(?P<partition>[0-9]+)")
_VALUE_RE = re.compile(r"[+-]?[0-9]+")
MAX_OFFSET = 2**63 - 1
MIN_LONG = -(2**63)


class Dialect(enum.Enum):
    """Which offsets an input may hold and what a repeated partition means (module docstring)."""

    STRICT = "strict"
    KAFKA = "kafka"

    @property
    def min_offset(self) -> int:
        return 0 if self is Dialect.STRICT else MIN_LONG

    @property
    def syntax(self) -> str:
        """How the line format is named in errors: the migrate tool's quoted form, the JVM tool's plain one."""
        return "'<znode path>:<offset>'" if self is Dialect.STRICT else "<znode path>:<offset>"

    def value_error(self, value: str) -> str:
        if self is Dialect.STRICT:
            return f"offset {value[:40]!r} is not a non-negative decimal integer below 2^63"
        if _VALUE_RE.fullmatch(value):
            return f"offset {value[:40]} does not fit a 64-bit long"
        return f"offset {value[:40]!r} is not a decimal integer"


class OffsetRecord(NamedTuple):
    group: str
    topic: str
    partition: int
    offset: int

    @property
    def path(self) -> str:
        return paths.offset_path(self.group, self.topic, self.partition)


class OffsetFileError(ZkcoordError, ValueError):
    """The input file is malformed; names the file, the line (or row) and what is wrong. Nothing was written."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source, self.line, self.reason = source, line, reason


class ImportFailed(ZkcoordError):
    """A batch could not be written; the journal records every batch written before it, so re-running the
    same import resumes from this batch."""

    retriable = True


class JournalMismatch(ZkcoordError):
    """The journal was written for a different input or target; refusing to resume from it."""


def detect_format(path: str | os.PathLike[str]) -> str:
    name = str(path)
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    return "zk"


# ------------------------------------------------------------------------------------------- writing


def _order(r: OffsetRecord) -> tuple[bytes, bytes, int]:
    """Groups and topics in Java String order (as the JVM tools list znodes), partitions ascending."""
    return utf16_key(r.group), utf16_key(r.topic), r.partition


def format_lines(records: Iterable[OffsetRecord], fmt: str) -> Iterator[str]:
    """The lines (with their newline) of a text format, records in `_order`."""
    if fmt not in ("zk", "jsonl"):
        raise ValueError(f"{fmt!r} is not a line format; valid: zk, jsonl")
    for r in sorted(records, key=_order):
        if fmt == "zk":
            yield f"{r.path}:{r.offset}\n"
        else:
            yield json.dumps(r._asdict(), separators=(",", ":")) + "\n"


def write_offsets_file(
    records: Iterable[OffsetRecord], path: str | os.PathLike[str], fmt: str | None = None
) -> int:
    """Write records in (group, topic, partition) order; returns how many."""
    fmt = fmt or detect_format(path)
    rows = sorted(records, key=_order)
    if fmt in ("zk", "jsonl"):
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(format_lines(rows, fmt))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "group": pa.array([r.group for r in rows], pa.string()),
                "topic": pa.array([r.topic for r in rows], pa.string()),
                "partition": pa.array([r.partition for r in rows], pa.int32()),
                "offset": pa.array([r.offset for r in rows], pa.int64()),
            }
        )
        pq.write_table(table, path)
    else:
        raise ValueError(f"unknown offsets format {fmt!r}; valid: {', '.join(FORMATS)}")
    return len(rows)


# ------------------------------------------------------------------------------------------- reading


def _check_record(
    source: str,
    line: int,
    group: Any,
    topic: Any,
    partition: Any,
    offset: Any,
    dialect: Dialect = Dialect.STRICT,
) -> OffsetRecord:
    # The znode path rules are zkcoord.legacy.paths' (one source of truth); its InvalidName names the rule.
    try:
        paths.offset_path(group, topic, partition)
    except paths.InvalidName as exc:
        raise OffsetFileError(source, line, str(exc)) from None
    low = dialect.min_offset
    if isinstance(offset, bool) or not isinstance(offset, int) or not low <= offset <= MAX_OFFSET:
        bounds = "[0, 2^63)" if low == 0 else "[-2^63, 2^63)"
        raise OffsetFileError(source, line, f"offset must be an int in {bounds}, not {offset!r}")
    return OffsetRecord(group, topic, partition, offset)


def _parse_zk_lines(
    source: str, lines: Iterable[str], dialect: Dialect = Dialect.STRICT
) -> Iterator[tuple[int, OffsetRecord]]:
    blank_at = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            blank_at = blank_at or number
            continue
        if blank_at:
            raise OffsetFileError(
                source,
                blank_at,
                "empty line before the end of the input (ImportZkOffsets would silently skip the content "
                f"after the empty line {blank_at})",
            )
        path, sep, value = line.rpartition(":")
        if not sep:
            raise OffsetFileError(source, number, f"expected {dialect.syntax}, got {line[:120]!r}")
        match = _PATH_RE.fullmatch(path)
        if not match:
            raise OffsetFileError(
                source,
                number,
                f"{path[:120]!r} is not an offsets path /consumers/<group>/offsets/<topic>/<partition>",
            )
        if not _VALUE_RE.fullmatch(value) or not dialect.min_offset <= int(value) <= MAX_OFFSET:
            raise OffsetFileError(source, number, dialect.value_error(value))
        try:  # a canonical id only: '01' names no partition the 0.8 consumer would read
            partition = paths.parse_partition(path.rsplit("/", 1)[0], match["partition"])
        except paths.InvalidName as exc:
            raise OffsetFileError(source, number, str(exc)) from None
        record = _check_record(source, number, match["group"], match["topic"], partition, int(value), dialect)
        yield number, record


def _parse_jsonl(
    source: str, lines: Iterable[str], dialect: Dialect = Dialect.STRICT
) -> Iterator[tuple[int, OffsetRecord]]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise OffsetFileError(source, number, f"not JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(obj, dict):
            raise OffsetFileError(source, number, "expected a JSON object")
        missing = [k for k in ("group", "topic", "partition", "offset") if k not in obj]
        if missing:
            raise OffsetFileError(source, number, f"missing field(s) {', '.join(missing)}")
        yield (
            number,
            _check_record(
                source, number, obj["group"], obj["topic"], obj["partition"], obj["offset"], dialect
            ),
        )


def _parse_parquet(source: str) -> Iterator[tuple[int, OffsetRecord]]:
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    missing = [c for c in ("group", "topic", "partition", "offset") if c not in table.column_names]
    if missing:
        raise OffsetFileError(source, 0, f"missing column(s) {', '.join(missing)}")
    columns = [table.column(c).to_pylist() for c in ("group", "topic", "partition", "offset")]
    for row, values in enumerate(zip(*columns, strict=True), start=1):
        yield row, _check_record(source, row, *values)


def read_offsets_file(
    path: str | os.PathLike[str], fmt: str | None = None, dialect: Dialect = Dialect.STRICT
) -> list[OffsetRecord]:
    """Parse and validate the whole file; raise OffsetFileError at the first bad line. Sorted output."""
    source = str(path)
    fmt = fmt or detect_format(path)
    if fmt == "parquet":
        parsed: Iterable[tuple[int, OffsetRecord]] = _parse_parquet(source)
        return _dedupe(source, parsed, dialect)
    with open(source, encoding="utf-8", newline="") as handle:
        return parse_offsets(handle, source, fmt, dialect)


def parse_offsets(
    lines: Iterable[str], source: str, fmt: str, dialect: Dialect = Dialect.STRICT
) -> list[OffsetRecord]:
    """The records of a text format (`zk` or `jsonl`) read from `lines`; `source` names the input in errors."""
    if fmt not in ("zk", "jsonl"):
        raise ValueError(f"unknown offsets format {fmt!r}; valid: {', '.join(FORMATS)}")
    parser = _parse_zk_lines if fmt == "zk" else _parse_jsonl
    return _dedupe(source, parser(source, lines, dialect), dialect)


def _dedupe(
    source: str, parsed: Iterable[tuple[int, OffsetRecord]], dialect: Dialect = Dialect.STRICT
) -> list[OffsetRecord]:
    seen: dict[tuple[str, str, int], tuple[int, int]] = {}
    for line, record in parsed:
        key = (record.group, record.topic, record.partition)
        if dialect is Dialect.KAFKA:
            seen[key] = (line, record.offset)  # ImportZkOffsets: the last value given wins
            continue
        if key in seen and seen[key][1] != record.offset:
            first_line, first_value = seen[key]
            raise OffsetFileError(
                source,
                line,
                f"{record.path} given twice with different offsets ({first_value} on line {first_line}, "
                f"{record.offset} here)",
            )
        seen.setdefault(key, (line, record.offset))
    return sorted(OffsetRecord(g, t, p, off) for (g, t, p), (_, off) in seen.items())


# ------------------------------------------------------------------------------------------- export


def zookeeper_records(
    client: Any, groups: Sequence[str] | None, *, skip_malformed: bool = True
) -> list[OffsetRecord]:
    """Every offset znode of `groups` (all groups under /consumers when None). A malformed znode is logged and
    skipped, or with `skip_malformed=False` stops the export with a MalformedZnode naming it."""
    from zkcoord.zk.offset_store import walk_offsets

    found = walk_offsets(client, groups, skip_malformed=skip_malformed)
    return sorted((OffsetRecord(g, t, p, o) for g, t, p, o in found), key=_order)


def export_zookeeper(
    client: Any, groups: Sequence[str] | None, path: str | os.PathLike[str], fmt: str | None = None
) -> int:
    """ExportZkOffsets: every offset znode of `groups` (all groups under /consumers when None) to a file."""
    return write_offsets_file(zookeeper_records(client, groups), path, fmt)


# ------------------------------------------------------------------------------------------- import


class ImportTarget(Protocol):
    """Where an import writes: `write(group, {(topic, partition): offset}) -> {(topic, partition): error}`
    (empty dict = every partition stored, or kept higher in never-regress mode)."""

    name: str

    def write(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str]: ...


class ZooKeeperTarget:
    name = "zookeeper"

    def __init__(self, client: Any, never_regress: bool = False) -> None:
        self.client = client
        self.never_regress = never_regress
        self.kept_higher = 0

    def write(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str]:
        from zkcoord.zk.offset_store import WriteMode, ZooKeeperOffsetStore

        mode = WriteMode.NEVER_REGRESS if self.never_regress else WriteMode.OVERWRITE
        report = ZooKeeperOffsetStore(self.client, group).write(offsets, mode)
        self.kept_higher += len(report.kept_higher)
        return dict(report.errors)


class BrokerTarget:
    """Never-regress on the broker is read-then-write (the broker has no conditional commit): a member
    committing between the two can still be overtaken; the workflow runs it while members dual-commit."""

    name = "broker"

    def __init__(self, stores: Callable[[str], Any], never_regress: bool = False) -> None:
        self.stores = stores
        self.never_regress = never_regress
        self.kept_higher = 0

    def write(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str]:
        store = self.stores(group)
        wanted = dict(offsets)
        if self.never_regress:
            current = store.read_offsets(list(wanted))
            if current.request_error is not None:
                return {tp: str(current.request_error) for tp in wanted}
            for tp, stored in current.offsets.items():
                if tp in wanted and stored >= wanted[tp]:
                    del wanted[tp]
                    self.kept_higher += 1
        reply = store.write_offsets(wanted)
        confirmed = dict(reply.errors)
        errors: dict[TopicPartition, str] = {}
        for tp in sorted(wanted):
            if tp not in confirmed:
                errors[tp] = "the broker did not confirm this partition"
            elif confirmed[tp] is not None:
                errors[tp] = str(confirmed[tp])
        return errors


def records_digest(records: Sequence[OffsetRecord]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(f"{r.group}\0{r.topic}\0{r.partition}\0{r.offset}\n".encode())
    return h.hexdigest()


def plan_batches(records: Sequence[OffsetRecord], batch_size: int) -> list[tuple[OffsetRecord, ...]]:
    """Sorted records cut into batches of at most `batch_size`, never mixing groups (a batch is one store call)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    batches: list[tuple[OffsetRecord, ...]] = []
    current: list[OffsetRecord] = []
    for r in sorted(records):
        if current and (len(current) >= batch_size or current[-1].group != r.group):
            batches.append(tuple(current))
            current = []
        current.append(r)
    if current:
        batches.append(tuple(current))
    return batches


@dataclass
class ImportReport:
    total: int = 0
    batches: int = 0
    written_batches: int = 0
    resumed_batches: int = 0  # already in the journal, not written again
    kept_higher: int = 0
    groups: list[str] = field(default_factory=list)


def import_offsets(
    records: Sequence[OffsetRecord],
    target: ImportTarget,
    journal: str | os.PathLike[str] | None = None,
    *,
    batch_size: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Write validated `records` to `target` batch by batch. With a journal, each written batch is appended
    (fsync'd) after the store confirmed it; a re-run with the same journal skips those batches."""
    ordered = sorted(records)
    batches = plan_batches(ordered, batch_size)
    digest = records_digest(ordered)
    header = {
        "kind": "import",
        "digest": digest,
        "target": target.name,
        "batch_size": batch_size,
        "never_regress": bool(getattr(target, "never_regress", False)),
        "records": len(ordered),
        "batches": len(batches),
    }
    done: set[int] = set()
    journal_path = Path(journal) if journal is not None else None
    if journal_path is not None and journal_path.exists() and journal_path.stat().st_size > 0:
        done = _resume(journal_path, header)
    elif journal_path is not None:
        journal_path.parent.mkdir(parents=True, exist_ok=True)
        _append(journal_path, header)
    report = ImportReport(total=len(ordered), batches=len(batches), groups=sorted({r.group for r in ordered}))
    for index, batch in enumerate(batches):
        if index in done:
            report.resumed_batches += 1
            continue
        group = batch[0].group
        errors = target.write(group, {TopicPartition(r.topic, r.partition): r.offset for r in batch})
        if errors:
            (topic, partition), first = sorted(errors.items())[0]
            raise ImportFailed(
                f"batch {index + 1}/{len(batches)} (group {group}, {len(batch)} offsets) failed for "
                f"{len(errors)} partition(s), first {topic}-{partition}: {first}; "
                f"{report.written_batches + report.resumed_batches} batch(es) before it are written"
                + (
                    f" and journaled in {journal_path} — re-run the same import to resume"
                    if journal_path
                    else ""
                )
            )
        if journal_path is not None:
            _append(journal_path, {"kind": "batch", "index": index, "group": group, "count": len(batch)})
        report.written_batches += 1
        if progress is not None:
            progress(index + 1, len(batches))
    report.kept_higher = int(getattr(target, "kept_higher", 0))
    if journal_path is not None and report.written_batches:
        _append(journal_path, {"kind": "done", "written_batches": report.written_batches})
    return report


def _append(path: Path, entry: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _resume(path: Path, header: Mapping[str, Any]) -> set[int]:
    done: set[int] = set()
    with open(path, encoding="utf-8") as handle:
        lines = handle.readlines()
    good_bytes = 0
    for number, line in enumerate(lines, start=1):
        if not line.endswith("\n"):
            # The process died mid-append: cut the fragment so the next entry starts on a clean line.
            log.warning("%s:%d: dropping a torn last line (the process died while writing it)", path, number)
            os.truncate(path, good_bytes)
            break
        good_bytes += len(line.encode("utf-8"))
        entry = json.loads(line)
        if number == 1:
            for key in ("digest", "target", "batch_size", "never_regress"):
                if entry.get(key) != header[key]:
                    raise JournalMismatch(
                        f"{path} was written for a different import ({key}: journal {entry.get(key)!r}, "
                        f"now {header[key]!r}); use another --journal or delete this one"
                    )
        elif entry.get("kind") == "batch":
            done.add(int(entry["index"]))
    return done
