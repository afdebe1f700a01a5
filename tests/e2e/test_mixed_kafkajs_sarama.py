"""kafkajs and sarama members in a mixed group (issue 23) against real ZooKeeper and one bridged `zkcoord serve`:
fast zkcoord legacy members, a kafkajs 2.2.4 member with its default assigner (`RoundRobinAssigner`) and a sarama
1.22 member (Debian's package, built by scripts/setup.sh) with its own `range` share a group, each answered in its
own protocol name, under a paced producer. Each joins and consumes its share, the legacy members leave and the two
clients take everything. An observer samples every 10 ms the owner znodes and what each member holds (legacy
members' views; the peers' JSON lines: assigned on SyncGroup, revoked once they stopped fetching). Required: 0 samples with a partition held twice, no record
handed out by a member that did not hold its partition, 0 lost records."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from e2e.conftest import BridgedCluster
from e2e.wire_calls import call_once
from zkcoord.bridge.member import member_offsets
from zkcoord.testing import wait_for
from zkcoord.testing.handover import HandoverSampler
from zkcoord.testing.members import LegacyMember, legacy_config
from zkcoord.testing.producers import PacedProducer
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.session import SessionFault, connect

pytestmark = pytest.mark.e2e

PARTITIONS = 12
SESSION_MS = 6000
HEARTBEAT_MS = 200
COMMIT_INTERVAL_MS = 200
REPO = Path(__file__).resolve().parents[2]
KAFKAJS_MEMBER = Path(__file__).parent / "clients" / "kafkajs_member.js"
SARAMA_MEMBER = REPO / ".peers" / "sarama-member"
NODE_MODULES = REPO / ".npm" / "node_modules"


class Peer:
    """A client member in its own process, read from its JSON lines: `assigned` sets what it holds, `revoked`
    and `closed` clear it, `record` adds a consumed (partition, offset); a record from a partition it does not
    hold at that moment is kept in `stray`."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.held_now: set[int] = set()
        self.consumed: set[tuple[int, int]] = set()
        self.errors: list[Any] = []
        self.protocols: list[str] = []
        self.stray: list[tuple[int, int]] = []
        self.closed = threading.Event()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
        )
        self.thread = threading.Thread(target=self._read, name=f"peer-{name}", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = json.loads(raw)
            event = line["event"]
            with self.lock:
                if event == "assigned":
                    self.held_now = set(line["partitions"])
                    if "protocol" in line:
                        self.protocols.append(line["protocol"])
                elif event in ("revoked", "closed"):
                    self.held_now = set()
                elif event == "record":
                    record = (line["partition"], line["offset"])
                    self.consumed.add(record)
                    if record[0] not in self.held_now:
                        self.stray.append(record)
                elif event in ("crash", "error"):
                    self.errors.append(line)
            if event == "closed":
                self.closed.set()

    def held(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.held_now)

    def stop(self) -> None:
        """SIGTERM: the member leaves the group (LeaveGroup) and says `closed`; killed if it does not exit."""
        self.proc.terminate()
        try:
            wait_for(self.closed.is_set, 30, f"{self.name} closed after its LeaveGroup", 0.05)
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self.thread.join(10)


Member = LegacyMember | Peer


def legacy(cluster: BridgedCluster, group: str, topic: str, name: str) -> LegacyMember:
    config = legacy_config(cluster.zk_connect, group, name, auto_commit_interval_ms=COMMIT_INTERVAL_MS,
                           zookeeper_session_timeout_ms=SESSION_MS)  # fmt: skip
    return LegacyMember(config, {topic: 1}, offsets=member_offsets).start()


def kafkajs(cluster: BridgedCluster, group: str, topic: str, name: str) -> Peer:
    assert (NODE_MODULES / "kafkajs").is_dir(), "kafkajs is missing: run scripts/setup.sh"
    argv = ["node", str(KAFKAJS_MEMBER), cluster.bootstrap, group, topic, name]
    argv += [str(SESSION_MS), str(HEARTBEAT_MS), str(COMMIT_INTERVAL_MS)]
    return Peer(name, argv, {"NODE_PATH": str(NODE_MODULES)})


def sarama(cluster: BridgedCluster, group: str, topic: str, name: str) -> Peer:
    assert SARAMA_MEMBER.is_file(), "the sarama member is not built: run scripts/setup.sh"
    argv = [str(SARAMA_MEMBER), "-bootstrap", cluster.bootstrap, "-group", group, "-topic", topic]
    argv += ["-client-id", name, "-strategy", "range"]  # sarama 1.22 offers one protocol: "range"
    argv += [f"-session-ms={SESSION_MS}", f"-heartbeat-ms={HEARTBEAT_MS}", f"-commit-ms={COMMIT_INTERVAL_MS}"]
    return Peer(name, argv)


def answered_names(cluster: BridgedCluster, group: str) -> dict[str, set[str]]:
    """Client id -> the protocol names the coordinator answered its JoinGroups in (its INFO line per name)."""
    found: dict[str, set[str]] = {}
    pattern = re.compile(
        rf"group={re.escape(group)} member \S+ \(client (\S+)\) answered in protocol '([^']*)'"
    )
    for line in list(cluster.node.output):
        if m := pattern.search(line):
            found.setdefault(m[1], set()).add(m[2])
    return found


def described_protocol(cluster: BridgedCluster, group: str) -> str:
    """The group's protocol as DescribeGroups shows it (only a Stable group shows one)."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    found: dict[str, Any] = {}

    def stable() -> bool:
        found.update(admin.describe_groups([group])[group])
        return bool(found["group_state"] == "Stable")

    try:
        wait_for(stable, 30, f"group {group} Stable", 0.05)
        return str(found["protocol_data"])
    finally:
        admin.close()


def test_kafkajs_and_sarama_members_in_a_mixed_group(bridged_cluster: BridgedCluster) -> None:
    cluster = bridged_cluster
    topic = f"jsgo-{uuid.uuid4().hex[:8]}"
    group = f"mixed-jsgo-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])

    def coordinator_loaded() -> bool:
        with contextlib.suppress(KafkaError):
            return admin.describe_groups([group])[group]["error"] is None
        return False

    # A JoinGroup answered COORDINATOR_LOAD_IN_PROGRESS (the node loads its offsets partitions after it starts)
    # makes kafkajs 2.2.4 crash and restart itself: the test starts its members once the group's is served.
    wait_for(coordinator_loaded, 30, "the group's coordinator elected and loaded", 0.05)
    admin.close()
    zk = connect(cluster.zk_connect)
    members: list[Member] = []
    everyone: list[Member] = []
    producer = PacedProducer(cluster.bootstrap, topic, per_second=200).start()

    def holdings() -> dict[str, frozenset[TopicPartition]]:
        return {m.name: frozenset(TopicPartition(topic, p) for p in m.held()) for m in list(members)}

    def settled() -> bool:
        return sampler.settled([m.held() for m in members], PARTITIONS)

    def change(what: str, step: Callable[[], None]) -> None:
        step()
        try:
            wait_for(settled, 45, what, 0.05)
        except SessionFault:
            held = {m.name: sorted(m.held()) for m in members}
            errors = {m.name: m.errors[-3:] for m in members if isinstance(m, Peer) and m.errors}
            raise AssertionError(f"{what}: not settled; holdings {held}; errors {errors}") from None
        sampler.wait_samples(5, 10)
        assert sampler.held_twice() == [], what

    def join(m: Member) -> None:
        members.append(m)
        everyone.append(m)

    def leave(name: str) -> None:
        m = next(m for m in members if m.name == name)
        members.remove(m)
        m.stop()

    sampler = HandoverSampler(zk, group, {topic: PARTITIONS}, holdings=holdings)
    try:
        with sampler:
            change("two legacy members", lambda: (join(legacy(cluster, group, topic, "l1")),
                                                   join(legacy(cluster, group, topic, "l2"))))  # fmt: skip
            change("kafkajs joins", lambda: join(kafkajs(cluster, group, topic, "js1")))
            change("sarama joins", lambda: join(sarama(cluster, group, topic, "go1")))
            # DescribeGroups shows the group's one name: sarama's range fixes the legacy algorithm to range
            assert described_protocol(cluster, group) == "range"
            change("a legacy member leaves", lambda: leave("l1"))
            change("the last legacy member leaves", lambda: leave("l2"))
            assert {m.name for m in members} == {"js1", "go1"}
            assert all(len(m.held()) == PARTITIONS // 2 for m in members)  # the legacy algorithm: 6 and 6
            assert sampler.median_interval_s() <= 0.02
        producer.stop()
        acked = set(producer.acked)
        wait_for(
            lambda: acked <= set().union(*(m.consumed for m in everyone)), 45, "every record consumed", 0.1
        )
        peers = [m for m in everyone if isinstance(m, Peer)]
        for p in peers:
            assert p.consumed, p.name  # each client consumed its share
            assert p.stray == [], (p.name, p.stray[:10])
        # Each client was answered in its own name, in one group: kafkajs says which (it crashes on a name it
        # does not know); sarama 1.22 does not expose it, so the coordinator's line per answered name is read.
        js = next(p for p in peers if p.name == "js1")
        assert js.protocols and set(js.protocols) == {"RoundRobinAssigner"}, js.protocols
        answered = answered_names(cluster, group)
        assert answered == {"js1": {"RoundRobinAssigner"}, "go1": {"range"}}, answered
    finally:
        producer.stop()
        for m in members:
            with contextlib.suppress(Exception):
                m.stop()
        zk.stop()
        zk.close()
    node_errors = [line for line in cluster.node.output if "ERROR" in line or "refused" in line]
    for p in (m for m in everyone if isinstance(m, Peer)):
        assert not [e for e in p.errors if e["event"] == "crash"], json.dumps(
            [p.name, p.errors, node_errors[-10:]]
        )


def test_a_refused_member_is_told_why_in_the_log(bridged_cluster: BridgedCluster) -> None:
    """What a mixed group still refuses is answered INCONSISTENT_GROUP_PROTOCOL, and the coordinator's log line
    says why (the JoinGroup response has no message field)."""
    from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

    cluster = bridged_cluster
    group = f"mixed-refused-{uuid.uuid4().hex[:6]}"
    port = int(cluster.node.bootstrap.rsplit(":", 1)[1])
    offers = {
        "connect": [("default", b"\x00\x00")],  # a Kafka Connect worker
        "consumer": [("RoundRobinAssigner", b"\x00\x00\x00")],  # not a ConsumerProtocolSubscription
    }
    for protocol_type, protocols in offers.items():
        P = JoinGroupRequest.JoinGroupRequestProtocol
        req = JoinGroupRequest(
            version=1,
            group_id=group,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=SESSION_MS,
            member_id="",
            protocol_type=protocol_type,
            protocols=[P(name=n, metadata=m) for n, m in protocols],
        )

        def answered(req: JoinGroupRequest = req) -> bool:
            code = call_once(port, req, JoinGroupResponse).error_code
            assert code in (23, 14, 15, 16), code  # 14, 15, 16: the group's coordinator is not ready yet
            return code == 23

        wait_for(answered, 30, f"JoinGroup of protocol type {protocol_type} answered", 0.1)

    def refusals() -> list[str]:  # the group's name is new: every line naming it is this test's
        return [line for line in list(cluster.node.output) if group in line and "refused" in line]

    wait_for(lambda: len(refusals()) >= 2, 10, "two refusals logged", 0.05)
    lines = refusals()
    assert "consumers only (protocol type 'consumer'); the member's protocol type is 'connect'" in lines[0], (
        lines
    )
    assert "'RoundRobinAssigner': its metadata (3 bytes) is not a ConsumerProtocolSubscription" in lines[1], (
        lines
    )
    assert all("INCONSISTENT_GROUP_PROTOCOL" in line for line in lines), lines
    zk = connect(cluster.zk_connect)
    try:
        assert zk.exists(f"/consumers/{group}/ids") is None  # nothing was registered for the group
    finally:
        zk.stop()
        zk.close()
