"""`zkcoord demo`: the main job on an embedded default — a local ZooKeeper and zkcoord node (unless given),
then a legacy ZooKeeper consumer group forming, rebalancing and consuming every record, shown step by step."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.zk import registry
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.session import SessionFault, connect, wait_for

TOPIC = "demo-events"
GROUP = "demo-group"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run the built-in demonstration (starts its own ZooKeeper and node)")
    demo.add_argument("--zk", default=None, help="use this ZooKeeper connect string instead of starting one")
    demo.add_argument("--partitions", type=int, default=6, help="partitions of the demo topic (default 6)")
    demo.add_argument("--records", type=int, default=600, help="records to produce (default 600)")
    demo.add_argument("--mode", choices=("fast", "faithful"), default="fast", help="legacy member mode")
    demo.set_defaults(func=run_demo)


@contextlib.contextmanager
def _zookeeper(given: str | None, console: Console) -> Iterator[str]:
    if given:
        yield given
        return
    console.print("[bold]1.[/] starting a local ZooKeeper ...")
    with ZooKeeper.start(1) as zk:
        console.print(f"   ZooKeeper serving at {zk.hosts}")
        yield zk.hosts


def run_demo(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    if args.partitions < 1 or args.records < 1:
        console.print("zkcoord demo: --partitions and --records must be at least 1")
        return 2
    with (
        _zookeeper(args.zk, console) as hosts,
        tempfile.TemporaryDirectory(prefix="zkcoord-demo-") as tmp,
    ):
        chroot = f"/zkcoord-demo-{int(time.time())}"
        root = connect(hosts)
        try:
            root.ensure_path(chroot)
        finally:
            root.stop()
            root.close()
        zk_connect = hosts + chroot
        console.print(f"[bold]2.[/] starting a zkcoord node registered in ZooKeeper ({zk_connect}) ...")
        node = NodeProcess(
            Path(tmp) / "node",
            ("--zk", zk_connect, "--node-id", "1", f"--num.partitions={args.partitions}", *FAST_GROUP_FLAGS),
        )
        with node:
            console.print(f"   node 1 listening on {node.bootstrap}")
            return _run_group(console, zk_connect, node.bootstrap, args)


def _produce(bootstrap: str, count: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(count):
            producer.send(TOPIC, key=f"k{i}".encode(), value=f"record {i}".encode())
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)


class _Member:
    """A legacy member consuming in its own thread, remembering every (partition, offset) it was handed."""

    def __init__(self, name: str, zk_connect: str, mode: str) -> None:
        self.name = name
        config = LegacyConsumerConfig(
            group_id=GROUP,
            zookeeper_connect=zk_connect,
            consumer_id=name,
            auto_offset_reset="smallest",
            auto_commit_interval_ms=500,
            zookeeper_session_timeout_ms=6000,
            rebalance_backoff_ms=2000 if mode == "faithful" else 200,
            mode=mode,  # type: ignore[arg-type]
        )
        self.consumer = LegacyConsumer(config, {TOPIC: 1})
        self.seen: list[tuple[int, int]] = []
        self._thread = threading.Thread(target=self._consume, name=f"demo-{name}", daemon=True)
        self._stop = threading.Event()

    def start(self) -> None:
        self.consumer.start()
        self._thread.start()

    def _consume(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.next_message(timeout=0.2)
            if msg is not None:
                self.seen.append((msg.partition, msg.offset))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def _show_owners(console: Console, zk_connect: str, title: str) -> dict[tuple[str, int], str]:
    client = connect(zk_connect)
    try:
        owners = registry.read_owners(client, GROUP)
        offsets = registry.read_offsets(client, GROUP)
        members = sorted(registry.read_registrations(client, GROUP))
    finally:
        client.stop()
        client.close()
    table = Table(title=title, title_justify="left")
    table.add_column("partition", justify="right")
    table.add_column("owner znode (thread id)")
    table.add_column("committed offset", justify="right")
    for tp, owner in sorted(owners.items()):
        table.add_row(str(tp.partition), owner, str(offsets.get(tp, "-")))
    console.print(table)
    console.print(f"   members registered under /consumers/{GROUP}/ids: {', '.join(members) or '-'}")
    return {(t, p): o for (t, p), o in owners.items()}


def _wait_settled(members: list[_Member], partitions: int, zk_connect: str, timeout: float = 60.0) -> None:
    """Until every member is stable and ZooKeeper's owner znodes cover every partition exactly once."""
    client = connect(zk_connect)
    try:

        def settled() -> bool:
            if not all(m.consumer.is_stable() for m in members):
                return False
            owners = registry.read_owners(client, GROUP)
            believed = Counter((tp.topic, tp.partition) for m in members for tp in m.consumer.owned())
            return len(owners) == partitions and all(believed[tp] == 1 for tp in owners)

        wait_for(settled, timeout, "the group to own every partition", interval=0.05)
    finally:
        client.stop()
        client.close()


def _run_group(console: Console, zk_connect: str, bootstrap: str, args: argparse.Namespace) -> int:
    console.print(
        f"[bold]3.[/] producing {args.records} records to {TOPIC} ({args.partitions} partitions) ..."
    )
    _produce(bootstrap, args.records)
    members: list[_Member] = []
    try:
        console.print(f"[bold]4.[/] member a joins the legacy group {GROUP} ({args.mode} mode)")
        t0 = time.monotonic()
        members.append(_Member("a", zk_connect, args.mode))
        members[0].start()
        _wait_settled(members, args.partitions, zk_connect)
        console.print(f"   stable in {time.monotonic() - t0:.2f}s")
        _show_owners(console, zk_connect, "after a joined")

        console.print("[bold]5.[/] members b and c join: everyone releases, then claims its range share")
        t0 = time.monotonic()
        for name in ("b", "c"):
            members.append(_Member(name, zk_connect, args.mode))
            members[-1].start()
        _wait_settled(members, args.partitions, zk_connect)
        console.print(f"   stable in {time.monotonic() - t0:.2f}s")
        _show_owners(console, zk_connect, "after b and c joined")

        console.print("[bold]6.[/] member b leaves cleanly (commits, releases its owner znodes, deregisters)")
        t0 = time.monotonic()
        leaving = members.pop(1)
        leaving.stop()
        _wait_settled(members, args.partitions, zk_connect)
        console.print(f"   stable in {time.monotonic() - t0:.2f}s")

        everyone = [*members, leaving]
        wait_for(
            lambda: len({r for m in everyone for r in m.seen}) >= args.records,
            60,
            "every record to be consumed",
            interval=0.05,
        )
        for m in members:
            m.consumer.commit_offsets()
        _show_owners(console, zk_connect, "after b left, all records consumed and committed")
    except SessionFault as exc:
        console.print(f"[red]zkcoord demo: {exc}[/]")
        return 1
    finally:
        for m in members:
            m.stop()
    seen = [r for m in everyone for r in m.seen]
    unique = len(set(seen))
    console.print(
        f"[bold]7.[/] consumed {unique} of {args.records} records "
        f"({len(seen) - unique} delivered twice across the rebalances); group closed."
    )
    return 0 if unique == args.records else 1
