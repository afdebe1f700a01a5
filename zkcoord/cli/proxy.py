"""`zkcoord proxy`: run a Kafka proxy in front of the brokers registered in a ZooKeeper (a cluster zkcoord did
not start) until SIGTERM/SIGINT: a port per broker, frames forwarded undecoded, broker addresses rewritten to the
proxy's ports, and the groups matching `--bridge-zk-groups` coordinated by zkcoord itself (docs/proxy.md). Its
ports take `serve`'s listener security flags (one listener: its protocol on the bootstrap and every broker port);
the brokers are reached with the client security of `--command-config` (docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
from pathlib import Path

from zkcoord.cli.client_security import add_command_config
from zkcoord.cli.listeners import ListenerSetup, add_listener_options, listener_setup
from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ConfigError
from zkcoord.group.config import GroupConfig
from zkcoord.proxy.node import ProxyConfig, ProxyNode
from zkcoord.proxy.ports import PortMap
from zkcoord.proxy.upstream import UpstreamSecurity, upstream_security


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def _pin(value: str) -> tuple[int, int]:
    node, sep, port = value.partition("=")
    if not sep or not node.isdigit() or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--broker-port wants ID=PORT, got {value!r}")
    return int(node), int(port)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "proxy",
        help="a Kafka proxy in front of the brokers registered in ZooKeeper; coordinates the migrating groups",
        description=__doc__,
        epilog=examples(
            "zkcoord proxy --zk zk1:2181 --listen 0.0.0.0:9192 --node-id 9000 --data-dir /var/lib/zkcoord-proxy"
            "   # brokers 0,1,2 on 9193,9194,9195",
            "zkcoord proxy --zk zk1:2181 --listen 0.0.0.0:9192 --node-id 9000 --data-dir D --lowest-broker-id 1001"
            " --bridge-zk-groups 'orders-.*' --bridge-zk-offsets   # migrate the orders-* groups member by member",
            "zkcoord proxy --zk zk1:2181 --listen 0.0.0.0:9192 --node-id 9000 --data-dir D --bridge-zk-groups 'orders-.*'"
            " --group.consumer.heartbeat.interval.ms 1000   # their group.protocol=consumer members heartbeat every 1 s",
            "zkcoord proxy --zk zk1:2181 --listeners SASL_SSL://0.0.0.0:9192 --ssl.keystore.location proxy.pem"
            " --node-id 9000 --data-dir D --command-config brokers.properties"
            "   # SCRAM logins from /config/users; the brokers reached as brokers.properties says",
        ),
    )
    parser.add_argument("--zk", required=True, metavar="CONNECT",
                        help="ZooKeeper connect string of the cluster (brokers are read from /brokers/ids, watched)")  # fmt: skip
    parser.add_argument("--listen", type=_listen, default=None, metavar="HOST:PORT",
                        help="the bootstrap address clients are given (any live broker behind it), PLAINTEXT; broker "
                        "ports bind on the same host (required, or one secured listener with --listeners; "
                        "default: none)")  # fmt: skip
    parser.add_argument("--node-id", type=int, required=True, metavar="N",
                        help="this proxy's id: answered as the coordinator of its groups, and its registration "
                        "under /zkcoord/proxies; must differ from every broker id")  # fmt: skip
    parser.add_argument("--data-dir", type=Path, required=True, metavar="DIR",
                        help="the coordinator's group records (no partition data is ever stored here)")  # fmt: skip
    parser.add_argument("--advertise", default=None, metavar="HOST",
                        help="host clients are told to connect to (default: the --listen host)")  # fmt: skip
    parser.add_argument("--broker-ports", type=int, default=None, metavar="BASE",
                        help="port of broker --lowest-broker-id; broker N gets BASE + (N - lowest id) "
                        "(default: the --listen port + 1)")  # fmt: skip
    parser.add_argument("--lowest-broker-id", type=int, default=0, metavar="ID",
                        help="the broker id that gets port BASE (default 0; Kafka's generated ids start at 1001)")  # fmt: skip
    parser.add_argument("--broker-port", type=_pin, action="append", default=[], metavar="ID=PORT",
                        help="pin broker ID to PORT (repeatable; default: none, the BASE rule)")  # fmt: skip
    parser.add_argument("--bridge-zk-groups", dest="bridge_groups", default=None, metavar="REGEX",
                        help="the groups whose id fully matches REGEX are coordinated by the proxy as mixed groups "
                        "(legacy ZooKeeper members and broker-protocol members in one group, as `serve "
                        "--bridge-zk-groups`); every other group stays with the cluster (default: none)")  # fmt: skip
    parser.add_argument("--bridge-zk-offsets", action="store_true",
                        help="with --bridge-zk-groups: their OffsetFetch answers max(coordinator, "
                        "/consumers/G/offsets) and acknowledged commits are mirrored there (default: off)")  # fmt: skip
    parser.add_argument("--socket.request.max.bytes", dest="max_request_bytes", type=int,
                        default=100 * 1024 * 1024, metavar="BYTES",
                        help="largest request frame passed on; a larger size closes the connection "
                        "(default 104857600)")  # fmt: skip
    parser.add_argument("--zookeeper.session.timeout.ms", dest="zk_session_ms", type=int, default=6000, metavar="MS",
                        help="the proxy's ZooKeeper session timeout: a killed proxy node's groups move to a live "
                        "one once ZooKeeper expires its session (the timeout the server grants, at least 2 x its "
                        "tickTime, expired up to one tickTime later), then 0.3-0.4 s; keep librdkafka members' "
                        "session.timeout.ms above that (docs/proxy.md, failure cases) (default 6000)")  # fmt: skip
    defaults = GroupConfig()
    for flag, dest, text in _CONSUMER_GROUP_FLAGS:
        parser.add_argument(f"--{flag}", dest=dest, type=int, default=None, metavar="MS",
                            help=f"{text} (default {getattr(defaults, dest)})")  # fmt: skip
    add_zk_security(parser)
    add_listener_options(parser)
    add_command_config(parser)
    parser.set_defaults(func=run)


# The consumer-protocol (KIP-848) timing of the groups the proxy coordinates, as `serve` takes it (Kafka's names).
_CONSUMER_GROUP_FLAGS = (
    ("group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms",
     "consumer-protocol (KIP-848) members of coordinated groups: how long the coordinator waits for a heartbeat "
     "before it fences the member, in ms"),
    ("group.consumer.heartbeat.interval.ms", "group_consumer_heartbeat_interval_ms",
     "consumer-protocol members of coordinated groups: the heartbeat interval the coordinator tells them, in ms"),
)  # fmt: skip


def proxy_listener(args: argparse.Namespace) -> ListenerSetup:
    """The one listener of the proxy: --listen (PLAINTEXT) or a single --listeners PROTOCOL://HOST:PORT, with the
    TLS, SASL and authorizer settings `serve` takes (SCRAM credentials and ACLs from --security-zk or --zk)."""
    if args.listen is None and not args.listeners:
        raise ConfigError("give --listen HOST:PORT (PLAINTEXT) or --listeners PROTOCOL://HOST:PORT")
    setup = listener_setup(args, zk_auth(args))
    if setup.more:
        setup.close()
        raise ConfigError(
            "zkcoord proxy serves one listener (its protocol on the bootstrap and on every broker port): give "
            "--listen HOST:PORT or one --listeners PROTOCOL://HOST:PORT, not both nor several"
        )
    return setup


def config_from(args: argparse.Namespace, listener: ListenerSetup, upstream: UpstreamSecurity) -> ProxyConfig:
    host, port = listener.host, listener.port
    base = args.broker_ports if args.broker_ports is not None else port + 1
    if args.zk_session_ms < 1000:
        raise ConfigError(f"--zookeeper.session.timeout.ms must be >= 1000, got {args.zk_session_ms}")
    if args.max_request_bytes < 1:
        raise ConfigError(f"--socket.request.max.bytes must be >= 1, got {args.max_request_bytes}")
    return ProxyConfig(
        zk_connect=args.zk,
        host=host,
        node_id=args.node_id,
        data_dir=args.data_dir,
        ports=PortMap(port, base, args.lowest_broker_id, dict(args.broker_port)),
        advertise_host=args.advertise,
        bridge_groups=args.bridge_groups,
        bridge_offsets=args.bridge_zk_offsets,
        max_request_bytes=args.max_request_bytes,
        zk_auth=zk_auth(args),
        group_config=dataclasses.replace(
            GroupConfig(),
            **{d: getattr(args, d) for _, d, _ in _CONSUMER_GROUP_FLAGS if getattr(args, d) is not None},
        ),
        zk_session_timeout_s=args.zk_session_ms / 1000,
        security=listener.security,
        authorizer=listener.authorizer,
        upstream=upstream,
    )


def run(args: argparse.Namespace) -> int:
    if args.zk_session_ms < 1000:  # checked before the listener's ZooKeeper clients start
        raise ConfigError(f"--zookeeper.session.timeout.ms must be >= 1000, got {args.zk_session_ms}")
    upstream = upstream_security(args.command_config)  # a bad file is refused before anything connects
    listener = proxy_listener(args)
    try:
        return asyncio.run(_run(ProxyNode(config_from(args, listener, upstream))))
    finally:
        listener.close()


async def _run(node: ProxyNode) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await node.start()
        cfg = node.config
        protocol = cfg.security.protocol if cfg.security is not None else "PLAINTEXT"
        print(f"zkcoord proxy: listening on {protocol}://{cfg.host}:{cfg.ports.bootstrap} node {cfg.node_id}; "
              f"brokers reached over {cfg.upstream.protocol}", flush=True)  # fmt: skip
        for broker in sorted(node.watch.brokers if node.watch else {}):
            print(f"zkcoord proxy: broker {broker} behind {cfg.host}:{node.port_of(broker)}", flush=True)
        bootstrap = f"{cfg.advertised}:{cfg.ports.bootstrap}"
        print(f"zkcoord proxy: clients use bootstrap.servers={bootstrap}", flush=True)
        if cfg.bridge_groups is not None:
            print(f"zkcoord proxy: coordinating the groups matching {cfg.bridge_groups!r}; next, for such a group: "
                  f"`zkcoord migrate plan --zk {cfg.zk_connect} --bootstrap {bootstrap} --group G`, then replace "
                  "its ZooKeeper members one at a time as `migrate status` names them (docs/migration.md §11)",
                  flush=True)  # fmt: skip
        await stop.wait()
    finally:
        await node.close()
    print("zkcoord proxy: stopped", flush=True)
    return 0
