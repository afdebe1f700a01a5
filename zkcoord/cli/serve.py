"""`zkcoord serve`: run one Kafka wire-protocol node (topic logs + classic group coordinator) until SIGTERM/SIGINT.

`--bridge-zk-offsets` adds the coordinator-side offset bridge (zkcoord.bridge.mirror.ZkOffsetBridge):
OffsetFetch answers max(coordinator, /consumers/G/offsets) and acknowledged commits are mirrored there.
`--bridge-zk-groups REGEX` makes the matching groups mixed groups (zkcoord.bridge.membership.MixedGroupBridge):
legacy ZooKeeper members and broker-protocol members in one group, migrated member by member.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import re
import signal
from pathlib import Path
from typing import Any

from zkcoord.bridge.membership import MixedGroupBridge
from zkcoord.bridge.mirror import ZkOffsetBridge
from zkcoord.bridge.zk_store import ZkOffsetBridgeStore
from zkcoord.cli.listeners import add_listener_options, listener_setup
from zkcoord.cli.options import add_config_option, examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.cluster.node import ClusterConfig, check_no_foreign_cluster
from zkcoord.errors import ConfigError
from zkcoord.group.config import MIGRATION_POLICIES, GroupConfig
from zkcoord.metrics import ServeMetrics
from zkcoord.records.batch import AppendRules
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig
from zkcoord.server.limits import ConnectionLimits, LogLimits
from zkcoord.server.log import INT64_MAX
from zkcoord.storage import FileRecordStore

# (flag, limits class, field, help) for the node's resource limits (docs/operations.md); Kafka's names where Kafka
# has the limit, defaults from the classes.
_LIMIT_FLAGS: tuple[tuple[str, type[Any], str, str], ...] = (
    ("max.connections", ConnectionLimits, "max_connections", "connections beyond it are closed on accept"),
    ("max.connections.per.ip", ConnectionLimits, "max_connections_per_ip", "the same, per client address"),
    ("connections.max.idle.ms", ConnectionLimits, "connections_max_idle_ms", "close a silent connection"),
    (
        "request.read.timeout.ms",
        ConnectionLimits,
        "request_read_timeout_ms",
        "close a connection whose frame is not complete this long after its size arrived",
    ),
    (
        "queued.max.request.bytes",
        ConnectionLimits,
        "queued_max_request_bytes",
        "request bytes being read, all connections together; readers wait for room",
    ),
    (
        "max.in.flight.per.connection",
        ConnectionLimits,
        "max_in_flight_per_connection",
        "requests of one connection queued or being answered; its reading pauses at the bound",
    ),
    (
        "sasl.server.max.receive.size",
        ConnectionLimits,
        "sasl_server_max_receive_size",
        "on SASL listeners, largest frame before the login completes; a larger size prefix closes the connection",
    ),
    ("max.partitions.per.topic", LogLimits, "max_partitions_per_topic", "INVALID_PARTITIONS beyond it"),
    (
        "max.broker.partitions",
        LogLimits,
        "max_broker_partitions",
        "partitions on this node; INVALID_PARTITIONS",
    ),
    ("log.max.open.files", LogLimits, "log_max_open_files", "segment files open at once (LRU closed beyond)"),
    ("message.max.bytes", AppendRules, "message_max_bytes", "largest produced batch; MESSAGE_TOO_LARGE"),
    (
        "log.message.timestamp.after.max.ms",
        AppendRules,
        "timestamp_after_max_ms",
        "a record's CreateTime may be this far ahead of the node's clock; INVALID_TIMESTAMP",
    ),
    (
        "log.message.timestamp.before.max.ms",
        AppendRules,
        "timestamp_before_max_ms",
        "and this far behind it",
    ),
)

# (flag, GroupConfig field) pairs: flags carry Kafka's broker property names.
_GROUP_FLAGS = (
    ("group.min.session.timeout.ms", "group_min_session_timeout_ms"),
    ("group.max.session.timeout.ms", "group_max_session_timeout_ms"),
    ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms"),
    ("group.max.size", "group_max_size"),
    ("offsets.topic.num.partitions", "offsets_topic_num_partitions"),
    ("offset.metadata.max.bytes", "offset_metadata_max_bytes"),
    ("offsets.retention.minutes", "offsets_retention_minutes"),
    ("offsets.commit.timeout.ms", "offsets_commit_timeout_ms"),
    ("group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms"),
    ("group.consumer.heartbeat.interval.ms", "group_consumer_heartbeat_interval_ms"),
    ("group.consumer.max.size", "group_consumer_max_size"),
    ("group.consumer.regex.refresh.interval.ms", "group_consumer_regex_refresh_interval_ms"),
)
# (flag, ClusterConfig field) pairs for --zk mode; offsets.compact.after.batches is zkcoord's own.
_CLUSTER_FLAGS = (
    ("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms"),
    ("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms"),
    ("offsets.compact.after.batches", "offsets_compact_after_batches"),
)


# Help for each: what it bounds, its unit (GroupConfig's default, which these flags override, is added).
_GROUP_HELP = {
    "group_min_session_timeout_ms": "smallest session.timeout.ms a member may ask for, in ms",
    "group_max_session_timeout_ms": "largest session.timeout.ms a member may ask for, in ms",
    "group_initial_rebalance_delay_ms": "how long a new group waits for more members before its first "
    "rebalance, in ms",
    "group_max_size": "most members one group may have; a JoinGroup beyond it gets GROUP_MAX_SIZE_REACHED",
    "offsets_topic_num_partitions": "partitions of __consumer_offsets (groups are spread over them)",
    "offset_metadata_max_bytes": "largest metadata string an offset commit may carry, in bytes",
    "offsets_retention_minutes": "how long offsets of an empty group are kept, in minutes",
    "offsets_commit_timeout_ms": "how long an OffsetCommit waits for its records to be stored (ZooKeeper with "
    "--zk, the group-records file without) before it is answered REQUEST_TIMED_OUT, in ms",
    "group_consumer_session_timeout_ms": "consumer-protocol (KIP-848) members: how long the coordinator waits "
    "for a heartbeat before it fences the member, in ms",
    "group_consumer_heartbeat_interval_ms": "consumer-protocol members: the heartbeat interval the coordinator "
    "tells them, in ms",
    "group_consumer_max_size": "most members one consumer-protocol group may have (GROUP_MAX_SIZE_REACHED beyond)",
    "group_consumer_regex_refresh_interval_ms": "consumer-protocol groups: how often subscribed regular expressions "
    "are resolved again against the topics (on a heartbeat, once this long has passed; zkcoord's own), in ms",
}


def _limits(args: argparse.Namespace, cls: type[Any]) -> Any:
    """The `cls` limits with the flags given on the command line (validated by the class)."""
    given = {
        name: getattr(args, f"limit_{name}")
        for _flag, owner, name, _text in _LIMIT_FLAGS
        if owner is cls and getattr(args, f"limit_{name}") is not None
    }
    return dataclasses.replace(cls(), **given)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "serve",
        help="run a Kafka wire-protocol node: topics, produce/fetch, group coordinator",
        description=__doc__,
        epilog=examples(
            "zkcoord serve --data-dir /var/lib/zkcoord --listen 0.0.0.0:9092 --metrics-listen 0.0.0.0:9404",
            "zkcoord serve --config node.properties   # data-dir=..., zk=..., group.max.size=100 ...",
        ),
    )
    add_config_option(parser)
    parser.add_argument(
        "--listen",
        type=_listen,
        default=None,
        metavar="HOST:PORT",
        help="address to accept Kafka clients on without security, PLAINTEXT://HOST:PORT (port 0 = any free; "
        "default 127.0.0.1:9092 unless --listeners is given)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory for partition logs and group records",
    )
    parser.add_argument(
        "--zk",
        default=None,
        metavar="CONNECT",
        help="ZooKeeper connect string: join that cluster of zkcoord nodes as broker N (controller election, "
        "offsets partitions); refused, writing nothing, where brokers zkcoord did not start are registered or "
        "hold /controller: put `zkcoord proxy` in front of such a cluster (default: none, a standalone node)",
    )
    parser.add_argument("--node-id", type=int, default=0, help="broker id (default 0)")
    add_zk_security(parser)
    parser.add_argument(
        "--advertise",
        type=_listen,
        default=None,
        help="HOST:PORT clients are told to connect to (advertised.listeners; default: the --listen address)",
    )
    parser.add_argument(
        "--num.partitions",
        dest="num_partitions",
        type=int,
        default=1,
        metavar="N",
        help="partitions of an auto-created topic",
    )
    parser.add_argument(
        "--auto.create.topics.enable",
        dest="auto_create",
        choices=("true", "false"),
        default="true",
        help="create a topic when a client first asks for it",
    )
    parser.add_argument(
        "--delete.topic.enable",
        dest="delete_topic",
        choices=("true", "false"),
        default="true",
        help="serve DeleteTopics (false: refused with TOPIC_DELETION_DISABLED, as Kafka) (default: true)",
    )
    for flag, dest, metavar, text in _LOG_FLAGS:
        default = ServerConfig.__dataclass_fields__[dest].default
        shown = "none: the OS decides" if default == INT64_MAX else default
        parser.add_argument(
            f"--{flag}", dest=dest, type=int, default=None, metavar=metavar, help=f"{text} (default: {shown})"
        )
    parser.add_argument(
        "--socket.request.max.bytes",
        dest="max_request_bytes",
        type=int,
        default=100 * 1024 * 1024,
        metavar="BYTES",
        help="largest request frame accepted, in bytes; a larger size header closes the connection",
    )
    parser.add_argument(
        "--group.records.fsync",
        dest="records_fsync",
        choices=("always", "interval", "never"),
        default=None,
        help="without --zk: when the group-records log (commits, group metadata) is fsync'd: always (before any "
        "answer: an acknowledged commit survives a machine crash), interval (with the first batch after each "
        "--group.records.fsync.interval.ms), never (the OS decides); with either, a machine crash may lose the "
        "commits acknowledged since the last fsync, a process crash loses none (default: always)",
    )
    parser.add_argument(
        "--group.records.fsync.interval.ms",
        dest="records_fsync_interval_ms",
        type=int,
        default=None,
        metavar="MS",
        help="without --zk, with --group.records.fsync interval: fsync with the first batch this long after the "
        "last (default 1000)",
    )
    parser.add_argument(
        "--group.records.compact.min.bytes",
        dest="records_compact_min_bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="without --zk: compact the group-records log in the background (last record per key) once this many "
        "bytes were written since the last compaction and they are at least half the log; 0 never compacts "
        "(default 4194304; e.g. --group.records.compact.min.bytes=1048576)",
    )
    parser.add_argument(
        "--log.cleaner.delete.retention.ms",
        dest="records_delete_retention_ms",
        type=int,
        default=None,
        metavar="MS",
        help="without --zk: how long compaction keeps a tombstone (a deleted offset or group) of the "
        "group-records log after it first saw it, as Kafka's cleaner keeps them in __consumer_offsets "
        "(default 86400000, one day)",
    )
    for flag, cls, name, text in _LIMIT_FLAGS:
        default = cls.__dataclass_fields__[name].default
        parser.add_argument(
            f"--{flag}",
            dest=f"limit_{name}",
            type=int,
            default=None,
            metavar="N",
            help=f"{text} (default {default})",
        )
    group_defaults = GroupConfig()
    for flag, dest in _GROUP_FLAGS:
        parser.add_argument(
            f"--{flag}",
            dest=dest,
            type=int,
            default=None,
            metavar="N",
            help=f"{_GROUP_HELP[dest]} (default: {getattr(group_defaults, dest)})",
        )
    parser.add_argument(
        "--group.consumer.assignors",
        dest="group_consumer_assignors",
        default=None,
        metavar="A,B",
        help="consumer-protocol server-side assignors, comma-separated; the first is the default, a member may ask "
        "for another with group.remote.assignor (default: "
        f"{','.join(group_defaults.group_consumer_assignors)}; e.g. --group.consumer.assignors=range,uniform)",
    )
    parser.add_argument(
        "--group.consumer.migration.policy",
        dest="group_consumer_migration_policy",
        default=None,
        choices=MIGRATION_POLICIES,
        help="online migration between the classic and the consumer protocol (KIP-848): upgrade converts a "
        "classic group to a consumer group on its first consumer-protocol member, downgrade converts it back when "
        "its last consumer-protocol member leaves, bidirectional does both, disabled neither (default: "
        f"{group_defaults.group_consumer_migration_policy}; e.g. --group.consumer.migration.policy=upgrade)",
    )
    from zkcoord.cluster.node import ClusterConfig

    cluster_fields = ClusterConfig.__dataclass_fields__
    cluster_help = {
        "zookeeper_session_timeout_ms": "the node's ZooKeeper session timeout, in ms",
        "zookeeper_connection_timeout_ms": "how long to wait for ZooKeeper at start, in ms",
        "offsets_compact_after_batches": "compact an offsets partition's records after N batch znodes",
    }
    for flag, dest in _CLUSTER_FLAGS:
        parser.add_argument(
            f"--{flag}",
            dest=dest,
            type=int,
            default=None,
            metavar="N",
            help=f"with --zk only: {cluster_help[dest]} (default: {cluster_fields[dest].default})",
        )
    parser.add_argument(
        "--bridge-zk-offsets",
        nargs="?",
        const="",
        default=None,
        metavar="CONNECT",
        help="offset bridge for migrations: OffsetFetch returns max(coordinator, /consumers/G/offsets/T/P) and "
        "every acknowledged commit of a group member is mirrored there, never moving a znode backwards; "
        "CONNECT defaults to --zk (give one to bridge a node that runs without --zk)",
    )
    parser.add_argument(
        "--bridge-zk-offsets-wait-ms",
        dest="bridge_wait_ms",
        type=int,
        default=1000,
        metavar="MS",
        help="how long a commit response waits for its offsets to land in ZooKeeper, in ms "
        "(0: never; default 1000)",
    )
    parser.add_argument(
        "--metrics-listen",
        type=_listen,
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0 = any free; default: off)",
    )
    parser.add_argument(
        "--bridge-zk-groups",
        dest="bridge_groups",
        default=None,
        metavar="REGEX",
        help="mixed groups for member-by-member migration: the groups whose id fully matches REGEX hold legacy "
        "ZooKeeper members and broker-protocol members as one group (the legacy assignor over both; owner "
        "znodes held for the broker-protocol members). Uses --zk (or the --bridge-zk-offsets CONNECT)",
    )
    add_listener_options(parser)
    parser.set_defaults(func=run)


# Partition log settings, Kafka's broker-level names; each topic may override them at CreateTopics under the
# topic-level name (retention.ms, retention.bytes, segment.bytes, flush.messages, flush.ms).
_LOG_FLAGS = (
    ("log.retention.ms", "log_retention_ms", "MS",
     "delete a partition's oldest whole segments once their newest record is this old, in ms (-1: never); "
     "the active segment is never deleted"),
    ("log.retention.bytes", "log_retention_bytes", "BYTES",
     "delete a partition's oldest whole segments while the rest still holds this many bytes (-1: no limit)"),
    ("log.segment.bytes", "log_segment_bytes", "BYTES", "roll a partition's segment file at this size"),
    ("log.retention.check.interval.ms", "log_retention_check_interval_ms", "MS",
     "how often retention runs, in ms"),
    ("log.flush.interval.messages", "log_flush_interval_messages", "N",
     "fsync a partition after this many records"),
    ("log.flush.interval.ms", "log_flush_interval_ms", "MS",
     "fsync a partition's data once it is this old, in ms (looked at each second)"),
)  # fmt: skip


def _records_fsync(args: argparse.Namespace) -> dict[str, Any]:
    """The group-records settings given (fsync, compaction), refused where they mean nothing: a cluster node
    (--zk) keeps its group records in ZooKeeper, and an interval only paces the "interval" policy."""
    given: dict[str, Any] = {}
    if args.records_compact_min_bytes is not None:
        given["group_records_compact_min_bytes"] = args.records_compact_min_bytes
    if args.records_delete_retention_ms is not None:
        given["group_records_delete_retention_ms"] = args.records_delete_retention_ms
    if args.records_fsync is not None:
        given["group_records_fsync"] = args.records_fsync
    if args.records_fsync_interval_ms is not None:
        if args.records_fsync != "interval":
            raise ConfigError("--group.records.fsync.interval.ms needs --group.records.fsync interval")
        given["group_records_fsync_interval_ms"] = args.records_fsync_interval_ms
    if given and args.zk:
        raise ConfigError(
            "--group.records.* and --log.cleaner.delete.retention.ms: each applies to a standalone node: with "
            "--zk, group records are written to ZooKeeper before any answer (and compacted there)"
        )
    return given


def run(args: argparse.Namespace) -> int:
    auth = zk_auth(args)
    listeners = listener_setup(args, auth)
    host, port = listeners.host, listeners.port
    try:
        server = ServerConfig(
            host=host,
            port=port,
            node_id=args.node_id,
            data_dir=args.data_dir,
            num_partitions=args.num_partitions,
            auto_create_topics_enable=args.auto_create == "true",
            delete_topic_enable=args.delete_topic == "true",
            **{
                dest: getattr(args, dest)
                for _f, dest, _m, _t in _LOG_FLAGS
                if getattr(args, dest) is not None
            },
            socket_request_max_bytes=args.max_request_bytes,
            connection_limits=_limits(args, ConnectionLimits),
            log_limits=_limits(args, LogLimits),
            append_rules=_limits(args, AppendRules),
            **_records_fsync(args),
        )
        overrides = {
            dest: getattr(args, dest) for _flag, dest in _GROUP_FLAGS if getattr(args, dest) is not None
        }
        if args.group_consumer_assignors is not None:
            overrides["group_consumer_assignors"] = tuple(
                a.strip() for a in args.group_consumer_assignors.split(",") if a.strip()
            )
        if args.group_consumer_migration_policy is not None:
            overrides["group_consumer_migration_policy"] = args.group_consumer_migration_policy
        group = GroupConfig(**overrides)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    cluster = {dest: getattr(args, dest) for _flag, dest in _CLUSTER_FLAGS if getattr(args, dest) is not None}
    if cluster and not args.zk:
        flags = ", ".join(f"--{f}" for f, d in _CLUSTER_FLAGS if d in cluster)
        raise ConfigError(f"{flags} only apply with --zk (a ZooKeeper-era cluster node)")
    if args.zk and listeners.more:
        raise ConfigError("a cluster node (--zk) has one listener: give --listen or one --listeners entry")
    if args.zk:  # validate the cluster settings before anything starts
        ClusterConfig(
            zookeeper_connect=args.zk, node_id=args.node_id, host=host, port=port or 1, zookeeper_auth=auth,
            **cluster,
        )  # fmt: skip
    bridge_connect = None
    if args.bridge_zk_offsets is not None:
        bridge_connect = args.bridge_zk_offsets or args.zk
        if not bridge_connect:
            raise ConfigError("--bridge-zk-offsets needs a ZooKeeper connect string: give one, or use --zk")
        if args.bridge_wait_ms < 0:
            raise ConfigError(f"--bridge-zk-offsets-wait-ms must be >= 0, got {args.bridge_wait_ms}")
    groups_connect = None
    if args.bridge_groups is not None:
        try:
            re.compile(args.bridge_groups)
        except re.error as exc:
            raise ConfigError(f"--bridge-zk-groups: not a regular expression: {exc}") from exc
        groups_connect = args.zk or bridge_connect
        if not groups_connect:
            raise ConfigError("--bridge-zk-groups needs ZooKeeper: use --zk (or --bridge-zk-offsets CONNECT)")
    metrics = ServeMetrics() if args.metrics_listen is not None else None
    node = Node(
        server, group, args.zk, args.advertise, cluster, metrics=metrics, zk_auth=auth,
        security=listeners.security, more_listeners=listeners.more, authorizer=listeners.authorizer,
    )  # fmt: skip
    try:
        mixed = (groups_connect, args.bridge_groups) if groups_connect else None
        return asyncio.run(_serve(node, bridge_connect, args.bridge_wait_ms, mixed, args.metrics_listen))
    finally:
        listeners.close()


# The cyclic GC's gen0 threshold, for the serving process: a 100-partition commit allocates a few hundred container
# objects (request values, records, coroutines, futures) that die by reference counting, and with Python's default
# (700) the collector ran every few commits and re-scanned what queued commits still held. Measured on the commit
# load of benchmarks.bench_peer (gc.callbacks timing): 3.4 s of the server's 10.8 CPU-seconds in 6,367 collections
# (48 full) with the defaults, 0.06 s in 131 after this (issue 17).
GC_GEN0_THRESHOLD = 100_000


def _tune_gc() -> None:
    """Before the node starts: gen0 collections become rare, for the load of the group records too (1M offset
    records ran 2,970 collections, 11 of them full, at the default threshold: 2.13 s of CPU to load them; 20 and
    1.58 s with this).
    The process's own policy, so it lives here, not in the library that tests embed."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def _freeze_gc() -> None:
    """Once the node is up: what start-up built (modules, codecs, loaded state) moves out of the collector's sight."""
    gc.freeze()


