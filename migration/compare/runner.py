"""The live comparison runner: plays a scenario against a real ZooKeeper and a real zkcoord node, once per protocol
(and per repeat), with group members in separate processes, and writes one trace run directory per play. A
`group: shared` scenario is one play ("mixed") of all its protocols' members in one group, on a node the runner
starts with `--bridge-zk-groups` (and `--bridge-zk-offsets`), where `replace` moves a member slot between protocols.

Every protocol gets the same topics, load and churn schedule (member targets drawn from the scenario seed), on a
fresh ZooKeeper chroot, node and group so plays never interfere. Each run directory holds the merged trace
(`run.json` + `events/`), `zk_owners.parquet` (periodic samples of the ZooKeeper owner znodes, legacy groups)
and `members/` (each member's raw JSON lines and stderr). Every process started is stopped, even on failure;
every wait is bounded.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from migration.compare import churn
from migration.compare.analysis import in_trace_order, member_trace_rows, number_rounds, owner_overlaps
from migration.compare.partitions import PartitionIncreaseError, increase_partitions
from migration.compare.scenario import ChurnEvent, ChurnKind, Family, ProtocolRun, Scenario
from migration.compare.trace import EventKind, RunMeta, TraceWriter
from zkcoord.errors import ZkcoordError
from zkcoord.legacy.codecs import BrokerRegistration, parse_endpoint
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.security.client_config import read_command_config
from zkcoord.zk import registry
from zkcoord.zk import retry as zk_retry
from zkcoord.zk.auth import ZkAuth
from zkcoord.zk.auth_flags import NO_FLAGS, ZkSecurityFlags
from zkcoord.zk.session import connect, ensure_chroot

OWNER_SAMPLE_S = 0.25
DRAIN_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
NODE_RESTART_TIMEOUT_S = 45.0
NODE_ID = 1
OWNERS_FILE = "zk_owners.parquet"
MIXED = "mixed"  # the protocol label of a shared-group play
MEMBERS_DIR = "members"


class RunnerError(ZkcoordError):
    """A comparison play could not be set up or run."""


def now_ms() -> int:
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------------------------------------------
# member processes


@dataclass
class MemberProc:
    name: str
    proc: subprocess.Popen[bytes]
    trace_path: Path
    stderr_path: Path
    started_ms: int
    ended_ms: int | None = None
    how: str | None = None  # leave | crash | stop | exited | replace
    protocol: str = ""
    scenario_topic: Mapping[str, str] = field(
        default_factory=dict
    )  # Kafka topic -> the scenario's name for it
    _pos: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def read_new(self) -> list[dict[str, Any]]:
        """Rows appended since the last call (a partial last line is left for the next call)."""
        try:
            with open(self.trace_path, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._pos += end + 1
        new = []
        for line in data[: end + 1].splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                row = json.loads(line)
                topic = row.get("topic")
                if topic in self.scenario_topic:
                    row["topic"] = self.scenario_topic[topic]
                new.append(row)
        self.rows.extend(new)
        return new

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def stop(self, how: str, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (clean leave), SIGKILL after `timeout`; records when and how the member ended."""
        if self.ended_ms is None:
            self.ended_ms, self.how = now_ms(), how
        self.signal(signal.SIGCONT)  # a paused member cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.ended_ms is None:
            self.ended_ms, self.how = now_ms(), "crash"
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


# ----------------------------------------------------------------------------------------------------------------
# one play of one protocol


@dataclass
class PlayResult:
    run_dir: Path
    protocol: str
    produced: int
    consumed_unique: int
    consumed_total: int
    lost: int
    owner_samples: int
    owner_overlaps: int
    churn_applied: int


