"""Three generations in one mixed group (issue 24) against real ZooKeeper and one bridged `zkcoord serve --zk`: a
`zkcoord legacy consume` process (a 0.8-era ZooKeeper member), a kafka-python classic member and confluent-kafka
`group.protocol=consumer` members (KIP-848, each in its own process) share one group under a paced producer; then
the legacy and the classic member are replaced one by one by consumer-protocol members, and one of those crashes
(kill -9: its partitions move when its session expires). Then the coordinator itself is killed -9 and started again
under the three generations (its consumer-protocol members are restored from ZooKeeper, not released); and a
static consumer-protocol member is restarted beside a legacy member (nothing moves). An observer
samples every
10 ms the owner znodes and what every broker-protocol member holds (kafka-python's callbacks, the consumer-protocol
processes' printed callbacks): no partition is held by two members at once (a legacy member holds what its owner
znodes say: it fetches only partitions whose znode it created), and every acknowledged record is consumed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import bridged_node_flags
from zkcoord.bridge.mixed_policy import is_classic_id
from zkcoord.legacy.ids import consumer_of_thread
from zkcoord.local.node import NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.handover import HandoverSampler, Sample
from zkcoord.testing.members import KafkaPythonMember
from zkcoord.testing.producers import PacedProducer
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.session import SessionFault, connect, ensure_chroot

pytestmark = pytest.mark.e2e

CONSUMER = Path(__file__).with_name("consumer_protocol_member_proc.py")
PARTITIONS = 6
COMMIT_INTERVAL_MS = 200


@pytest.fixture(scope="module")
def cluster(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, NodeProcess]]:
    """(ZooKeeper connect string, node) of one bridged node with fast consumer-protocol heartbeats (a test that
    kills the node starts it again on the same data dir and port)."""
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/mixed3-{uuid.uuid4().hex[:8]}")
    flags = bridged_node_flags(
        connect_string,
        1,
        "--group.consumer.session.timeout.ms=6000",
        "--group.consumer.heartbeat.interval.ms=250",
    )
    node = NodeProcess(tmp_path_factory.mktemp("mixed3-node"), flags)
    node.start()
    try:
        yield connect_string, node
    finally:
        node.stop()


class Process:
    """A member process; `lines` collects its stdout, a pump thread applies `on_line` to each."""

    def __init__(self, cmd: list[str], name: str, on_line: Any = None) -> None:
        self.name = name
        self.lines: list[str] = []
        self._on_line = on_line
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            line = text.rstrip("\n")
            self.lines.append(line)
            if self._on_line is not None:
                self._on_line(self.name, line)

    def leave(self) -> int:
        """SIGTERM: a graceful close (revocation, commit, leave); killed after 20 s at the latest."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait(10)
        self._pump.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class Holdings:
    """What each broker-protocol member holds now, and every record it was handed, under one lock."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.held: dict[str, frozenset[TopicPartition]] = {}
        self.consumed: set[tuple[int, int]] = set()

    def line(self, member: str, text: str) -> None:
        """A consumer-protocol process's line: `A ns p,..` assigned, `R ns p,..` revoked, `M ns p offset`."""
        kind, _ns, *rest = text.split(" ", 2)
        with self.lock:
            if kind == "M":
                p, o = rest[0].split()
                self.consumed.add((int(p), int(o)))
                return
            parts = {TopicPartition(self.topic, int(p)) for p in (rest[0] if rest else "").split(",") if p}
            mine = self.held.get(member, frozenset())
            self.held[member] = mine | parts if kind == "A" else mine - parts

    def snapshot(self, classic: dict[str, KafkaPythonMember]) -> dict[str, frozenset[TopicPartition]]:
        out = {
            m.name: frozenset(TopicPartition(self.topic, p) for p in m.held()) for m in list(classic.values())
        }
        with self.lock:
            out.update(self.held)
        return out


def legacy_owned(sample: Sample, group: str) -> frozenset[TopicPartition]:
    """The partitions whose owner znode a legacy (ZooKeeper) member holds in this sample."""
    return frozenset(
        tp for tp, (th, _) in sample.owners.items() if not is_classic_id(group, consumer_of_thread(th))
    )


def overlaps(samples: list[Sample], group: str) -> list[tuple[float, TopicPartition, tuple[str, ...]]]:
    """Every (time, partition, holders) where two members held one partition: two broker-protocol members, or
    one of them and a legacy member (by its owner znode)."""
    out = []
    for s in samples:
        holders: dict[TopicPartition, list[str]] = {tp: ["legacy"] for tp in legacy_owned(s, group)}
        for m, tps in s.holdings.items():
            for tp in tps:
                holders.setdefault(tp, []).append(m)
        out.extend((s.at, tp, tuple(ms)) for tp, ms in sorted(holders.items()) if len(ms) > 1)
    return out


