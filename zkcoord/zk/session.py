"""ZooKeeper sessions: connecting a kazoo client, waiting on its state, and real server-side faults
(session expiry, connection drop) for tests and comparison runs.

This package is the only place that imports kazoo.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from zkcoord.errors import ZkcoordError

DEFAULT_SESSION_TIMEOUT_S = 10.0

# The names the rest of zkcoord uses for kazoo's types, so only this package imports kazoo.
Client = KazooClient
ZooKeeperError = KazooException  # any failure reported by the ZooKeeper client (connection, session, znode)


class SessionFault(ZkcoordError):
    """A fault could not be injected or its effect was not seen before the deadline."""


def connect(
    hosts: str,
    *,
    timeout: float = 15.0,
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    read_only: bool = False,
) -> KazooClient:
    """A started kazoo client for `hosts` (chroot allowed: 'h:p,h2:p2/chroot')."""
    client = KazooClient(hosts=hosts, timeout=session_timeout_s, read_only=read_only)
    try:
        client.start(timeout=timeout)
    except BaseException:
        client.close()  # a client that never connected still holds its worker threads' resources
        raise
    return client


def on_session_lost(client: KazooClient, callback: Callable[[], None]) -> None:
    """Call `callback()` (on kazoo's event thread: keep it short) each time the client's session is lost: its
    ephemerals and watches are gone, a reconnect gets a new session."""

    def listener(state: KazooState) -> None:
        if state == KazooState.LOST:
            callback()

    client.add_listener(listener)


def ensure_chroot(hosts: str, chroot: str) -> str:
    """Create `chroot` (and its parents) on `hosts` if missing; return the connect string rooted there."""
    if not chroot.startswith("/") or chroot == "/":
        raise ValueError(f"a chroot is an absolute path below /, got {chroot!r}")
    root = connect(hosts)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return hosts + chroot


def host_string(client: KazooClient) -> str:
    """The client's servers as a connect string, without its chroot."""
    return ",".join(f"{h}:{p}" for h, p in client.hosts)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll `predicate` until true; raise SessionFault naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SessionFault(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def expire_session(client: KazooClient, timeout: float = 30.0) -> None:
    """Expire the client's session on the server, as a long partition would: its ephemeral znodes are
    deleted by the server and the client reconnects with a new session. Returns once that new session
    is connected.

    How: a second connection presents the same session id and password and closes the session; the
    server then expires it for the original connection too.
    """
    old_id = client.client_id
    if old_id is None or not client.connected:
        raise SessionFault("expire_session needs a connected client")
    lost = threading.Event()

    def listener(state: KazooState) -> bool:
        if state == KazooState.LOST:
            lost.set()
            return True  # remove the listener
        return False

    client.add_listener(listener)
    dup = KazooClient(hosts=host_string(client), client_id=old_id, timeout=client._session_timeout / 1000.0)
    try:
        dup.start(timeout=timeout)
        dup.stop()
    finally:
        dup.close()
    if not lost.wait(timeout):
        client.remove_listener(listener)
        raise SessionFault(f"session 0x{old_id[0]:x} was not reported lost within {timeout:.0f}s")
    wait_for(
        lambda: client.connected and client.client_id is not None and client.client_id[0] != old_id[0],
        timeout,
        "a new session after expiry",
    )


def drop_connection(client: KazooClient, timeout: float = 30.0) -> None:
    """Cut the client's TCP connection (both directions) without touching the session: the client goes
    SUSPENDED, reconnects and keeps its session and ephemeral znodes. Returns once it is connected again."""
    conn = client._connection
    sock = conn._socket
    if sock is None or not client.connected:
        raise SessionFault("drop_connection needs a connected client")
    session = client.client_id
    suspended = threading.Event()

    def listener(state: KazooState) -> bool:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            suspended.set()
            return True
        return False

    client.add_listener(listener)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    if not suspended.wait(timeout):
        client.remove_listener(listener)
        raise SessionFault("the client did not notice the dropped connection")
    wait_for(lambda: client.connected, timeout, "the client to reconnect")
    if client.client_id is None or session is None or client.client_id[0] != session[0]:
        raise SessionFault("the session changed on reconnect (it expired while the connection was down)")