class _Play:
    """One protocol's play of a scenario; `run()` returns its result, `close()` stops everything it started."""

    def __init__(
        self,
        scenario: Scenario,
        proto: ProtocolRun,
        run_index: int,
        run_dir: Path,
        zk_hosts: str,
        zk: ZooKeeper | None,
        bootstrap: str | None,
        work_dir: Path,
        tick: Callable[[float], None],
        zk_security: ZkSecurityFlags = NO_FLAGS,
        zk_auth: ZkAuth | None = None,
        command_config: str | None = None,
    ) -> None:
        self.sc = scenario
        # Kafka client security for the given node (--command-config): the runner's admin client and producer
        # use it, and every member gets the file to read the same way.
        self.command_config = command_config
        self.kafka_security = read_command_config(command_config)
        # Every ZooKeeper client of the play logs in alike: the runner's own (auth), and through the same flags
        # the members and the node it starts.
        self.zk_security = zk_security
        self.auth = zk_auth if zk_auth is not None else zk_security.load()
        self.proto = proto
        self.run_index = run_index
        self.run_dir = run_dir
        self.zk = zk
        self.work_dir = work_dir
        self.tick = tick
        self.label = MIXED if scenario.shared else proto.protocol
        self.run_id = f"{scenario.name}-{self.label}-r{run_index}-{now_ms()}"
        if bootstrap is None:
            # Our own node per play, registered in a fresh chroot: nothing is shared between plays.
            self.group = f"{scenario.name}-{self.label}-r{run_index}"
            self.zk_connect = ensure_chroot(zk_hosts, f"/zkcoord-compare/{self.run_id}", auth=self.auth)
            self.kafka_topic = {t.name: t.name for t in scenario.topics}
        else:
            # A given node is registered in the given ZooKeeper (connect string with its chroot, if any): legacy
            # members must see its topics there. Plays on it share neither a group nor a topic: a partition
            # increase of one play would otherwise meet the next play's topic, and a play's new group would read
            # the records of the plays before it. Traces keep the scenario's topic names.
            self.group = self.run_id
            self.zk_connect = zk_hosts
            self.kafka_topic = {t.name: f"{t.name}-{self.run_id}" for t in scenario.topics}
        self.scenario_topic = {kafka: name for name, kafka in self.kafka_topic.items()}
        self.node: NodeProcess | None = None
        self.bootstrap = bootstrap
        self.members: list[MemberProc] = []
        self.slots: list[MemberProc] = []  # members in join order; a replacement takes its predecessor's slot
        self.runner_rows: list[dict[str, Any]] = []
        self.produced: list[tuple[int, str, int, int]] = []  # (ts_ms, topic, partition, offset)
        self.samples: list[tuple[int, str, int, str]] = []  # (ts_ms, topic, partition, owner)
        self.initial_partitions = scenario.partitions_per_topic()
        self.partitions = dict(self.initial_partitions)  # grows with partition-increase churn
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.node_restarts: list[int] = []  # ms each coordinator restart took
        self.rng = random.Random(scenario.seed)
        self.t0 = 0.0
        self.started_ms = 0

    # --- set-up ---------------------------------------------------------------------------------------------

    def _start_node(self) -> None:
        if self.bootstrap is not None:
            return
        bridge: tuple[str, ...] = ()
        if self.sc.shared:  # one group of both kinds: the coordinator bridges its membership and offsets
            bridge = ("--bridge-zk-groups", re.escape(self.group), "--bridge-zk-offsets")
        self.node = NodeProcess(
            self.work_dir / f"node-{self.run_id}",
            (
                "--zk",
                self.zk_connect,
                "--node-id",
                str(NODE_ID),
                "--num.partitions=1",
                *FAST_GROUP_FLAGS,
                *self._consumer_protocol_flags(),
                *bridge,
                *self.zk_security.argv(),
            ),
        )
        self.node.start()
        self.bootstrap = self.node.bootstrap

    def _consumer_protocol_flags(self) -> tuple[str, ...]:
        """Consumer-protocol (KIP-848) members follow the scenario's session timeout as classic ones do: it is the
        coordinator's setting there, with heartbeats at a quarter of it."""
        if not any(p.family is Family.CONSUMER for p in self.sc.protocols):
            return ()
        session = self.sc.session_timeout_ms
        return (f"--group.consumer.session.timeout.ms={session}",
                f"--group.consumer.heartbeat.interval.ms={max(1, min(100, session - 1), session // 4)}")  # fmt: skip

    def _create_topics(self) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap, client_id="zkcoord-compare", **self.kafka_security
            )
            try:
                for t in self.sc.topics:
                    # It may exist (a given node, a play's name met again): its partition count is checked below.
                    with contextlib.suppress(TopicAlreadyExistsError):
                        admin.create_topics([NewTopic(self.kafka_topic[t.name], t.partitions, 1)])
            finally:
                admin.close()
        except KafkaError as exc:  # a failed login, a missing ACL, an unreachable node: say which and where
            protocol = self.kafka_security.get("security_protocol", "PLAINTEXT")
            raise RunnerError(
                f"creating the scenario's topics through {self.bootstrap} ({protocol}) failed: {exc!r}"
            ) from exc
        client = connect(self.zk_connect, auth=self.auth)
        try:
            deadline = time.monotonic() + 30
            for t in self.sc.topics:
                name = self.kafka_topic[t.name]
                while True:
                    assignment = registry.read_topic(client, name)
                    if assignment is not None:
                        if len(assignment.partitions) != t.partitions:
                            raise RunnerError(
                                f"topic {name} already exists with {len(assignment.partitions)} partitions; "
                                f"the scenario starts it with {t.partitions} (use a fresh node)"
                            )
                        break
                    if time.monotonic() > deadline:
                        raise RunnerError(f"topic {name} did not appear in ZooKeeper within 30 s")
                    time.sleep(0.05)
        finally:
            client.stop()
            client.close()

    def _spawn(self, run: ProtocolRun | None = None, slot: int | None = None) -> MemberProc:
        """Start a member of `run` (default: the play's protocol), appended to the slots or put in `slot`."""
        run = run or self.proto
        name = f"m{len(self.members)}"
        mdir = self.run_dir / MEMBERS_DIR
        mdir.mkdir(parents=True, exist_ok=True)
        trace_path, stderr_path = mdir / f"{name}.jsonl", mdir / f"{name}.stderr"
        cmd = [sys.executable, "-m", "migration.compare.member_proc", "--protocol", run.protocol,
               "--group", self.group, "--member", name, "--topics", ",".join(self.kafka_topic.values()),
               "--strategy", run.strategy, "--session-timeout-ms", str(self.sc.session_timeout_ms),
               "--trace-file", str(trace_path)]  # fmt: skip
        if run.family is Family.LEGACY:
            cmd += ["--zk", self.zk_connect, *self.zk_security.argv()]
        else:
            assert self.bootstrap is not None
            cmd += ["--bootstrap", self.bootstrap]
        if self.command_config is not None:  # legacy members fetch from the same brokers
            cmd += ["--command-config", str(Path(self.command_config).resolve())]
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        m = MemberProc(
            name,
            proc,
            trace_path,
            stderr_path,
            now_ms(),
            protocol=run.protocol,
            scenario_topic=self.scenario_topic,
        )
        self.members.append(m)
        if slot is None:
            self.slots.append(m)
        else:
            self.slots[slot] = m
        return m

    # --- background: producer and owner sampler --------------------------------------------------------------

    def _produce(self) -> None:
        from kafka import KafkaProducer

        total = int(self.sc.producer.rate_per_s * self.sc.producer.duration_s)
        # A short metadata age: after a partition increase the producer learns the new partitions within ~1 s,
        # as a client of the era did on its next metadata refresh. reconnect_backoff_max_ms=1000 is the Java
        # client's default: kafka-python's 30 s default also backs off its metadata refreshes, so after a
        # coordinator-kill outage it could go ~30 s without a refresh and miss a partition increase.
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=5, acks=1, retries=5, metadata_max_age_ms=1000,
            reconnect_backoff_max_ms=1000, **self.kafka_security,
        )  # fmt: skip
        try:
            for i in range(total):
                if self._stop.is_set():
                    break
                delay = self.t0 + i / self.sc.producer.rate_per_s - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                topic, partition = self._next_partition(producer, i)
                fut = producer.send(topic, value=f"{self.run_id} {i}".encode(), partition=partition)
                fut.add_callback(self._acked)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=5)

    def _next_partition(self, producer: Any, i: int) -> tuple[str, int]:
        """Round-robin over every partition the scenario has now that the producer already knows of (a new
        partition is used once the producer's metadata shows it)."""
        with self._lock:
            counts = dict(self.partitions)
        tps = []
        for t in sorted(counts):
            name = self.kafka_topic[t]
            known = producer.partitions_for(name) or set()
            tps += [(name, p) for p in range(counts[t]) if p < self.initial_partitions[t] or p in known]
        return tps[i % len(tps)]

    def _acked(self, md: Any) -> None:
        with self._lock:
            self.produced.append(
                (now_ms(), self.scenario_topic.get(md.topic, md.topic), md.partition, md.offset)
            )

    def _sample_owners(self) -> None:
        client = connect(self.zk_connect, auth=self.auth)
        try:
            while not self._stop.wait(OWNER_SAMPLE_S):
                ts = now_ms()
                try:
                    owners = registry.read_owners(client, self.group)
                except Exception:  # a sample lost to a ZooKeeper fault (leader kill) is just skipped
                    continue
                with self._lock:
                    self.samples.extend(
                        (ts, self.scenario_topic.get(t, t), p, o) for (t, p), o in sorted(owners.items())
                    )
        finally:
            client.stop()
            client.close()

    def _restart_node(self, node: NodeProcess) -> None:
        t = time.monotonic()
        try:
            # As a broker of the era, the restarted node cannot register while the killed process's ephemeral
            # /brokers/ids/1 lives on: wait for ZooKeeper to expire that session first.
            client = connect(self.zk_connect, auth=self.auth)
            try:
                deadline = time.monotonic() + NODE_RESTART_TIMEOUT_S
                # A zk-leader-kill can land in this wait: ride out its ConnectionLoss (kazoo reconnects on the
                # same session) instead of ending this thread with the node never restarted.
                while (
                    zk_retry.call(
                        registry.read_broker, client, NODE_ID,
                        policy=zk_retry.zk_operation(deadline_s=max(1.0, deadline - time.monotonic())),
                    )
                    is not None
                ):  # fmt: skip
                    if time.monotonic() > deadline or self._stop.is_set():
                        raise RunnerError(f"/brokers/ids/{NODE_ID} of the killed node did not expire")
                    time.sleep(0.1)
            finally:
                client.stop()
                client.close()
            node.start()
        except ZkcoordError as exc:
            self.runner_rows.append(
                {"ts_ms": now_ms(), "kind": "churn", "member": None, "topic": None, "partition": None,
                 "offset": None, "generation": None,
                 "detail": {"event": "coordinator-restart", "applied": False, "reason": str(exc)[:500]}}
            )  # fmt: skip
            return
        self.node_restarts.append(int((time.monotonic() - t) * 1000))

    def _background(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # --- churn ---------------------------------------------------------------------------------------------

    def _live(self) -> list[MemberProc]:
        return [m for m in self.slots if m.ended_ms is None and m.alive]

    def _view(self) -> churn.PlayView:
        return churn.PlayView(
            shared=self.sc.shared,
            family=self.proto.family,
            node_started=self.node is not None,
            zk_nodes=len(self.zk.nodes) if self.zk is not None else 0,
            live=tuple(churn.Target(m.name, m.protocol) for m in self._live()),
            session_timeout_ms=self.sc.session_timeout_ms,
        )

    def _churn_row(self, ev: ChurnEvent, member: str | None, **detail: Any) -> None:
        self.runner_rows.append(
            {"ts_ms": now_ms(), "kind": "churn", "member": member, "topic": ev.topic, "partition": None,
             "offset": None, "generation": None, "detail": {"event": ev.kind.value, "at_s": ev.at_s, **detail}}
        )  # fmt: skip

    def _apply(self, ev: ChurnEvent, later: list[tuple[float, int, Callable[[], None]]]) -> bool:
        """Carry out what the churn table decides for `ev` (migration.compare.churn); whether it was applied."""
        return self._carry_out(ev, churn.plan(ev, self._view(), self.rng), later)

    def _carry_out(
        self, ev: ChurnEvent, action: churn.Action, later: list[tuple[float, int, Callable[[], None]]]
    ) -> bool:
        def at(delay_s: float, fn: Callable[[], None]) -> None:
            heapq.heappush(later, (time.monotonic() + delay_s, len(later), fn))

        match action:
            case churn.Skip(reason):
                self._churn_row(ev, None, applied=False, reason=reason)
                return False
            case churn.SpawnMembers(count, protocol):
                run = self.sc.protocol(protocol) if protocol is not None else None
                names = [self._spawn(run).name for _ in range(count)]
                self._churn_row(ev, names[0] if len(names) == 1 else None, members=names, applied=True)
            case churn.GrowTopic(topic, partitions):
                client = connect(self.zk_connect, auth=self.auth)
                try:
                    before, _ = increase_partitions(client, self.kafka_topic[topic], partitions)
                except PartitionIncreaseError as exc:
                    self._churn_row(ev, None, applied=False, partitions=partitions, reason=str(exc))
                    return False
                finally:
                    client.stop()
                    client.close()
                with self._lock:
                    self.partitions[topic] = partitions
                self._churn_row(ev, None, applied=True, partitions=partitions, before=before,
                                how="/brokers/topics replica assignment grown (kafka-topics --alter)")  # fmt: skip
            case churn.KillZkLeader(restart_after_s):
                zk = self.zk
                assert zk is not None
                i = zk.leader()
                zk.kill_node(i)
                self._churn_row(ev, None, applied=True, node=i)
                at(restart_after_s, lambda: zk.restart_node(i))
            case churn.KillCoordinator():
                node = self.node
                assert node is not None
                node.kill9()
                self._churn_row(ev, None, applied=True, how="SIGKILL, restarted at once")
                # Restarting takes seconds (a new process registering in ZooKeeper); the schedule goes on meanwhile.
                self._background(lambda: self._restart_node(node), f"restart-node-{self.run_id}")
            case churn.ReplaceMember(name, protocol):
                # Stop, then start: the successor joins only once its predecessor has left the group (a clean
                # leave, SIGKILL after the stop timeout), as an operator's rolling restart does. Later events wait.
                target = self._member(name)
                slot = self.slots.index(target)
                t = time.monotonic()
                target.stop("replace")
                successor = self._spawn(self.sc.protocol(protocol), slot=slot)
                self._churn_row(ev, name, applied=True, old_protocol=target.protocol, new_protocol=protocol,
                                new_member=successor.name, stop_ms=int((time.monotonic() - t) * 1000))  # fmt: skip
            case churn.LeaveMember(name):
                self._churn_row(ev, name, applied=True)
                threading.Thread(target=self._member(name).stop, args=("leave",), daemon=True).start()
            case churn.CrashMember(name):
                self._churn_row(ev, name, applied=True)
                self._member(name).kill()
            case churn.ExpireSession(name, detail):
                self._member(name).signal(signal.SIGUSR1)  # the member expires its own session on the server
                self._churn_row(ev, name, applied=True, **detail)
            case churn.SuspendMember(name, resume_after_s, detail):
                target = self._member(name)
                target.signal(signal.SIGSTOP)
                self._churn_row(ev, name, applied=True, **detail)
                at(resume_after_s, lambda: target.signal(signal.SIGCONT))
        return True

    def _member(self, name: str) -> MemberProc:
        return next(m for m in self.members if m.name == name)

    # --- the play ------------------------------------------------------------------------------------------

    def _consumed(self) -> set[tuple[str, int, int]]:
        out: set[tuple[str, int, int]] = set()
        for m in self.members:
            m.read_new()
            out.update((r["topic"], r["partition"], r["offset"]) for r in m.rows if r["kind"] == "consume")
        return out

    def run(self) -> PlayResult:
        self._start_node()
        self._create_topics()
        self.t0 = time.monotonic()
        self.started_ms = now_ms()
        for run in self.sc.initial_slots() if self.sc.shared else [self.proto] * self.proto.members:
            self._spawn(run)
        self._background(self._produce, f"produce-{self.run_id}")
        if self.sc.shared or self.proto.family is Family.LEGACY:
            self._background(self._sample_owners, f"owners-{self.run_id}")
        later: list[tuple[float, int, Callable[[], None]]] = []
        events = list(self.sc.churn)
        applied = 0
        end = self.t0 + self.sc.duration_s
        last_tick = self.t0
        while True:
            now = time.monotonic()
            while later and later[0][0] <= now:
                heapq.heappop(later)[2]()
            while events and self.t0 + events[0].at_s <= now:
                applied += self._apply(events.pop(0), later)
            self.tick(now - last_tick)
            last_tick = now
            if now >= end and not events:
                break
            for m in self.members:
                m.read_new()
            time.sleep(0.05)
        while later:  # resume anything still paused, restart any killed ZooKeeper node
            heapq.heappop(later)[2]()
        # Drain: give the group a bounded time to consume what was produced.
        for t in self._threads[:1]:
            t.join(DRAIN_TIMEOUT_S)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            with self._lock:
                produced = {(t, p, o) for _, t, p, o in self.produced}
            if produced <= self._consumed():
                break
            time.sleep(0.2)
        return self._finish(applied)

    def close(self) -> None:
        """Stop members (clean leave in parallel, then SIGKILL stragglers), background threads and the node."""
        live = [m for m in self.members if m.alive]
        stoppers = [threading.Thread(target=m.stop, args=("stop",), daemon=True) for m in live]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(STOP_TIMEOUT_S + 12)
        for m in self.members:
            if m.alive:
                m.kill()
        self._stop.set()
        for t in self._threads:
            t.join(10)
        if self.node is not None:
            self.node.stop()

    def _finish(self, applied: int) -> PlayResult:
        # From here members are stopped on purpose: their final releases are not ownership gaps.
        stopping_ms = now_ms()
        self.close()
        for m in self.members:
            m.read_new()
        ended_ms = now_ms()
        rows = self._merged_rows(ended_ms)
        writer = TraceWriter(
            self.run_dir,
            RunMeta(self.run_id, self.sc.name, self.label, self.proto.strategy, self.started_ms,
                    extra={"run_index": self.run_index, "group": self.group, "source": "live",
                           "member_protocols": {m.name: m.protocol for m in self.members}}),
        )  # fmt: skip
        for r in rows:
            writer.emit(r["ts_ms"], EventKind(r["kind"]), member=r["member"], topic=r["topic"],
                        partition=r["partition"], offset=r["offset"], generation=r["generation"],
                        detail=r["detail"])  # fmt: skip
        produced = {(t, p, o) for _, t, p, o in self.produced}
        consumed_rows = [r for r in rows if r["kind"] == "consume"]
        consumed = {(r["topic"], r["partition"], r["offset"]) for r in consumed_rows}
        lost = len(produced - consumed)
        overlaps = owner_overlaps(self.samples)
        summary = {"produced": len(produced), "consumed_unique": len(consumed & produced),
                   "consumed_total": len(consumed_rows), "lost": lost, "owner_samples": len(self.samples),
                   "owner_overlaps": overlaps, "churn_applied": applied, "coordinator_restart_ms": self.node_restarts,
                   "members": {m.name: m.how for m in self.members}}  # fmt: skip
        writer.close(ended_ms, extra={"summary": summary}, stopping_ms=stopping_ms)
        table = pa.table(
            {"ts_ms": pa.array([s[0] for s in self.samples], pa.int64()),
             "topic": pa.array([s[1] for s in self.samples], pa.string()),
             "partition": pa.array([s[2] for s in self.samples], pa.int32()),
             "owner": pa.array([s[3] for s in self.samples], pa.string())}
        )  # fmt: skip
        pq.write_table(table, self.run_dir / OWNERS_FILE)
        return PlayResult(self.run_dir, self.label, len(produced), len(consumed & produced),
                          len(consumed_rows), lost, len(self.samples), overlaps, applied)  # fmt: skip

    def _merged_rows(self, ended_ms: int) -> list[dict[str, Any]]:
        rows: list[Mapping[str, Any]] = list(self.runner_rows)
        rows += [{"ts_ms": ts, "kind": "produce", "member": None, "topic": t, "partition": p, "offset": o,
                  "generation": None, "detail": None} for ts, t, p, o in self.produced]  # fmt: skip
        for m in self.members:
            # A killed member never reports its release: its ownership ends when it stopped working.
            end = m.ended_ms if m.ended_ms is not None else ended_ms
            rows += member_trace_rows(m.name, m.rows, end, m.how or "end")
        return number_rounds(in_trace_order(rows))


# ----------------------------------------------------------------------------------------------------------------
# entry points


def check_bootstrap_listener(
    brokers: Mapping[int, BrokerRegistration], bootstrap: str, protocol: str, command_config: str | None
) -> None:
    """Refuse a given node whose registered listener at `bootstrap` is not of `protocol`, the security protocol
    the runner's clients and members would speak: kafka-python speaking PLAINTEXT to a TLS port only retries its
    bootstrap until it times out, so without this the run would end in a bare timeout. An address no
    registration names (an alias, a load balancer) is not judged here."""
    host, _, port = bootstrap.rpartition(":")
    for broker_id, reg in brokers.items():
        protocols = dict(reg.listener_security_protocol_map)
        for endpoint in reg.endpoints:
            name, ep_host, ep_port = parse_endpoint(endpoint)
            registered = protocols.get(name, name)
            if (ep_host, str(ep_port)) != (host, port) or registered == protocol:
                continue
            given = (
                f"--command-config {command_config} says security.protocol={protocol}"
                if command_config
                else "without --command-config they speak PLAINTEXT"
            )
            raise RunnerError(
                f"--bootstrap {bootstrap} is broker {broker_id}'s {registered} listener (registered in "
                f"/brokers/ids/{broker_id}), but the runner's clients and members would not speak {registered}: "
                f"{given}; give --command-config FILE with security.protocol={registered} and its credentials "
                "(docs/security.md)"
            )


@contextlib.contextmanager
def _zookeeper(scenario: Scenario, given: str | None, base: Path) -> Iterator[tuple[str, ZooKeeper | None]]:
    if given:
        yield given, None
        return
    needs_ensemble = any(e.kind is ChurnKind.ZK_LEADER_KILL for e in scenario.churn)
    with ZooKeeper.start(3 if needs_ensemble else 1, base_dir=base / "zookeeper") as zk:
        yield zk.hosts, zk


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    zk_connect: str | None = None,
    zk_security: ZkSecurityFlags = NO_FLAGS,
    bootstrap: str | None = None,
    command_config: str | None = None,
    runs: int = 1,
    progress: bool = True,
    protocols: Sequence[str] | None = None,
    on_result: Callable[[PlayResult], None] | None = None,
) -> list[Path]:
    """Play `scenario` `runs` times for each of its protocols (or only `protocols`); returns the run directories
    (out_dir/<scenario>/<protocol>/run-<i>). `zk_security`: how every ZooKeeper client of the plays (the
    runner's, the members', the nodes') logs in to `zk_connect`."""
    if runs < 1:
        raise RunnerError("runs must be >= 1")
    if zk_security.given and not zk_connect:
        raise RunnerError("ZooKeeper security settings need a given ZooKeeper (the local one is open)")
    auth = zk_security.load()  # a bad JAAS file is refused before anything starts
    if command_config is not None:
        if bootstrap is None:
            raise RunnerError(
                "--command-config is for a given node (--bootstrap); the runner's own node is open"
            )
        read_command_config(command_config)  # likewise a bad properties file
    if bootstrap is not None and zk_connect:
        protocol = read_command_config(command_config).get("security_protocol", "PLAINTEXT")
        client = connect(zk_connect, auth=auth)
        try:
            brokers = registry.read_brokers(client)
        finally:
            client.stop()
            client.close()
        check_bootstrap_listener(brokers, bootstrap, protocol, command_config)
    chosen = [p for p in scenario.protocols if protocols is None or p.protocol in protocols]
    if scenario.shared:  # one play holds every protocol's members: the first run stands for the group
        if protocols is not None:
            raise RunnerError(
                f"scenario {scenario.name!r} plays every protocol in one group: no protocol choice"
            )
        chosen = list(scenario.protocols[:1])
    if not chosen:
        raise RunnerError(f"none of {list(protocols or [])} is in scenario {scenario.name!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dirs: list[Path] = []
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zkcoord-compare-")))
        hosts, zk = stack.enter_context(_zookeeper(scenario, zk_connect, work))
        total = runs * len(chosen) * scenario.duration_s
        bar = _progress(progress, total)
        stack.enter_context(bar)
        for i in range(runs):
            for proto in chosen:
                label = MIXED if scenario.shared else proto.protocol
                run_dir = out / scenario.name / label / f"run-{stamp}-{i}"
                bar.describe(f"{label} run {i + 1}/{runs}")
                play = _Play(scenario, proto, i, run_dir, hosts, zk, bootstrap, work, bar.advance,
                             zk_security, auth, command_config)  # fmt: skip
                try:
                    result = play.run()
                finally:
                    play.close()
                dirs.append(run_dir)
                bar.note(
                    f"{label} run {i + 1}: produced {result.produced}, consumed {result.consumed_unique}"
                    f" ({result.consumed_total - result.consumed_unique} again), lost {result.lost}"
                )
                if on_result is not None:
                    on_result(result)
    return dirs


class _Bar:
    def __init__(self, enabled: bool, total: float) -> None:
        self.progress: Any = None
        if enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), transient=False
            )
            self.task = self.progress.add_task("compare run", total=total)

    def __enter__(self) -> _Bar:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def describe(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=text)

    def advance(self, seconds: float) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, seconds)

    def note(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text)