class ThreeGenerations:
    """One topic and mixed group under a paced producer, its member processes and the observer: every 10 ms the
    owner znodes and what each broker-protocol member holds."""

    def __init__(self, zk_connect: str, bootstrap: str) -> None:
        tag = uuid.uuid4().hex[:6]
        self.zk_connect, self.bootstrap = zk_connect, bootstrap
        self.topic, self.group = f"three-{tag}", f"mixed-three-{tag}"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(self.topic, num_partitions=PARTITIONS, replication_factor=1)])
        admin.close()
        self.zk = connect(zk_connect)
        self.state = Holdings(self.topic)
        self.classic: dict[str, KafkaPythonMember] = {}
        self.everyone: list[KafkaPythonMember] = []
        self.procs: dict[str, Process] = {}
        self.gone: list[Process] = []
        self.producer = PacedProducer(bootstrap, self.topic, per_second=200, round_robin=True).start()
        self.sampler = HandoverSampler(
            self.zk, self.group, {self.topic: PARTITIONS}, holdings=lambda: self.state.snapshot(self.classic)
        )

    def legacy(self, name: str) -> None:
        cmd = [sys.executable, "-m", "zkcoord", "legacy", "consume", "--zk", self.zk_connect, "--group",
               self.group, "--topic", self.topic, "--from-beginning", "--property",
               f"auto.commit.interval.ms={COMMIT_INTERVAL_MS}", "--property", "zookeeper.session.timeout.ms=6000"]  # fmt: skip
        self.procs[name] = Process(cmd, name)

    def consumer(self, name: str, instance_id: str | None = None) -> None:
        static = [instance_id] if instance_id is not None else []
        self.procs[name] = Process(
            [sys.executable, str(CONSUMER), self.bootstrap, self.group, self.topic, name, *static],
            name,
            self.state.line,
        )

    def kafka_python(self, name: str, **config: Any) -> None:
        # A retriable error (the coordinator killed and restarted: ECONNREFUSED from poll) is retried, as an
        # application does; any other ends the member and fails the test.
        member = KafkaPythonMember(self.bootstrap, self.group, self.topic, name,
                                   config={"metadata_max_age_ms": 1000, **config}, poll_timeout_s=0.2,
                                   retry_retriable=True)  # fmt: skip
        self.classic[name] = member.start()
        self.everyone.append(member)

    def settled(self, legacy_members: int) -> bool:
        """Every partition held exactly once (legacy by owner znode), every live member holding one."""
        if not self.sampler.samples:
            return False
        last = self.sampler.samples[-1]
        legacy_held = legacy_owned(last, self.group)
        live = {m: tps for m, tps in last.holdings.items() if m in self.classic or m in self.procs}
        held = [tps for m, tps in live.items()]
        brokers_members = len(self.classic) + sum(1 for n in self.procs if n.startswith("n"))
        return (
            len(legacy_held) + sum(len(h) for h in held) == PARTITIONS
            and set().union(legacy_held, *held) == {TopicPartition(self.topic, p) for p in range(PARTITIONS)}
            and sum(1 for h in held if h) == brokers_members
            and len({consumer_of_thread(th) for tp, (th, _) in last.owners.items() if tp in legacy_held})
            == legacy_members
        )

    def legacy_first(self) -> None:
        """The producer under way, then the legacy member l1 alone, holding every partition."""
        wait_for(lambda: len(self.producer.acked) > 20, 20, "the producer's first acknowledgements")
        self.legacy("l1")
        self.change("the legacy member holds every partition", 1)

    def three_generations(self, **classic: Any) -> None:
        """l1 alone, then the kafka-python member k1 (`classic`: its settings), then the consumer member n1."""
        self.legacy_first()
        self.kafka_python("k1", **classic)
        self.change("a kafka-python classic member joined the legacy member", 1)
        self.consumer("n1")
        self.change("three generations in one group", 1)

    def change(self, what: str, legacy_members: int) -> None:
        try:
            wait_for(lambda: self.settled(legacy_members), 45, what, 0.05)
        except SessionFault:
            last = self.sampler.samples[-1]
            owners = {tp.partition: th for tp, (th, _czxid) in sorted(last.owners.items())}
            held = {m: sorted(tp.partition for tp in tps) for m, tps in last.holdings.items()}
            raise AssertionError(f"{what}: not settled; owners {owners}; holdings {held}") from None
        self.sampler.wait_samples(5, 10)
        assert overlaps(self.sampler.samples, self.group) == [], what

    def consumed(self) -> set[tuple[int, int]]:
        """Every (partition, offset) some member handed out: the consumer-protocol processes' lines, kafka-python's
        records, the printed values of the processes (the legacy member prints values only)."""
        by_value = {v: po for po, v in self.producer.acked_records().items()}
        out = set(self.state.consumed)
        for m in self.everyone:
            out.update(m.consumed)
        for p in [*self.procs.values(), *self.gone]:
            out.update(by_value[v.encode()] for v in list(p.lines) if v.encode() in by_value)
        return out

    def close(self) -> None:
        """Member processes first: nothing may outlive the test, whatever a later step raises (a producer
        stopped while its node is down)."""
        try:
            for p in [*self.procs.values(), *self.gone]:
                p.kill()
            for m in self.classic.values():
                m.stop()
        finally:
            try:
                self.producer.stop()
                self.sampler.stop()
            finally:
                self.zk.stop()
                self.zk.close()


