"""`zkcoord zk start`: a local ZooKeeper (standalone or ensemble) in the foreground, for use by hand."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading

from zkcoord.cli.options import examples
from zkcoord.errors import ConfigError
from zkcoord.local.zookeeper import ZooKeeper, read_sasl_users


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    zk = sub.add_parser(
        "zk",
        help="run a local ZooKeeper",
        epilog=examples(
            "zkcoord zk start                        # one node on 127.0.0.1:2181 until Ctrl-C",
            "zkcoord zk start --ensemble 3           # a 3-server ensemble",
        ),
    )
    zk_sub = zk.add_subparsers(dest="zk_command", metavar="ACTION", required=True)
    start = zk_sub.add_parser(
        "start",
        help="start ZooKeeper in the foreground until Ctrl-C",
        epilog=examples(
            "zkcoord zk start                     # one node on 127.0.0.1:2181, temporary data",
            "zkcoord zk start --ensemble 3 --port 2281 --data-dir /tmp/zk3",
        ),
    )
    start.add_argument("--port", type=int, default=2181, help="client port of the first node (default 2181)")
    start.add_argument(
        "--data-dir", default=None, metavar="DIR", help="data directory (default: a temporary one, removed)"
    )
    start.add_argument("--ensemble", type=int, default=1, metavar="N", help="number of nodes (default 1)")
    start.add_argument(
        "--sasl-users",
        metavar="FILE",
        default=None,
        help="require SASL DIGEST-MD5 logins: FILE lists name=password, one a line (clients log in with a JAAS "
        "Client section, --zk-jaas-config)",
    )
    start.set_defaults(func=run_start)


def run_start(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    users = None
    if args.sasl_users:
        try:
            users = read_sasl_users(args.sasl_users)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--sasl-users {args.sasl_users}: {exc}") from None
    for port in range(args.port, args.port + args.ensemble):
        # Checked first: a server already on the port answers the readiness check for the new one, which then
        # exits; "ready" would be printed for someone else's server.
        try:
            socket.create_server(("127.0.0.1", port)).close()
        except OSError as exc:
            raise ConfigError(
                f"port {port} is in use ({os.strerror(exc.errno) if exc.errno else exc}): is a ZooKeeper already running there? "
                f"(`echo srvr | nc 127.0.0.1 {port}`); give another --port"
            ) from None
    with ZooKeeper.start(args.ensemble, base_dir=args.data_dir, port=args.port, sasl_users=users) as zk:
        for node in zk.nodes:
            print(f"node {node.myid}: {node.address} mode={node.mode()} log={node.log_path}", flush=True)
        if users:
            print(f"SASL required: users {', '.join(sorted(users))} (DIGEST-MD5)", flush=True)
        print(f"ZooKeeper ready: {zk.hosts}  (Ctrl-C to stop)", flush=True)
        while not stop.wait(1.0):
            dead = [n.myid for n in zk.nodes if not n.running]
            if dead:
                # the logs are in the data directory, removed on exit when it is a temporary one: show their end
                print(f"node(s) {dead} exited; the end of their logs:\n{zk.log_tails(20)}", file=sys.stderr,
                      flush=True)  # fmt: skip
                return 1
    print("ZooKeeper stopped", flush=True)
    return 0