def _progress(enabled: bool, total: float) -> _Bar:
    return _Bar(enabled, total)


def summary_rows(results: Sequence[PlayResult]) -> list[dict[str, Any]]:
    return [
        {"protocol": r.protocol, "run_dir": str(r.run_dir), "produced": r.produced,
         "consumed": r.consumed_unique, "duplicates": r.consumed_total - r.consumed_unique, "lost": r.lost,
         "owner_samples": r.owner_samples, "owner_overlaps": r.owner_overlaps}
        for r in results
    ]  # fmt: skip


def run_builtin_demo(
    out_dir: str | Path,
    *,
    progress: bool = True,
    zk_connect: str | None = None,
    zk_security: ZkSecurityFlags = NO_FLAGS,
    bootstrap: str | None = None,
    command_config: str | None = None,
    rolling_migration: bool = False,
) -> tuple[list[Path], list[dict[str, Any]]]:
    """The built-in demo scenario, once per protocol, and with `rolling_migration` one more play, the built-in
    rolling-migration in one mixed group: (run directories, one summary row per run). `command_config`: the
    client security properties for a given (`bootstrap`) node."""
    from migration.compare.scenario import builtin_scenario

    results: list[PlayResult] = []
    dirs = run_scenario(
        builtin_scenario("demo"),
        out_dir,
        zk_connect=zk_connect,
        zk_security=zk_security,
        bootstrap=bootstrap,
        command_config=command_config,
        progress=progress,
        on_result=results.append,
    )
    if rolling_migration:
        dirs += run_scenario(
            builtin_scenario("rolling-migration"),
            out_dir,
            zk_connect=zk_connect,
            zk_security=zk_security,
            bootstrap=bootstrap,
            command_config=command_config,
            progress=progress,
            on_result=results.append,
        )
    return dirs, summary_rows(results)


