"""`zkcoord legacy`: the ZooKeeper-era group tools (list, describe, export, import, delete) with the output
formats of Kafka's own tools, plus `consume` (registered from zkcoord.cli.legacy_consume).

Every command takes `--zk CONNECT` (a chroot is allowed: `host:2181/kafka`). Reads parse every znode and stop
with an error naming the first malformed one; `import` validates the whole input before writing anything;
`delete` removes a group in one ZooKeeper transaction that fails if a member registers meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from zkcoord.cli import legacy_consume
from zkcoord.cli.options import examples
from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import INT64_MAX, INT64_MIN, encode_offset
from zkcoord.legacy.filters import TopicFilter
from zkcoord.legacy.ids import consumer_of_thread, java_sorted
from zkcoord.legacy.topic_partition import TopicPartition
from zkcoord.zk import registry
from zkcoord.zk.session import connect

log = logging.getLogger(__name__)

ZOOKEEPER_NOTE = (
    "Note: This will only show information about consumers that use ZooKeeper "
    "(not those using the Java consumer API)."
)
ROW_FORMAT = "%-30s %-10s %-15s %-15s %-10s %-50s"
MAX_OPS_PER_TRANSACTION = 1000


class OffsetsFileError(ZkcoordError):
    """A line of an offsets file is malformed; nothing has been written."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "legacy", help="ZooKeeper-era consumer groups: list, describe, export, import, delete"
    )
    legacy_sub = parser.add_subparsers(dest="legacy_command", metavar="SUBCOMMAND", required=True)

    def add(
        name: str, help_: str, func: Callable[[argparse.Namespace], int], *example_lines: str
    ) -> argparse.ArgumentParser:
        p = legacy_sub.add_parser(name, help=help_, description=help_, epilog=examples(*example_lines))
        p.add_argument(
            "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
        )
        p.add_argument("--zk-timeout", type=float, default=15.0, metavar="S", help="connect timeout, seconds")
        p.set_defaults(func=func)
        return p

    add(
        "list",
        "list the groups under /consumers",
        cmd_list,
        "zkcoord legacy list --zk 127.0.0.1:2181",
        "zkcoord legacy list --zk zk1:2181,zk2:2181/kafka --zk-timeout 5",
    )

    p = add(
        "describe",
        "offsets, log end offsets, lag and owners of a group",
        cmd_describe,
        "zkcoord legacy describe --zk 127.0.0.1:2181 --group orders",
    )
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to describe")
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=3000,
        metavar="MS",
        help="per-broker timeout for log end offsets, in ms (then '-' is shown)",
    )

    p = add(
        "export",
        "export offsets (ExportZkOffsets format or JSON lines)",
        cmd_export,
        "zkcoord legacy export --zk 127.0.0.1:2181 --group orders --output orders.offsets",
        "zkcoord legacy export --zk 127.0.0.1:2181 --format jsonl > all.jsonl",
    )
    p.add_argument(
        "--group", action="append", default=[], metavar="G", help="repeatable (default: every group)"
    )
    p.add_argument("--output", default="-", metavar="FILE", help="file, or - for stdout")
    p.add_argument(
        "--format",
        choices=("kafka", "jsonl"),
        default="kafka",
        help="kafka: ExportZkOffsets lines (/consumers/G/offsets/T/P:offset); jsonl: a JSON object per line",
    )

    p = add(
        "import",
        "import offsets (ImportZkOffsets format or JSON lines)",
        cmd_import,
        "zkcoord legacy import --zk 127.0.0.1:2181 --input orders.offsets",
        "zkcoord legacy import --zk 127.0.0.1:2181 --format jsonl --input - < all.jsonl",
    )
    p.add_argument("--input", required=True, metavar="FILE", help="file, or - for stdin")
    p.add_argument(
        "--format",
        choices=("kafka", "jsonl"),
        default="kafka",
        help="kafka: ImportZkOffsets lines (/consumers/G/offsets/T/P:offset); jsonl: a JSON object per line",
    )

    p = add(
        "delete",
        "delete an inactive group (or one topic of it, or a topic from all inactive groups)",
        cmd_delete,
        "zkcoord legacy delete --zk 127.0.0.1:2181 --group old-reports",
        "zkcoord legacy delete --zk 127.0.0.1:2181 --topic retired-topic   # from every inactive group",
    )
    p.add_argument(
        "--group", metavar="G", help="the group to delete (default: every inactive group, with --topic)"
    )
    p.add_argument(
        "--topic", metavar="T", help="only this topic's offsets and owners (default: the whole group)"
    )

    legacy_consume.register(legacy_sub)