def test_legacy_classic_and_consumer_protocol_members_in_one_group_then_consumer_only(
    cluster: tuple[str, NodeProcess],
) -> None:
    zk_connect, node = cluster
    run = ThreeGenerations(zk_connect, node.bootstrap)
    state, procs, classic, gone, producer, sampler = (
        run.state, run.procs, run.classic, run.gone, run.producer, run.sampler
    )  # fmt: skip
    try:
        with sampler:
            run.three_generations()
            # Migrated to consumer-protocol members only, one member at a time.
            run.consumer("n2")
            run.change("a second consumer-protocol member joined", 1)
            l1 = procs.pop("l1")
            assert l1.leave() == 0
            gone.append(l1)
            run.change("the legacy member left", 0)
            run.consumer("n3")
            run.change("a third consumer-protocol member joined", 0)
            classic.pop("k1").stop()
            run.change("the classic member left: consumer-protocol members only", 0)
            # A consumer-protocol member crashes (kill -9: no leave): its partitions move once its session
            # (group.consumer.session.timeout.ms, 6 s) expires, not before.
            n3 = procs.pop("n3")
            n3.kill()
            with state.lock:
                state.held.pop("n3", None)  # a dead process holds nothing
            gone.append(n3)
            run.change("a consumer-protocol member crashed", 0)
            assert sampler.median_interval_s() <= 0.02
        producer.stop()
        assert producer.failed == []
        acked = producer.acked
        wait_for(lambda: acked <= run.consumed(), 30, "every acknowledged record consumed", 0.1)
        assert len(acked) > 500
        assert overlaps(sampler.samples, run.group) == []
    finally:
        run.close()


def test_coordinator_killed_and_restarted_under_three_generations(cluster: tuple[str, NodeProcess]) -> None:
    """kill -9 of the coordinator while a legacy, a classic and a consumer-protocol member share the group, then
    a start on the same data dir: the new coordinator has no record of the consumer-protocol member, restores it
    from ZooKeeper and keeps its owner znodes until it heartbeats again (before that fix, the load released them
    at once and the legacy member took them while the member still consumed). No partition held twice, every
    acknowledged record consumed (records the producer could not send while the node was down are not acked)."""
    zk_connect, node = cluster
    run = ThreeGenerations(zk_connect, node.bootstrap)
    try:
        with run.sampler:
            # A session that outlasts the node's absence (its ZooKeeper session's end, then a start): kafka-python
            # may take several seconds to find the restarted coordinator, and a classic member removed by its
            # session timeout meanwhile still consumes (the classic protocol's own zombie window, not this test's).
            run.three_generations(session_timeout_ms=30000)
            before = run.producer.acked
            wait_for(lambda: before <= run.consumed(), 20, "the records before the crash consumed", 0.1)
            node.kill9()
            # Its ZooKeeper session ends (4 s) before a node of the same id may register again.
            wait_for(
                lambda: run.zk.exists("/zkcoord/brokers/1") is None, 15, "the killed node's session ended"
            )
            node.start()
            # Every member is back at work: records acknowledged by the new coordinator are consumed.
            wait_for(
                lambda: len(run.producer.acked) > len(before) + 100, 30, "acknowledgements after the restart"
            )
            after = run.producer.acked
            wait_for(lambda: after <= run.consumed(), 30, "the records after the restart consumed", 0.1)
            run.change("the group after the coordinator's restart", 1)
            # n1 has no record: the new coordinator restored it from ZooKeeper, then its heartbeat resumed it.
            told = [line for line in list(node.output) if run.group in line]
            assert any("restored from ZooKeeper" in line for line in told)
            assert any("resumed at epoch" in line for line in told)
            assert run.sampler.median_interval_s() <= 0.02
        run.producer.stop()
        acked = run.producer.acked
        wait_for(lambda: acked <= run.consumed(), 30, "every acknowledged record consumed", 0.1)
        assert overlaps(run.sampler.samples, run.group) == []
    finally:
        run.close()


