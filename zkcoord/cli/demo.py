"""`zkcoord demo`: the main job on an embedded default — starts its own ZooKeeper when none is given."""

from __future__ import annotations

import argparse

from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.zk.session import connect


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run the built-in demonstration (starts its own ZooKeeper)")
    demo.add_argument("--zk", default=None, help="use this ZooKeeper connect string instead of starting one")
    demo.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    if args.zk:
        return _demo(args.zk)
    print("starting a local ZooKeeper ...", flush=True)
    with ZooKeeper.start(1) as zk:
        print(f"ZooKeeper ready at {zk.hosts}", flush=True)
        return _demo(zk.hosts)


def _demo(hosts: str) -> int:
    client = connect(hosts)
    try:
        client.ensure_path("/consumers")
        print(
            f"connected, session 0x{client.client_id[0]:x}; /consumers holds {client.get_children('/consumers')}"
        )
    finally:
        client.stop()
        client.close()
    return 0
