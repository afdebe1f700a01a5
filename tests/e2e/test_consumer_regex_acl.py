"""A consumer-protocol (KIP-848) regex subscription under Kafka's ACLs: the expression matches only the topics the
member's principal may Describe (Kafka 4's `filterTopicDescribeAuthorizedTopics`, KAFKA-18813), so a topic it may
not see is neither assigned nor named to it. confluent-kafka (`group.protocol=consumer`) against one `zkcoord serve`
with the ACL authorizer (allow.everyone.if.no.acl.found: topics without ACLs stay open)."""

from __future__ import annotations

import contextlib
import io
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.consumer_wire import Wire
from zkcoord.errors import ErrorCode
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.zk.session import ensure_chroot

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def node(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    """(node, the ZooKeeper connect string its ACLs are read from)."""
    connect = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/regex-acl-{uuid.uuid4().hex[:8]}")
    flags = (*FAST_GROUP_FLAGS, "--num.partitions=1", "--security-zk", connect,
             "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
             "--allow.everyone.if.no.acl.found", "true", "--group.consumer.heartbeat.interval.ms=250",
             "--group.consumer.regex.refresh.interval.ms=500")  # fmt: skip
    proc = NodeProcess(tmp_path_factory.mktemp("regex-acl-node"), flags)
    proc.start()
    try:
        yield proc, connect
    finally:
        proc.stop()


def _only_alice_may_describe(zk_connect: str, topic: str) -> None:
    from zkcoord.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(["security", "add-acl", "--zk", zk_connect, "--topic", topic,
                       "--allow-principal", "User:alice", "--operation", "Describe"])  # fmt: skip
    assert status == 0, out.getvalue()


def test_a_regex_matches_only_the_topics_its_member_may_describe(node: tuple[NodeProcess, str]) -> None:
    proc, zk_connect = node
    tag = uuid.uuid4().hex[:6]
    prefix, group = f"rxacl{tag}", f"regex-acl-{tag}"
    seen, hidden = f"{prefix}-seen", f"{prefix}-hidden"
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    for t in (seen, hidden):
        admin.create_topics([NewTopic(t, 2, 1)])[t].result(20)
    _only_alice_may_describe(zk_connect, hidden)
    wire = Wire(proc.port)
    try:
        # The node holds the ACL once its Metadata refuses the hidden topic to this (anonymous) principal.
        def refused() -> bool:
            try:
                wire.topic_ids(hidden)
            except AssertionError:
                return True
            return False

        wait_for(refused, 15, f"the ACL on {hidden} at the node")
        consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group, "group.protocol": "consumer",
                             "topic.metadata.refresh.interval.ms": 500, "log_level": 3})  # fmt: skip
        try:
            consumer.subscribe([f"^{prefix}-.*"])
            described: list[Any] = []

            def targeted() -> bool:
                consumer.poll(0.1)
                d = wire.describe(group)
                described[:] = [d]
                # Either answer ends the wait: the group described with a target, or refused for naming a topic
                # its describer may not see (the hidden topic assigned).
                assigned = d.error_code == 0 and any(m.target_assignment for m in d.members)
                return assigned or d.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

            wait_for(targeted, 30, "the regex member's target assignment")
            (d,) = described
            assert d.error_code == 0, d
            (member,) = d.members
            assert {(t.topic_name, t.partitions) for t in member.target_assignment} == {(seen, (0, 1))}
        finally:
            consumer.close()
    finally:
        wire.close()