def test_consumer_group_describe_of_a_mixed_group(cluster: tuple[str, NodeProcess]) -> None:
    """confluent-kafka's AdminClient describes a mixed group by ConsumerGroupDescribe (librdkafka falls back to
    DescribeGroups only on GROUP_ID_NOT_FOUND, the answer before): the legacy, the classic and the
    consumer-protocol member, each with what it holds. DescribeGroups and ListGroups stay the classic group's."""
    zk_connect, node = cluster
    run = ThreeGenerations(zk_connect, node.bootstrap)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    try:
        with run.sampler:
            run.three_generations()
            last = run.sampler.samples[-1]
            (legacy_id,) = {
                consumer_of_thread(th)
                for tp, (th, _) in last.owners.items()
                if tp in legacy_owned(last, run.group)
            }
            expected = {
                legacy_id: sorted(tp.partition for tp in legacy_owned(last, run.group)),
                **{m: sorted(tp.partition for tp in tps) for m, tps in last.holdings.items() if tps},
            }

            def described() -> Any:
                return admin.describe_consumer_groups([run.group])[run.group].result(20)

            def shown(d: Any) -> dict[str, list[int]]:
                return {
                    m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                    for m in d.members
                }

            wait_for(
                lambda: shown(described()) == expected, 20, f"ConsumerGroupDescribe showing {expected}", 0.2
            )
            d = described()
            assert d.type == ConsumerGroupType.CONSUMER
            assert d.state == ConsumerGroupState.STABLE
            assert d.partition_assignor == "range"
            for m in d.members:  # every member's target is what it holds: nothing is moving
                assert m.target_assignment is not None
                assert (
                    sorted(tp.partition for tp in m.target_assignment.topic_partitions)
                    == expected[m.client_id]
                )
            # DescribeGroups (kafka-python's admin) and ListGroups stay those of the classic group.
            kp = KafkaAdminClient(bootstrap_servers=node.bootstrap)
            try:
                info = dict(kp.describe_groups([run.group])[run.group])
            finally:
                kp.close()
            assert (info["group_state"], info["protocol_type"], info["protocol_data"]) == (
                "Stable",
                "consumer",
                "range",
            )
            assert [m["client_id"] for m in info["members"]] == ["k1"]
            # A bridged id nobody uses is not found (librdkafka then falls back to DescribeGroups: Dead, no
            # members), and describing it writes nothing: no fence znode appears.
            nobody = f"{run.group}-nobody"
            assert admin.describe_consumer_groups([nobody])[nobody].result(20).members == []
            assert run.zk.exists(f"/zkcoord/mixed-groups/{nobody}") is None
            assert run.zk.exists(f"/zkcoord/mixed-groups/{run.group}") is not None
            listed = admin.list_consumer_groups().result(20).valid
            assert [g.type for g in listed if g.group_id == run.group] == [ConsumerGroupType.CLASSIC]
    finally:
        run.close()


def test_a_restarted_static_consumer_member_gets_its_partitions_back_and_the_legacy_side_does_not_move(
    cluster: tuple[str, NodeProcess],
) -> None:
    """A static consumer-protocol member (`group.instance.id`) beside a legacy member is closed (epoch -2) and
    started again under a new member id: it takes its predecessor's place within its session, so its ids znode,
    its owner znodes and the legacy member's partitions never change (every 10 ms sample) and it is handed
    exactly what it held before."""
    zk_connect, node = cluster
    run = ThreeGenerations(zk_connect, node.bootstrap)
    ids_path = f"/consumers/{run.group}/ids"
    try:
        with run.sampler:
            run.legacy_first()
            run.consumer("n1", "static-1")
            run.change("a static consumer-protocol member joined the legacy member", 1)
            ids_before = sorted(run.zk.get_children(ids_path))
            last = run.sampler.samples[-1]
            legacy_before, owners_before = legacy_owned(last, run.group), dict(last.owners)
            with run.state.lock:
                held_before = run.state.held["n1"]
            assert held_before and legacy_before
            restart_from = len(run.sampler.samples)
            n1 = run.procs.pop("n1")
            assert n1.leave() == 0  # close: a static leave (epoch -2), its share kept for its session
            with run.state.lock:
                run.state.held.pop("n1", None)
            run.gone.append(n1)
            run.consumer("n1b", "static-1")  # the same instance, a new process and member id
            run.change("the static member restarted", 1)
            with run.state.lock:
                assert run.state.held["n1b"] == held_before
            assert sorted(run.zk.get_children(ids_path)) == ids_before
            during = run.sampler.samples[restart_from:]
            assert [s.at for s in during if legacy_owned(s, run.group) != legacy_before] == []
            assert [s.at for s in during if dict(s.owners) != owners_before] == []  # no znode re-created
            assert any("takes the place of" in line for line in list(node.output) if run.group in line)
        run.producer.stop()
        acked = run.producer.acked
        wait_for(lambda: acked <= run.consumed(), 30, "every acknowledged record consumed", 0.1)
        assert overlaps(run.sampler.samples, run.group) == []
    finally:
        run.close()