@contextlib.contextmanager
def _client(args: argparse.Namespace) -> Iterator[KazooClient]:
    client = connect(args.zk, timeout=args.zk_timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()


# --- list -------------------------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        for group in registry.list_groups(client):
            print(group)
    return 0


# --- describe ---------------------------------------------------------------------------------------------------

EndOffsets = Callable[[KazooClient, Sequence[TopicPartition], int], dict[TopicPartition, int]]


def log_end_offsets(
    client: KazooClient, tps: Sequence[TopicPartition], timeout_ms: int
) -> dict[TopicPartition, int]:
    """Log end offsets from each partition's leader as the registry names it; partitions whose leader is
    unknown or unreachable within `timeout_ms` are left out."""
    by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
    for tp in tps:
        try:
            by_leader.setdefault(registry.leader_endpoint(client, *tp), []).append(tp)
        except registry.NoLeader:
            continue
    found: dict[TopicPartition, int] = {}
    for (host, port), leader_tps in sorted(by_leader.items()):
        found.update(_end_offsets_from(f"{host}:{port}", leader_tps, timeout_ms))
    return found


def _end_offsets_from(
    bootstrap: str, tps: Sequence[TopicPartition], timeout_ms: int
) -> dict[TopicPartition, int]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    consumer = None
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            request_timeout_ms=max(timeout_ms, 1000),
            reconnect_backoff_max_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            enable_auto_commit=False,
        )
        ends = consumer.end_offsets([KafkaTP(t, p) for t, p in tps], timeout_ms=timeout_ms)
        return {
            TopicPartition(tp.topic, tp.partition): int(off) for tp, off in ends.items() if off is not None
        }
    except Exception as exc:  # an unreachable or failing broker only means "unknown" here, printed as '-'
        log.info("log end offsets from %s unavailable: %r", bootstrap, exc)
        return {}
    finally:
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)


@dataclass(frozen=True)
class DescribeRow:
    topic: str
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str | None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset < 0 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset

    def render(self) -> str:
        def cell(v: object) -> str:
            return "-" if v is None else str(v)

        return ROW_FORMAT % (
            self.topic,
            cell(self.partition),
            cell(self.offset),
            cell(self.log_end_offset),
            cell(self.lag),
            cell(self.consumer_id),
        )


def describe_group(
    client: KazooClient, group: str, *, end_offsets: EndOffsets, timeout_ms: int, out: TextIO
) -> list[DescribeRow]:
    """The rows of 0.10.2's `kafka-consumer-groups --zookeeper --describe`; prints missing-offset errors."""
    owners = registry.read_owners(client, group)
    offsets = registry.read_offsets(client, group)
    owner_topics = java_sorted(registry.children(client, paths.owners_path(group)))
    tps: list[TopicPartition] = []
    for topic in owner_topics:
        assignment = registry.read_topic(client, topic)
        # Kafka lists the topic's partitions from /brokers/topics; without that znode we fall back to the
        # owner and offset children so nothing held in ZooKeeper is hidden.
        ids = (
            assignment.partition_ids
            if assignment is not None
            else sorted({p for t, p in [*owners, *offsets] if t == topic})
        )
        tps.extend(TopicPartition(topic, p) for p in ids)
    ends = end_offsets(client, tps, timeout_ms) if tps else {}
    rows: list[DescribeRow] = []
    for tp in tps:
        offset = offsets.get(tp)
        if offset is None:
            print(
                f"Error: Could not fetch offset from zookeeper for group '{group}' partition '[{tp[0]},{tp[1]}]' "
                "due to missing offset data in zookeeper.",
                file=out,
            )
        owner = owners.get(tp)
        rows.append(
            DescribeRow(
                tp[0], tp[1], offset, ends.get(tp), None if owner is None else consumer_of_thread(owner)
            )
        )
    owning = {consumer_of_thread(th) for th in owners.values()}
    all_topics: list[str] | None = None
    for cid, reg in registry.read_registrations(client, group).items():
        if cid in owning:
            continue
        if reg.is_wildcard:
            if all_topics is None:
                all_topics = list(registry.read_topics(client))
            topics = TopicFilter.of_registration(reg).matching(all_topics)
        else:
            topics = java_sorted(reg.topic_counts)
        rows.extend(DescribeRow(t, None, None, None, cid) for t in topics)
    return rows