def run_command(
    spec: str,
    out_dir: str | Path,
    *,
    zk_connect: str | None = None,
    zk_security: ZkSecurityFlags = NO_FLAGS,
    bootstrap: str | None = None,
    command_config: str | None = None,
    runs: int = 1,
    protocols: Sequence[str] | None = None,
    progress: bool = True,
) -> int:
    """`zkcoord compare run SCENARIO`: play it, print one row per run; exit status 1 when any record was lost."""
    from rich.console import Console
    from rich.table import Table

    from migration.compare.scenario import resolve_scenario

    results: list[PlayResult] = []
    run_scenario(resolve_scenario(spec), out_dir, zk_connect=zk_connect, zk_security=zk_security,
                 bootstrap=bootstrap, command_config=command_config, runs=runs,
                 progress=progress, protocols=protocols, on_result=results.append)  # fmt: skip
    table = Table(title=f"compare run {spec}: traces under {out_dir}", title_justify="left")
    columns = ("protocol", "produced", "consumed", "duplicates", "lost", "owner_overlaps", "run_dir")
    for c in columns:
        table.add_column(c, justify="left" if c in ("protocol", "run_dir") else "right")
    rows = summary_rows(results)
    for r in rows:
        table.add_row(*(str(r[c]) for c in columns))
    Console(width=200).print(table)
    return 1 if any(r["lost"] or r["owner_overlaps"] for r in rows) else 0
