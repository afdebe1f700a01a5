"""`zkcoord legacy`: the ZooKeeper-era group tools (list, describe, export, import, delete) with the output
formats of Kafka's own tools, plus `consume` (registered from zkcoord.cli.legacy_consume).

Every command takes `--zk CONNECT` (a chroot is allowed: `host:2181/kafka`). Reads parse every znode and stop
with an error naming the first malformed one; `import` validates the whole input before writing anything;
`delete` removes a group in one ZooKeeper transaction that fails if a member registers meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from zkcoord.cli import legacy_consume
from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.filters import TopicFilter
from zkcoord.legacy.ids import consumer_of_thread, java_sorted
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import group_admin, registry
from zkcoord.zk.session import Client, connect

log = logging.getLogger(__name__)

ZOOKEEPER_NOTE = (
    "Note: This will only show information about consumers that use ZooKeeper "
    "(not those using the Java consumer API)."
)
ROW_FORMAT = "%-30s %-10s %-15s %-15s %-10s %-50s"


class OffsetsFileError(ZkcoordError):
    """A line of an offsets file is malformed (`<input>: line N: why`); nothing has been written."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "legacy",
        help="ZooKeeper-era consumer groups: list, describe, export, import, delete, consume",
        epilog=examples(
            "zkcoord legacy list --zk 127.0.0.1:2181",
            "zkcoord legacy describe --zk 127.0.0.1:2181 --group orders --bootstrap 127.0.0.1:9092",
            "zkcoord legacy consume --zk 127.0.0.1:2181 --group orders --topic t   # says its consumer id",
        ),
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
        add_zk_security(p)
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
        "zkcoord legacy describe --zk 127.0.0.1:2181 --group orders --bootstrap 127.0.0.1:9092 --json",
        "zkcoord legacy describe --zk 127.0.0.1:2181 --group orders --bootstrap 127.0.0.1:9092 --watch 5",
    )
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to describe")
    p.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="also read the group's committed offsets from its coordinator (OffsetFetch), beside ZooKeeper's "
        "(default: ZooKeeper only, as Kafka's tool)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON document per group view: every partition with both stores' offsets, the log end offset, "
        "lag and owner (schema: zkcoord/cli/describe_json.py)",
    )
    p.add_argument(
        "--metrics-listen",
        type=legacy_consume._listen,
        default=None,
        metavar="HOST:PORT",
        help="with --watch: serve the view as Prometheus gauges at http://HOST:PORT/metrics "
        "(zkcoord_group_committed_offset, _log_end_offset, _lag; default: off)",
    )
    p.add_argument(
        "--watch",
        type=float,
        default=None,
        metavar="S",
        help="print the view again every S seconds until interrupted (--json: one document per line; "
        "default: once)",
    )
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
        type=_format_name,
        choices=("zk", "jsonl"),
        default="zk",
        help="zk: ExportZkOffsets lines (/consumers/G/offsets/T/P:offset); jsonl: a JSON object per line "
        "(the names `migrate export` uses too)",
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
        type=_format_name,
        choices=("zk", "jsonl"),
        default="zk",
        help="zk: ImportZkOffsets lines (/consumers/G/offsets/T/P:offset); jsonl: a JSON object per line "
        "(the names `migrate import` uses too)",
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


def _format_name(value: str) -> str:
    """One name per offsets file format across commands: `zk`; `kafka`, this command's earlier name for the same
    ExportZkOffsets lines, is still accepted so existing scripts keep working."""
    return "zk" if value == "kafka" else value


@contextlib.contextmanager
def _client(args: argparse.Namespace) -> Iterator[Client]:
    client = connect(args.zk, timeout=args.zk_timeout, auth=zk_auth(args))
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

EndOffsets = Callable[[Client, Sequence[TopicPartition], int], dict[TopicPartition, int]]


def log_end_offsets(
    client: Client, tps: Sequence[TopicPartition], timeout_ms: int
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
    client: Client, group: str, *, end_offsets: EndOffsets, timeout_ms: int, out: TextIO
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
    names = member_names(client, group)
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
                tp[0],
                tp[1],
                offset,
                ends.get(tp),
                None if owner is None else names.get(consumer_of_thread(owner), consumer_of_thread(owner)),
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
        rows.extend(DescribeRow(t, None, None, None, names.get(cid, cid)) for t in topics)
    return rows


def member_names(client: Client, group: str) -> dict[str, str]:
    """Consumer id -> how a person knows the member: a broker-protocol member registered by a bridged coordinator
    (its registration carries a "zkcoord" key) as `client id (consumer id)`; legacy members are left out (their
    consumer id is their name)."""
    from zkcoord.bridge.mixed_policy import classic_marker
    from zkcoord.zk import mixed_group

    out = {}
    for cid, data in mixed_group.read_ids(client, group).items():
        client_id = (classic_marker(data) or {}).get("client_id")
        if client_id:
            out[cid] = f"{client_id} ({cid})"
    return out


def cmd_describe(args: argparse.Namespace) -> int:
    group = paths.validate_group(args.group)
    if args.json or args.bootstrap or args.watch is not None or args.metrics_listen is not None:
        from zkcoord.cli import describe_json

        return describe_json.run(args, group, connect=_client, end_offsets=log_end_offsets)
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


# --- export and import (migration.offsets_io, in the dialect of Kafka's ExportZkOffsets/ImportZkOffsets) ---------

_FORMATS = {"zk": "zk", "jsonl": "jsonl"}  # the same names as migrate export/import and offsets_io


def cmd_export(args: argparse.Namespace) -> int:
    from migration.offsets_io import format_lines, zookeeper_records

    groups = [paths.validate_group(g) for g in args.group] or None
    with _client(args) as client:
        records = zookeeper_records(client, groups, skip_malformed=False)
    text = "".join(format_lines(records, _FORMATS[args.format]))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"exported {len(records)} offsets to {args.output}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from migration.offsets_io import Dialect, OffsetFileError, ZooKeeperTarget, import_offsets, parse_offsets

    source = "stdin" if args.input == "-" else args.input
    try:
        if args.input == "-":
            records = parse_offsets(sys.stdin, source, _FORMATS[args.format], Dialect.KAFKA)
        else:
            with open(args.input, encoding="utf-8", newline="") as f:
                records = parse_offsets(f, source, _FORMATS[args.format], Dialect.KAFKA)
    except OffsetFileError as exc:
        raise OffsetsFileError(f"{exc.source}: line {exc.line}: {exc.reason}") from None
    with _client(args) as client:
        report = import_offsets(records, ZooKeeperTarget(client))
    print(f"imported {report.total} offsets")
    return 0


# --- delete -----------------------------------------------------------------------------------------------------


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
            code, message = group_admin.delete_group(client, paths.validate_group(args.group), topic)
            print(message)
            return code
        assert topic is not None
        for group in registry.list_groups(client):
            if topic in group_admin.group_topics(client, group) and not group_admin.active(client, group):
                group_admin.delete_group(client, group, topic)
        print(
            f"Deleted consumer group information for all inactive consumer groups for topic '{topic}' in zookeeper."
        )
    return 0