async def _serve(
    node: Node,
    bridge_connect: str | None = None,
    bridge_wait_ms: int = 1000,
    mixed: tuple[str, str] | None = None,
    metrics_listen: tuple[str, int] | None = None,
) -> int:
    if node.zk_connect:
        # Before any bridge or listener starts: beside brokers zkcoord did not start, plain cluster mode would
        # join their registry and controller election; refused, nothing written (`zkcoord proxy` is the way).
        cfg = node.server_config
        overrides: dict[str, Any] = dict(node.cluster_overrides)
        await asyncio.to_thread(check_no_foreign_cluster, ClusterConfig(
            zookeeper_connect=node.zk_connect, node_id=cfg.node_id, host=cfg.host, port=cfg.port or 1,
            zookeeper_auth=node.zk_auth, **overrides,
        ))  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    zk_side = bridge = None
    if bridge_connect:
        zk_side = ZkOffsetBridgeStore(bridge_connect, auth=node.zk_auth)  # the node's ZooKeeper identity
        await asyncio.to_thread(zk_side.start)
        bridge = ZkOffsetBridge(zk_side, ack_wait_ms=bridge_wait_ms)
        await bridge.start()
        # Given to the node before it starts, so no service (and no commit) ever runs without it.
        node = dataclasses.replace(node, offset_mirror=bridge)
        print(f"zkcoord serve: bridging group offsets to ZooKeeper {bridge_connect}", flush=True)
    members = None
    if mixed is not None:
        members = MixedGroupBridge(
            mixed[0], mixed[1], holder=f"node-{node.server_config.node_id}", auth=node.zk_auth
        )
        await members.start()
        node = dataclasses.replace(node, membership_bridge=members)
        print(
            f"zkcoord serve: mixed groups matching {mixed[1]!r} bridged through ZooKeeper {mixed[0]}",
            flush=True,
        )
    endpoint = None
    if node.metrics is not None and metrics_listen is not None:
        node.metrics.bind(node, bridge)
        endpoint = node.metrics.serve(*metrics_listen)
        print(f"zkcoord serve: metrics on http://{endpoint.host}:{endpoint.port}/metrics", flush=True)
    try:
        _tune_gc()
        await node.start()
        cfg = node.server_config
        _freeze_gc()
        store = node.groups.store if node.groups is not None else None
        if isinstance(store, FileRecordStore):  # how durable an acknowledged commit is (benchmarks report it)
            print(f"zkcoord serve: group records in {store.directory} (fsync={store.fsync})", flush=True)
        print(f"zkcoord serve: listening on {cfg.host}:{cfg.port} node {cfg.node_id}", flush=True)
        for wire in node.more_wires:
            print(f"zkcoord serve: also listening on {wire.host}:{wire.port}", flush=True)
        try:
            await stop.wait()
        finally:
            await node.close()
    finally:
        if endpoint is not None:
            endpoint.stop()
        if members is not None:
            await members.close()
        if bridge is not None and zk_side is not None:
            await bridge.close()
            await asyncio.to_thread(zk_side.close)
            st = bridge.stats
            print(
                f"zkcoord serve: offset bridge mirrored={st.mirrored} kept_higher={st.kept_higher} "
                f"mirror_failures={st.mirror_failures} fetch_failures={st.fetch_failures} unmirrored={st.pending}",
                flush=True,
            )
    print("zkcoord serve: stopped", flush=True)
    return 0
