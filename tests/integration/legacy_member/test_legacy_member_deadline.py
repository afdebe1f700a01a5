"""Every ZooKeeper call of a rebalance has a deadline: with the (only) ZooKeeper server down, kazoo holds the
requests until it reconnects, yet the member's rebalance attempts fail with a precise ZooKeeperCallTimeout
and go through the normal retry path instead of hanging; once the server is back the member converges on
the same session."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.testing import wait_for
from zkcoord.zk.session import connect

pytestmark = pytest.mark.integration

CALL_TIMEOUT_MS = 300


@pytest.fixture(scope="module")
def own_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    """A server of our own: these tests stop it, which the shared one must never be."""
    base: Path = tmp_path_factory.mktemp("zk-deadline")
    with ZooKeeper.start(1, base_dir=base) as zk:
        yield zk


@pytest.mark.parametrize("mode", ["fast", "faithful"])
def test_rebalance_calls_time_out_while_zookeeper_is_down(own_zookeeper, kit, member_factory, mode):
    connect_string = f"{own_zookeeper.hosts}/deadline-{uuid.uuid4().hex[:8]}"
    admin = connect(connect_string.split("/")[0])
    admin.ensure_path("/" + connect_string.split("/", 1)[1])
    admin.stop()
    admin.close()
    admin = connect(connect_string, session_timeout_s=30)
    try:
        kit.register_broker(admin)
        kit.make_topic(admin, "t", 2)
        m = member_factory(
            "g",
            {"t": 1},
            consumer_id="c",
            mode=mode,
            zookeeper_connect=connect_string,
            zookeeper_session_timeout_ms=30000,  # the session outlives the outage
            zk_call_timeout_ms=CALL_TIMEOUT_MS,
            fetcher_factory=kit.FakeFetcher,
        )
        wait_for(lambda: m.is_stable() and len(m.owned()) == 2, 20, "ownership")
        session = m.session
        failed_before = m.stats.failed_attempts

        own_zookeeper.kill_node(0)
        # SUSPENDED fences and starts a rebalance whose first ZooKeeper call cannot be answered.
        wait_for(
            lambda: m.stats.failed_attempts >= failed_before + 2,
            20,
            "rebalance attempts to fail on their deadline instead of blocking",
        )
        error = m.stats.last_error or ""
        assert re.fullmatch(
            rf"ZooKeeperCallTimeout: ZooKeeper \w+ /\S+ got no reply within {CALL_TIMEOUT_MS} ms "
            r"\(connection SUSPENDED\)",
            error,
        ), error
        assert m.fenced and m.owned() == {}

        own_zookeeper.restart_node(0)
        wait_for(
            lambda: m.is_stable() and len(m.owned()) == 2,
            30,
            "ownership after ZooKeeper is back",
        )
        assert m.session == session
        # Read what the member wrote through a new session: the test's own client, cut off by the same
        # outage, may come back to an expired session under load (kazoo SessionExpiredError), which says
        # nothing about the member.
        observer = connect(connect_string)
        try:
            assert kit.owners(observer, "g", "t") == {0: ("g_c-0", session), 1: ("g_c-0", session)}
        finally:
            observer.stop()
            observer.close()
    finally:
        admin.stop()
        admin.close()
