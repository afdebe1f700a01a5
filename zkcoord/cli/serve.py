"""`zkcoord serve`: run one Kafka wire-protocol node (topic logs + classic group coordinator) until SIGTERM/SIGINT.

`--bridge-zk-offsets` adds the coordinator-side offset bridge (zkcoord.server.group_service.ZkOffsetBridge):
OffsetFetch answers max(coordinator, /consumers/G/offsets) and acknowledged commits are mirrored there.
`--bridge-zk-groups REGEX` makes the matching groups mixed groups (zkcoord.bridge.membership.MixedGroupBridge):
legacy ZooKeeper members and broker-protocol members in one group, migrated member by member.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import signal
from pathlib import Path

from zkcoord.bridge.membership import MixedGroupBridge
from zkcoord.bridge.mirror import ZkOffsetBridge
from zkcoord.bridge.zk_store import ZkOffsetBridgeStore
from zkcoord.errors import ConfigError
from zkcoord.group.config import GroupConfig
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig

# (flag, GroupConfig field) pairs: flags carry Kafka's broker property names.
_GROUP_FLAGS = (
    ("group.min.session.timeout.ms", "group_min_session_timeout_ms"),
    ("group.max.session.timeout.ms", "group_max_session_timeout_ms"),
    ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms"),
    ("group.max.size", "group_max_size"),
    ("offsets.topic.num.partitions", "offsets_topic_num_partitions"),
    ("offset.metadata.max.bytes", "offset_metadata_max_bytes"),
    ("offsets.retention.minutes", "offsets_retention_minutes"),
)
# (flag, ClusterConfig field) pairs for --zk mode; offsets.compact.after.batches is zkcoord's own.
_CLUSTER_FLAGS = (
    ("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms"),
    ("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms"),
    ("offsets.compact.after.batches", "offsets_compact_after_batches"),
)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "serve", help="run a Kafka wire-protocol node: topics, produce/fetch, group coordinator"
    )
    parser.add_argument(
        "--listen", type=_listen, default=("127.0.0.1", 9092), help="HOST:PORT (port 0 = any free)"
    )
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="directory for partition logs and group records"
    )
    parser.add_argument(
        "--zk",
        default=None,
        help="ZooKeeper connect string: join that cluster as broker N (controller election, offsets partitions)",
    )
    parser.add_argument("--node-id", type=int, default=0, help="broker id (default 0)")
    parser.add_argument(
        "--advertise",
        type=_listen,
        default=None,
        help="HOST:PORT clients are told to connect to (advertised.listeners; default: the --listen address)",
    )
    parser.add_argument("--num.partitions", dest="num_partitions", type=int, default=1)
    parser.add_argument(
        "--auto.create.topics.enable", dest="auto_create", choices=("true", "false"), default="true"
    )
    parser.add_argument(
        "--socket.request.max.bytes", dest="max_request_bytes", type=int, default=100 * 1024 * 1024
    )
    for flag, dest in _GROUP_FLAGS:
        parser.add_argument(f"--{flag}", dest=dest, type=int, default=None)
    for flag, dest in _CLUSTER_FLAGS:
        parser.add_argument(f"--{flag}", dest=dest, type=int, default=None, help="with --zk only")
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
        help="how long a commit response waits for its offsets to land in ZooKeeper (0: never; default 1000)",
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    host, port = args.listen
    try:
        server = ServerConfig(
            host=host,
            port=port,
            node_id=args.node_id,
            data_dir=args.data_dir,
            num_partitions=args.num_partitions,
            auto_create_topics_enable=args.auto_create == "true",
            socket_request_max_bytes=args.max_request_bytes,
        )
        overrides = {
            dest: getattr(args, dest) for _flag, dest in _GROUP_FLAGS if getattr(args, dest) is not None
        }
        group = GroupConfig(**overrides)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    cluster = {dest: getattr(args, dest) for _flag, dest in _CLUSTER_FLAGS if getattr(args, dest) is not None}
    if cluster and not args.zk:
        flags = ", ".join(f"--{f}" for f, d in _CLUSTER_FLAGS if d in cluster)
        raise ConfigError(f"{flags} only apply with --zk (a ZooKeeper-era cluster node)")
    if args.zk:  # validate the cluster settings before anything starts
        from zkcoord.cluster.node import ClusterConfig

        ClusterConfig(zookeeper_connect=args.zk, node_id=args.node_id, host=host, port=port or 1, **cluster)
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
    return asyncio.run(
        _serve(
            Node(server, group, args.zk, args.advertise, cluster),
            bridge_connect,
            args.bridge_wait_ms,
            (groups_connect, args.bridge_groups) if groups_connect else None,
        )
    )


async def _serve(
    node: Node,
    bridge_connect: str | None = None,
    bridge_wait_ms: int = 1000,
    mixed: tuple[str, str] | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    zk_side = bridge = None
    if bridge_connect:
        zk_side = ZkOffsetBridgeStore(bridge_connect)
        await asyncio.to_thread(zk_side.start)
        bridge = ZkOffsetBridge(zk_side, ack_wait_ms=bridge_wait_ms)
        await bridge.start()
        # Given to the node before it starts, so no service (and no commit) ever runs without it.
        node = dataclasses.replace(node, offset_mirror=bridge)
        print(f"zkcoord serve: bridging group offsets to ZooKeeper {bridge_connect}", flush=True)
    members = None
    if mixed is not None:
        members = MixedGroupBridge(mixed[0], mixed[1], holder=f"node-{node.server_config.node_id}")
        await members.start()
        node = dataclasses.replace(node, membership_bridge=members)
        print(
            f"zkcoord serve: mixed groups matching {mixed[1]!r} bridged through ZooKeeper {mixed[0]}",
            flush=True,
        )
    try:
        await node.start()
        cfg = node.server_config
        print(f"zkcoord serve: listening on {cfg.host}:{cfg.port} node {cfg.node_id}", flush=True)
        try:
            await stop.wait()
        finally:
            await node.close()
    finally:
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
