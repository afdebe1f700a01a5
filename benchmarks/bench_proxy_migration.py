"""Migration benchmark with the data on the team's own brokers: partition-seconds without an owner per replaced
member, member by member through one `zkcoord proxy --bridge-zk-groups --bridge-zk-offsets` node against the
barrier way, then the hand-off (`zkcoord migrate handoff`) of the migrated group to the cluster's own coordinator.

The cluster is Tansu (zkcoord.testing.tansu: memory storage, node id 111, registered in a loopback ZooKeeper as a
ZooKeeper-era broker). Per run: a P-partition topic on Tansu under a paced producer writing straight to Tansu; N
legacy members (zkcoord's, fast mode, range) fetching from Tansu, replaced by kafka-python members bootstrapped on
the proxy; the sampler of benchmarks.bench_mixed (imported) reads every 20 ms what each member may consume from and
integrates the partitions nobody holds. Ways: member by member with eager kafka-python members (range) and with
cooperative ones (cooperative-sticky): start one, wait until every member holds its share, one legacy member
leaves (make-before-break), wait again; the barrier: stop every legacy member, start the kafka-python members, wait
until they hold every partition. After each member-by-member run, `Handoffs.run` (what `zkcoord migrate handoff`
calls) while the members run: its duration, and the unowned partition-seconds from its start until every member
holds its share in Tansu's own group. Checks, failing the run loudly: no partition held by two members at any
sample, Tansu's own group empty before the hand-off, every acknowledged record consumed. The proxy's coordinator
has Kafka's default `group.initial.rebalance.delay.ms`, 3000 (`zkcoord proxy` takes no flag for it).

    .venv/bin/python -m benchmarks.bench_proxy_migration      # 3 runs per way (~2.5 min), then the same ways on a
        # `zkcoord serve` node (bench_mixed's measure, ~1.5 min) for comparison; writes its section of the docs
    .venv/bin/python -m benchmarks.bench_proxy_migration --runs 1 --no-serve --no-report    # printed only
    .venv/bin/python -m benchmarks.bench_proxy_migration --runs 1 --ways "member-by-member eager" --trace /tmp/t.log
        # every step logged with timestamps (members' callbacks, kafka-python's coordinator, the proxy's log) into
        # the file, and the unheld partition-seconds per membership change printed
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import bench_mixed
from benchmarks.bench_mixed import SAMPLE_S, WAYS, Classic, Holdings, Legacy, breakdown, settled
from benchmarks.report import write_section
from migration.workflow.handoff import Handoffs, cluster_group
from migration.workflow.runner import Journal
from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.testing import wait_for
from zkcoord.testing.producers import PacedProducer
from zkcoord.testing.proxy import ProxyProcess
from zkcoord.testing.tansu import Tansu, register_in_zookeeper
from zkcoord.zk.session import SessionFault, connect

SECTION = "mixed groups through the proxy, data on Tansu"
GROUPS = "pmig-.*"  # the proxy's --bridge-zk-groups: every group of the benchmark, the barrier's included
ALL_WAYS = (*WAYS, "barrier")
INITIAL_DELAY_MS = (
    3000  # the proxy's coordinator's group.initial.rebalance.delay.ms (GroupConfig's, Kafka's default)
)
trace = logging.getLogger("bench_proxy_migration")  # `--trace`: the benchmark's steps, with timestamps
SETTLE_S = 90.0  # deadline of every wait for a settled group


class RunFailed(RuntimeError):
    """A check of the benchmark failed: its figures are not written."""


class Consumed:
    """Every (partition, offset) any member consumed, and when each was first read; bounded by what the paced
    producer sends (its limit)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: set[tuple[int, int]] = set()
        self.first_read: list[float] = []  # time.monotonic() of each record's first read, in order

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            if (partition, offset) not in self.seen:
                self.seen.add((partition, offset))
                self.first_read.append(time.monotonic())

    def longest_pause(self, start: float, end: float) -> float:
        """The longest stretch of [start, end] in which no member read a record for the first time."""
        with self.lock:
            marks = [start, *(t for t in self.first_read if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(marks))

    def missing(self, acked: frozenset[tuple[int, int]]) -> set[tuple[int, int]]:
        with self.lock:
            return set(acked - self.seen)


class CheckedHoldings(Holdings):
    """bench_mixed's sampler, also noting every sample where a partition is in two members' holdings."""

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.twice: list[str] = []

    def held(self) -> set[int]:
        with self.lock:
            views = {name: set(ps) for name, ps in self.classic.items()}
            views.update({name: view() for name, view in self.legacy.items()})
        union: set[int] = set().union(*views.values())
        if sum(len(v) for v in views.values()) != len(union) and len(self.twice) < 100:  # bounded
            self.twice.append(f"{time.monotonic():.3f} {sorted((n, sorted(v)) for n, v in views.items())}")
        return union


class CountingLegacy(Legacy):
    """bench_mixed's legacy member (fast mode), remembering what it consumed."""

    def __init__(self, zk: str, group: str, topic: str, name: str, h: Holdings, consumed: Consumed) -> None:
        super().__init__(zk, group, topic, name, h)
        self.consumed = consumed

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.next_message(timeout=0.1)
            if msg is not None:
                self.consumed.add(msg.partition, msg.offset)


class CountingClassic(Classic):
    """bench_mixed's kafka-python member, remembering what it consumed."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        h: Holdings,
        cooperative: bool,
        consumed: Consumed,
    ) -> None:
        super().__init__(bootstrap, group, topic, name, h, cooperative)
        self.consumed = consumed

    def _run(self) -> None:
        while not self._stop.is_set():
            for tp, records in self.consumer.poll(timeout_ms=1000).items():
                for record in records:
                    self.consumed.add(tp.partition, record.offset)


@dataclass
class Run:
    per_member: float  # unowned partition-seconds of the migration per replaced member
    handoff_unowned: float | None = None  # unowned partition-seconds from the hand-off's start until settled
    handoff_s: float | None = None  # the command's duration (Handoffs.run)
    handoff_settled_s: float | None = None  # from its start until every member holds its share again
    handoff_pause: float = 0.0  # the longest stretch of the command in which no record was read
    # the hand-off's steps from its journal (seconds): checks until `releasing` is written, the members' release and
    # the offsets' copy, the switch to `forwarding`, the members' rejoin until Tansu's group is Stable
    phases: dict[str, float] = field(default_factory=dict)
    records: int = 0
    notes: list[str] = field(default_factory=list)


PHASES = ("checks", "release and copy", "switch", "rejoin on Tansu")


def handoff_phases(journal: Journal, group: str, start_ms: int) -> dict[str, float]:
    """The seconds between the hand-off's journal entries (begin, offsets, forwarding, done), from `start_ms`."""
    at = {e["event"]: int(e["ts_ms"]) for e in journal.entries(group) if e.get("step") == "handoff"}
    marks = [start_ms, at["begin"], at["offsets"], at["forwarding"], at["done"]]
    return {name: (b - a) / 1000 for name, a, b in zip(PHASES, marks[:-1], marks[1:], strict=True)}


def one_run(
    zk_hosts: str, zk: Any, tansu: Tansu, proxy: ProxyProcess, topic: str, way: str, args: argparse.Namespace,
    state_dir: Path,
) -> Run:  # fmt: skip
    group = f"pmig-{way.split()[-1]}-{uuid.uuid4().hex[:6]}"
    cooperative = way.endswith("cooperative")
    h = CheckedHoldings(args.partitions)
    consumed = Consumed()
    producer = PacedProducer(tansu.bootstrap, topic, per_second=args.rate, round_robin=True).start()
    legacy = [
        CountingLegacy(zk_hosts, group, topic, f"l{i}", h, consumed).start() for i in range(args.members)
    ]
    live: list[Any] = list(legacy)

    def wait(what: str) -> None:
        wait_for(settled(h, live), SETTLE_S, what, interval=SAMPLE_S)

    def classic(i: int) -> CountingClassic:
        member = CountingClassic(proxy.bootstrap, group, topic, f"c{i}", h, cooperative, consumed).start()
        live.append(member)
        return member

    run = Run(0.0)
    completed = False
    try:
        wait("the legacy group to settle")
        h.start()
        if way == "barrier":
            h.step = "barrier"
            for old in legacy:
                old.stop()
                live.remove(old)
            for i in range(args.members):
                classic(i)
            wait("the kafka-python group to settle")
            run.per_member = h.unowned_s / args.members
        else:
            for i, old in enumerate(legacy):
                trace.info("step: c%d joins", i)
                h.step = f"c{i} joins"
                classic(i)
                wait("the mixed group to settle after a join")
                trace.info("step: settled; l%d leaves", i)
                h.step = f"l{i} leaves"
                old.stop()
                live.remove(old)
                wait("the mixed group to settle after a leave")
            run.per_member = h.unowned_s / args.members
            state, members = cluster_group(tansu_address(tansu), group)
            if members:
                raise RunFailed(
                    f"Tansu's own group {group} has {len(members)} member(s) ({state}) before the hand-off"
                )
            journal = Journal(state_dir)
            handoffs = Handoffs(zk, journal, lambda b, g: BrokerOffsetStore(b, g), None, 120.0)
            trace.info("step: settled; the hand-off begins")
            h.step = "hand-off"
            before, start, start_ms = h.unowned_s, time.monotonic(), int(time.time() * 1000)
            try:
                outcome = handoffs.run(group)
            finally:
                handoffs.close()
            run.handoff_s = time.monotonic() - start
            run.handoff_pause = consumed.longest_pause(start, time.monotonic())
            run.phases = handoff_phases(journal, group, start_ms)
            run.notes += outcome.lines
            trace.info("step: the hand-off command returned")
            wait("the members to hold their shares in Tansu's group")
            trace.info("step: settled in Tansu's group")
            run.handoff_settled_s = time.monotonic() - start
            run.handoff_unowned = h.unowned_s - before
            state, members = cluster_group(tansu_address(tansu), group)
            if len(members) != args.members:
                raise RunFailed(
                    f"Tansu's own group {group} has {len(members)} member(s) ({state}) after the hand-off"
                )
        completed = True
    finally:
        h.stop()
        if trace.isEnabledFor(logging.INFO):  # `--trace`: the unheld partition-seconds per step, printed
            print(f"{way} {group}:\n{breakdown(h.episodes)}")
        producer.stop()
        try:
            if (
                completed and not producer.failed
            ):  # every acknowledged record consumed by the members still running
                wait_for(lambda: not consumed.missing(producer.acked), 60, "every acknowledged record consumed",
                         interval=SAMPLE_S)  # fmt: skip
        except SessionFault:  # wait_for's timeout
            missing = sorted(consumed.missing(producer.acked))
            raise RunFailed(
                f"{way} ({group}): {len(missing)} acknowledged records not consumed, e.g. {missing[:10]}"
            ) from None
        finally:
            for member in live:
                member.stop()
    if producer.failed:
        raise RunFailed(f"{way}: the producer failed: {producer.failed[:3]}")
    if h.twice:
        raise RunFailed(
            f"{way} ({group}): partitions held twice at {len(h.twice)} sample(s), first: {h.twice[0]}"
        )
    run.records = len(producer.acked)
    return run


def tansu_address(tansu: Tansu) -> tuple[str, int]:
    host, _, port = tansu.bootstrap.rpartition(":")
    return host, int(port)


def measure(args: argparse.Namespace, proxy_lines: list[str] | None = None) -> dict[str, list[Run]]:
    """Every way `args.runs` times, round-robin, against one ZooKeeper, one Tansu and one proxy node (whose last
    output lines are added to `proxy_lines`, when given)."""
    results: dict[str, list[Run]] = {way: [] for way in args.ways}
    topics = {(way, i): f"pmig-{i}-{way.split()[-1]}" for i in range(args.runs) for way in args.ways}
    with ZooKeeper.start(1) as zookeeper, Tansu.start() as tansu, tempfile.TemporaryDirectory() as tmp:
        for topic in topics.values():
            tansu.create_topic(topic, args.partitions)
        zk = connect(zookeeper.hosts)
        try:
            with (
                register_in_zookeeper(zk, tansu),
                ProxyProcess(
                    zookeeper.hosts,
                    Path(tmp) / "proxy",
                    "--bridge-zk-groups",
                    GROUPS,
                    "--bridge-zk-offsets",
                    verbose=args.trace is not None,
                ) as proxy,
            ):
                for i in range(args.runs):
                    for way in args.ways:
                        state = Path(tmp) / "state"
                        run = one_run(zookeeper.hosts, zk, tansu, proxy, topics[(way, i)], way, args, state)
                        results[way].append(run)
                        handoff = (
                            f"; hand-off {run.handoff_unowned:.3f} partition-s, command {run.handoff_s:.2f} s, "
                            f"settled {run.handoff_settled_s:.2f} s"
                            if run.handoff_s is not None
                            else ""
                        )
                        print(f"run {i} {way}: {run.per_member:.3f} partition-s per member{handoff}; "
                              f"{run.records} records", file=sys.stderr)  # fmt: skip
                        trace.info("run %d %s done: %s", i, way, run)
                if proxy_lines is not None:
                    proxy_lines.extend(proxy.output)
        finally:
            zk.stop()
            zk.close()
    return results


def spread(values: list[float]) -> str:
    return (
        f"{statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} | "
        f"{' '.join(f'{v:.2f}' for v in values)}"
    )


def beside_serve(args: argparse.Namespace) -> dict[str, list[float]]:
    """The same ways, runs and members with the data and the coordinator on one `zkcoord serve --zk
    --bridge-zk-groups` node (benchmarks.bench_mixed.measure, initial delay 3000 ms, no producer): the "mixed
    groups" figures taken in the same run as the proxy's, so the two are compared at one machine load."""
    with ZooKeeper.start(1) as zookeeper:
        return bench_mixed.measure(zookeeper.hosts, INITIAL_DELAY_MS, args)


def report(results: dict[str, list[Run]], serve: dict[str, list[float]], args: argparse.Namespace) -> str:
    med = {way: statistics.median(r.per_member for r in runs) for way, runs in results.items()}
    there = {way: statistics.median(v) for way, v in serve.items() if v}
    rows = "\n".join(
        f"| {way} | {spread([r.per_member for r in runs])} | "
        + (f"{there[way]:.3f} | {med[way] / there[way]:.2f}x |" if there.get(way) else "- | - |")
        for way, runs in results.items()
    )
    handed = {way: runs for way, runs in results.items() if way != "barrier"}
    handoff_rows = "\n".join(
        f"| after {way} | {spread([r.handoff_unowned or 0.0 for r in runs])} | "
        f"{statistics.median(r.handoff_s or 0.0 for r in runs):.2f} s | "
        f"{statistics.median(r.handoff_pause for r in runs):.2f} s | "
        + " | ".join(f"{statistics.median(r.phases[p] for r in runs):.2f}" for p in PHASES)
        + " |"
        for way, runs in handed.items()
    )
    records = sum(r.records for runs in results.values() for r in runs)
    body = f"""\
{args.members} legacy members (zkcoord, fast mode: incremental hand-over, range) of a {args.partitions}-partition
topic on Tansu 0.6.0 (the team's own broker here: node 111, registered in ZooKeeper as a ZooKeeper-era broker)
under a producer writing {args.rate:g} records/s straight to Tansu, replaced by {args.members} kafka-python members
bootstrapped on one `zkcoord proxy --bridge-zk-groups --bridge-zk-offsets` node, {args.runs} runs per way (the ways
in turn), loopback ZooKeeper; `python -m benchmarks.bench_proxy_migration`. The proxy's coordinator has
`group.initial.rebalance.delay.ms` 3000 (Kafka's default; `zkcoord proxy` takes no flag for it). Ways and figure as
in "mixed groups" (its sampler, benchmarks/bench_mixed.py, every {int(SAMPLE_S * 1000)} ms): partition-seconds
during which no member may consume a partition, divided by the members replaced; the barrier's kafka-python group
is coordinated by the proxy too (its offsets read from ZooKeeper by `--bridge-zk-offsets`). Checked in every run,
or the run fails: no partition in two members' holdings at any sample, every acknowledged record consumed
({records:,} records in all), Tansu's own group empty until the hand-off and holding the {args.members} members
after it.

| way | median (partition-s per member) | min | max | runs | on `serve`, same run (median) | proxy / serve |
|---|---:|---:|---:|---|---:|---:|
{rows}

The hand-off after each member-by-member run: `Handoffs.run` (what `zkcoord migrate handoff` calls) while the
members run. Partition-seconds in all (not per member) from the command's start until every member holds its
share in Tansu's own group (the command returns once that group is Stable with every member, and the members'
callbacks agree within a sample); the command's duration; the longest stretch of it in which no member read a
record (medians; {args.rate:g} records/s are written); its steps from its journal (seconds, medians): the
refusal checks until `releasing` is written, the members' release and the offsets' copy, the switch to
`forwarding`, the members' rejoin until Tansu's group is Stable.

| hand-off | median (partition-s) | min | max | runs | command | longest pause in reading | {" | ".join(PHASES)} |
|---|---:|---:|---:|---|---:|---:|{"---:|" * len(PHASES)}
{handoff_rows}
"""
    if all(w in med for w in ALL_WAYS):
        eager_handoff = statistics.median(r.handoff_unowned or 0.0 for r in results[WAYS[0]])
        body += f"""
**Member by member against the barrier, data on Tansu: eager {med[WAYS[0]] / med["barrier"]:.3f}x, cooperative
{med[WAYS[1]] / med["barrier"]:.3f}x. The eager members' hand-off costs
{eager_handoff / (med["barrier"] * args.members):.2f}x of the barrier's whole unowned time
({med["barrier"] * args.members:.1f} partition-s), once for the group.**
"""
    body += """
The `serve` column is benchmarks/bench_mixed.py's measure at initial delay 3000 ms run by this same command after
the proxy's runs (same members, sampler and ways; data and coordinator on one `zkcoord serve --zk
--bridge-zk-groups` node; no producer), so the two are taken at one machine load, which moves these figures more
than anything else ("mixed groups" is another day's run). Four earlier runs of this command on 2026-11-27 had
proxy / serve 0.84x, 1.51x, 1.37x and 1.29x eager, 0.83x, 1.88x, 1.25x and 1.67x cooperative (loads 5.8 -> 10.2,
10.5 -> 4.7, 4.2 -> 5.8, 5.5 -> 2.2), the barrier 1.00-1.01x: through the proxy member by member was slower in
three of four, by 0.05-0.5 partition-s per member, which 3 runs a way at these loads do not pin down and which is
not traced on both sides here (nor is the producer, which only the proxy's runs have: at 1 record/s instead of 100
the proxy's figures were the same). By design a partition changes hands as on `serve` (the legacy members fetch
from Tansu and hand over through ZooKeeper, the kafka-python members' group requests are answered by the group
service `serve` uses, their fetches forwarded to Tansu undecoded). A traced cooperative run (`--trace FILE`; load
4.9) spent its 0.98 partition-s in all (0.245 per member) as `serve`'s trace in "mixed groups" describes: 0.29 at
the first classic member's join (6 partitions from legacy members to it, unheld 2 samples each), 0.26 on the one
balance move between two cooperative members at the last join (withheld, revoked, handed over by a follow-up
rebalance), the other five changes 0-0.14 each.

Where the hand-off's time goes (the steps above, and a traced eager run merging the benchmark's steps, the
members' callbacks, kafka-python's coordinator and the proxy's log): the checks (no ZooKeeper member, the group
described through the proxy, FindCoordinator and DescribeGroups on Tansu: its own group empty) until `releasing`;
then the proxy starts a rebalance at once, each member finds it at its next heartbeat (heartbeat.interval.ms 200
here), an eager one commits and revokes everything and its JoinGroup removes it (the proxy's group empty ~0.2 s
after the start), and the offsets are written to Tansu and read back; `forwarding`; the members' next
FindCoordinator and JoinGroup reach Tansu within ~0.05 s, and Tansu holds the first JoinGroup answers of the new
group for 3.0 s: its initial rebalance delay for a group formed from Empty, as Kafka's brokers do with
`group.initial.rebalance.delay.ms` (default 3000). That delay is ~90% of the command's time and of the eager
members' unowned time; on brokers with a lower setting the hand-off costs what the first three steps cost, a few
hundred ms per partition.

The cooperative runs' hand-off shows 0 unowned partition-seconds, yet no member read a record for as long as in the
eager runs (the pause column): the figure counts what the members' callbacks say they may consume, and kafka-python
3.0.12's cooperative members keep their partitions through the hand-off while they wait in their JoinGroup to
Tansu, reading nothing. The proxy answers their rejoin (heartbeat REBALANCE_IN_PROGRESS, then JoinGroup) with
MEMBER_ID_REQUIRED and no member id so that the member drops its assignment as lost; kafka-python resets its
generation and retries the JoinGroup in the same join loop without preparing the join again, so no
`on_partitions_lost` comes, and it joins Tansu's group still owning its partitions, where cooperative-sticky gives
each member its own back (kafka-python's log at generation 0: "Cooperative rebalance complete ... owned=...").
Nothing was lost or held twice in these runs (both checked): no other member could take those partitions
meanwhile. So for either kind of member the hand-off costs about the pause: every partition unread for ~3.2 s,
most of it Tansu's initial rebalance delay.
"""
    return body


def traced(args: argparse.Namespace, path: Path) -> int:
    """The runs asked for with every step logged into `path`, merged by timestamp: the benchmark's steps and the
    members' callbacks (bench_mixed's logger), kafka-python's coordinator, the hand-off, the proxy's INFO log."""
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [
        logging.getLogger(n)
        for n in ("bench_mixed", "bench_proxy_migration", "kafka.coordinator", "migration")
    ]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    proxy_lines: list[str] = []
    try:
        print(report(measure(args, proxy_lines), {}, args))
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        handler.close()
        lines = path.read_text().splitlines() + [
            f"{ln.rstrip()} [proxy]" for ln in proxy_lines if ln[:2] == "20"
        ]
        path.write_text("\n".join(sorted(lines)) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=4, help="legacy members replaced per run (default: 4)")
    ap.add_argument("--partitions", type=int, default=12, help="partitions of each run's topic (default: 12)")
    ap.add_argument("--runs", type=int, default=3, help="runs per way (default: 3)")
    ap.add_argument("--rate", type=float, default=100.0,
                    help="records/s the paced producer writes to Tansu (default: 100)")  # fmt: skip
    ap.add_argument("--ways", nargs="+", choices=ALL_WAYS, default=list(ALL_WAYS), metavar="WAY",
                    help="only these ways, printed only (default: all three: " + ", ".join(ALL_WAYS) + ")")  # fmt: skip
    ap.add_argument("--trace", type=Path, metavar="FILE", default=None,
                    help="log every step (the members' callbacks, kafka-python's coordinator, the hand-off, the "
                    "proxy's output) with timestamps into FILE; printed only (default: no trace)")  # fmt: skip
    ap.add_argument("--no-serve", action="store_true",
                    help="skip the same ways on a `zkcoord serve` node (bench_mixed's, for the comparison column; "
                    "~1.5 min at 3 runs); printed only (default: measured after the proxy's)")  # fmt: skip
    ap.add_argument("--no-report", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.members < 1 or args.partitions < args.members or args.runs < 1 or args.rate <= 0:
        ap.error("want --members >= 1, --partitions >= --members, --runs >= 1, --rate > 0")
    if args.trace is not None:
        return traced(args, args.trace)
    results = measure(args)
    body = report(results, {} if args.no_serve else beside_serve(args), args)
    print(body)
    if not args.no_report and not args.no_serve and set(args.ways) == set(ALL_WAYS):
        write_section(SECTION, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
