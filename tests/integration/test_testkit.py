"""The test kit against real ZooKeeper: chroots, real session expiry, connection drop, ensemble failover,
and no process left behind."""

from __future__ import annotations

import subprocess

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.local.zookeeper import server_mode
from zkcoord.testing import drop_connection, expire_session, wait_for
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = pytest.mark.integration

_seen_chroots: list[str] = []


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_gets_its_own_empty_chroot(zk: KazooClient, zk_chroot: str, zk_server, round_: int) -> None:
    assert zk.get_children("/") == []
    zk.create("/shared-name", b"from round %d" % round_)
    root = connect(zk_server.hosts)
    try:
        assert root.get(f"{zk_chroot}/shared-name")[0] == b"from round %d" % round_
        for earlier in _seen_chroots:
            assert earlier != zk_chroot
            assert root.exists(earlier) is None, "the previous test's chroot was not removed"
    finally:
        root.stop()
        root.close()
    _seen_chroots.append(zk_chroot)


def test_expire_session_deletes_ephemerals_on_the_server(zk: KazooClient, zk_client_factory) -> None:
    observer = zk_client_factory()
    zk.create("/member", b"x", ephemeral=True)
    old_session = zk.client_id[0]
    assert observer.exists("/member").ephemeralOwner == old_session

    expire_session(zk)

    assert observer.exists("/member") is None
    assert zk.connected and zk.client_id[0] != old_session
    with pytest.raises(NoNodeError):
        zk.get("/member")


def test_drop_connection_keeps_the_session(zk: KazooClient, zk_client_factory) -> None:
    observer = zk_client_factory()
    zk.create("/member", b"x", ephemeral=True)
    session = zk.client_id[0]

    drop_connection(zk)

    assert zk.client_id[0] == session
    assert observer.exists("/member").ephemeralOwner == session
    zk.set("/member", b"y")
    assert observer.get("/member")[0] == b"y"


def test_ensemble_survives_killing_its_leader(zk_ensemble) -> None:
    client = connect(zk_ensemble.hosts, session_timeout_s=10)
    try:
        client.create("/failover", b"0", makepath=True)
        old_leader = zk_ensemble.leader()
        zk_ensemble.kill_node(old_leader)
        assert not zk_ensemble.nodes[old_leader].running

        def write_ok() -> bool:
            try:
                client.set("/failover", b"1")
                return True
            except Exception:
                return False

        wait_for(write_ok, 30, "a write after the leader was killed", interval=0.1)
        assert client.get("/failover")[0] == b"1"
        new_leader = zk_ensemble.leader()
        assert new_leader != old_leader

        zk_ensemble.restart_node(old_leader)
        assert server_mode("127.0.0.1", zk_ensemble.nodes[old_leader].client_port) == "follower"
    finally:
        client.stop()
        client.close()


def test_failing_test_shows_server_log_and_no_process_is_left(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
        def test_fails(zk, zk_server):
            open("hosts.txt", "w").write(zk_server.local.nodes[0].cfg_path.as_posix())
            assert False, "deliberate"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*zookeeper server logs (tail)*"])
    cfg = (pytester.path / "hosts.txt").read_text()
    survivors = subprocess.run(["pgrep", "-f", cfg], capture_output=True, text=True).stdout.strip()
    assert survivors == "", f"ZooKeeper processes left behind: {survivors}"


def test_ensure_chroot_creates_parents_and_roots_the_connect_string(zk: KazooClient, zk_connect: str) -> None:
    rooted = ensure_chroot(zk_connect, "/a/b")
    assert rooted == zk_connect + "/a/b"
    assert ensure_chroot(zk_connect, "/a/b") == rooted  # already there: fine
    inner = connect(rooted)
    try:
        inner.create("/x", b"1")
    finally:
        inner.stop()
        inner.close()
    assert zk.get("/a/b/x")[0] == b"1"
    with pytest.raises(ValueError, match="absolute path below /"):
        ensure_chroot(zk_connect, "a")