def cmd_describe(args: argparse.Namespace) -> int:
    group = paths.validate_group(args.group)
    with _client(args) as client:
        print(ZOOKEEPER_NOTE + "\n", file=sys.stderr)
        if not registry.group_exists(client, group):
            print(f"Error: The consumer group '{group}' does not exist.")
            return 1
        rows = describe_group(
            client, group, end_offsets=log_end_offsets, timeout_ms=args.timeout_ms, out=sys.stdout
        )
        print()
        print(ROW_FORMAT % ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"))
        for row in rows:
            print(row.render())
    return 0


# --- export -----------------------------------------------------------------------------------------------------


def export_lines(client: KazooClient, groups: Sequence[str], fmt: str) -> Iterator[str]:
    """ExportZkOffsets lines `<znode path>:<offset>` or JSON lines, groups/topics in Java order, partitions
    ascending. A group without an offsets node is skipped (the JVM tool throws there)."""
    for group in groups or registry.list_groups(client):
        for (topic, partition), offset in registry.read_offsets(client, group).items():
            if fmt == "kafka":
                yield f"{paths.offset_path(group, topic, partition)}:{offset}"
            else:
                yield json.dumps({"group": group, "topic": topic, "partition": partition, "offset": offset})


def cmd_export(args: argparse.Namespace) -> int:
    groups = [paths.validate_group(g) for g in args.group]
    with _client(args) as client:
        lines = list(export_lines(client, groups, args.format))
    text = "".join(line + "\n" for line in lines)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"exported {len(lines)} offsets to {args.output}", file=sys.stderr)
    return 0


# --- import -----------------------------------------------------------------------------------------------------

_OFFSET_PATH = re.compile(r"/consumers/([^/]+)/offsets/([^/]+)/([^/]+)")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_offsets_file(lines: Sequence[str], fmt: str) -> dict[tuple[str, str, int], int]:
    """(group, topic, partition) -> offset from an export; later duplicates win (as in ImportZkOffsets).
    Raises `OffsetsFileError` naming the line for anything that is not a valid offsets entry."""
    entries: dict[tuple[str, str, int], int] = {}
    blank_at: int | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if line.strip() == "":
            blank_at = blank_at or number
            continue
        if blank_at is not None:
            raise OffsetsFileError(
                f"line {number}: content after the empty line {blank_at} (Kafka's ImportZkOffsets stops at the "
                "first empty line and would silently skip the rest)"
            )
        try:
            key, offset = _parse_line(line, fmt)
        except (ValueError, paths.InvalidName) as exc:
            raise OffsetsFileError(f"line {number}: {exc}: {line[:200]!r}") from None
        entries[key] = offset
    return entries


def _parse_line(line: str, fmt: str) -> tuple[tuple[str, str, int], int]:
    if fmt == "jsonl":
        obj = json.loads(line)
        if not isinstance(obj, dict) or set(obj) != {"group", "topic", "partition", "offset"}:
            raise ValueError("expected an object with exactly group, topic, partition, offset")
        group, topic, partition, offset = obj["group"], obj["topic"], obj["partition"], obj["offset"]
        for name, value in (("partition", partition), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer")
        if not isinstance(group, str) or not isinstance(topic, str):
            raise ValueError("group and topic must be strings")
    else:
        path, sep, value = line.rpartition(":")
        if not sep:
            raise ValueError("expected <znode path>:<offset>")
        m = _OFFSET_PATH.fullmatch(path)
        if m is None:
            raise ValueError(
                f"{path!r} is not an offsets znode /consumers/<group>/offsets/<topic>/<partition>"
            )
        if not _DECIMAL.fullmatch(value):
            raise ValueError(f"offset {value!r} is not a decimal integer")
        group, topic = m.group(1), m.group(2)
        partition = paths.parse_partition(f"/consumers/{group}/offsets/{topic}", m.group(3))
        offset = int(value)
    if not INT64_MIN <= offset <= INT64_MAX:
        raise ValueError(f"offset {offset} does not fit a 64-bit long")
    # the builder validates group, topic and partition
    paths.offset_path(group, topic, partition)
    return (group, topic, partition), offset


def write_offsets(client: KazooClient, entries: dict[tuple[str, str, int], int]) -> int:
    """Write every entry with multi-op transactions (creating missing parents); returns the znodes written.
    Each transaction of up to MAX_OPS_PER_TRANSACTION operations is all-or-nothing."""
    ops: list[tuple[str, str, bytes]] = []
    planned: set[str] = set()
    for (group, topic, partition), offset in sorted(entries.items()):
        path = paths.offset_path(group, topic, partition)
        parents = [paths.CONSUMERS, paths.group_path(group), paths.offsets_path(group)]
        parents.append(paths.offsets_topic_path(group, topic))
        for parent in parents:
            if parent not in planned and client.exists(parent) is None:
                ops.append(("create", parent, b""))
            planned.add(parent)
        ops.append(("set" if client.exists(path) is not None else "create", path, encode_offset(offset)))
    for start in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
        tx = client.transaction()
        for kind, path, data in ops[start : start + MAX_OPS_PER_TRANSACTION]:
            if kind == "create":
                tx.create(path, data)
            else:
                tx.set_data(path, data)
        results = tx.commit()
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            raise ZkcoordError(
                f"offsets import transaction {start // MAX_OPS_PER_TRANSACTION + 1} failed and wrote nothing: "
                f"{failures[0]!r} (the tree changed while importing; run it again)"
            )
    return len(entries)


def cmd_import(args: argparse.Namespace) -> int:
    if args.input == "-":
        lines = sys.stdin.readlines()
    else:
        with open(args.input, encoding="utf-8") as f:
            lines = f.readlines()
    entries = parse_offsets_file(lines, args.format)
    with _client(args) as client:
        written = write_offsets(client, entries)
    print(f"imported {written} offsets")
    return 0


# --- delete -----------------------------------------------------------------------------------------------------


def _delete_ops(client: KazooClient, path: str) -> list[str]:
    """`path` and all descendants, children before parents."""
    try:
        children = client.get_children(path)
    except NoNodeError:
        return []
    out: list[str] = []
    for child in children:
        out.extend(_delete_ops(client, f"{path}/{child}"))
    out.append(path)
    return out


def _delete_atomically(client: KazooClient, roots: Sequence[str], guard_ids: str | None) -> bool:
    """Delete `roots` recursively in one transaction. `guard_ids`, if given, is the (empty) ids node whose
    deletion in the same transaction fails if a member registered meanwhile. Returns False in that case."""
    doomed: list[str] = []
    for root in roots:
        doomed.extend(_delete_ops(client, root))
    if guard_ids is not None and guard_ids not in doomed and client.exists(guard_ids) is not None:
        doomed.insert(0, guard_ids)
    if not doomed:
        return True
    tx = client.transaction()
    for path in doomed:
        tx.delete(path)
    results: list[Any] = tx.commit()
    failures = [r for r in results if isinstance(r, Exception)]
    if not failures:
        return True
    if any(isinstance(r, NotEmptyError) for r in failures):
        return False
    raise ZkcoordError(f"delete transaction failed and deleted nothing: {failures[0]!r}")


def _active(client: KazooClient, group: str) -> bool:
    try:
        return bool(client.get_children(paths.ids_path(group)))
    except NoNodeError:
        return False


def _group_topics(client: KazooClient, group: str) -> set[str]:
    return set(registry.children(client, paths.owners_path(group))) | set(
        registry.children(client, paths.offsets_path(group))
    )


def delete_group(client: KazooClient, group: str, topic: str | None) -> tuple[int, str]:
    """(exit code, message) with the wording of 0.10.2's `kafka-consumer-groups --zookeeper --delete`."""
    what = f"group '{group}'" if topic is None else f"group '{group}' topic '{topic}'"
    if not registry.group_exists(client, group):
        return 1, f"Error: Delete for {what} failed because group does not exist."
    if _active(client, group):
        return 1, f"Error: Delete for {what} failed because its consumers are still active."
    ids = paths.ids_path(group)
    if topic is None or _group_topics(client, group) <= {topic}:
        # (Kafka decides "only topic" from the owners children alone; counting offsets too never deletes another
        # topic's offsets.)
        ok = _delete_atomically(client, [paths.group_path(group)], None)
    else:
        ok = _delete_atomically(
            client, [paths.owners_topic_path(group, topic), paths.offsets_topic_path(group, topic)], ids
        )
    if not ok:
        return 1, f"Error: Delete for {what} failed because its consumers are still active."
    if topic is None:
        return 0, f"Deleted all consumer group information for group '{group}' in zookeeper."
    return 0, f"Deleted consumer group information for group '{group}' topic '{topic}' in zookeeper."


def cmd_delete(args: argparse.Namespace) -> int:
    if args.group is None and args.topic is None:
        print("Error: --delete needs --group, --topic, or both.", file=sys.stderr)
        return 1
    topic = (
        None
        if args.topic is None
        else paths.validate_topic(args.topic, max_length=paths.TOPIC_MAX_LENGTH_0_8_2)
    )
    with _client(args) as client:
        if args.group is not None:
            code, message = delete_group(client, paths.validate_group(args.group), topic)
            print(message)
            return code
        assert topic is not None
        for group in registry.list_groups(client):
            if topic in _group_topics(client, group) and not _active(client, group):
                delete_group(client, group, topic)
        print(
            f"Deleted consumer group information for all inactive consumer groups for topic '{topic}' in zookeeper."
        )
    return 0
