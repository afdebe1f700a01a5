"""ZooKeeper sessions: connecting a kazoo client as the identity it was given (SASL DIGEST-MD5 and/or digest,
checked with a request before the client is handed out), creating znodes with the ACLs of its policy, waiting
on its state, and real server-side faults (session expiry, connection drop) for tests and comparison runs.

This package is the only place that imports kazoo.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from zkcoord.errors import ZkcoordError
from zkcoord.zk.acl import KAFKA_SECURE, OPEN, AclPolicy, ZnodeAccessDenied
from zkcoord.zk.auth import NO_AUTH, ZkAuth

DEFAULT_SESSION_TIMEOUT_S = 10.0

ZooKeeperError = KazooException  # any failure reported by the ZooKeeper client (connection, session, znode)


class SessionFault(ZkcoordError):
    """A fault could not be injected or its effect was not seen before the deadline."""


class ZkAuthFailed(ZkcoordError):
    """The ZooKeeper session could not be used as the identity it was given: wrong credentials, a server that
    requires authentication the client did not offer, or an authentication the server does not know."""

    retriable = False


class ZkUnreachable(ZkcoordError, KazooTimeoutError):  # type: ignore[misc]  # kazoo is untyped
    """Nothing answered at the connect string within the connect timeout (a wrong host or port, a server down).
    Still a KazooTimeoutError, so callers and the retry policy that know kazoo's error keep treating it as one."""

    retriable = True


class _PolicyAcl(list[Any]):
    """An ACL list the policy chose for one path (not one the caller asked for): parents created on the way
    to that path get their own policy ACL instead of inheriting this one."""


class Client(KazooClient):  # type: ignore[misc]  # kazoo is untyped
    """A kazoo client that authenticates as `auth` and creates every znode (create, ensure_path, makepath
    parents, transactions) with the ACLs `auth.set_acl` calls for, unless the caller names an ACL; an operation
    refused by a znode's ACL raises ZnodeAccessDenied naming the path, the operation and the permission."""

    def __init__(self, *, auth: ZkAuth = NO_AUTH, **kwargs: Any) -> None:
        if auth.sasl is not None:
            kwargs["sasl_options"] = {
                "mechanism": "DIGEST-MD5",
                "username": auth.sasl.username,
                "password": auth.sasl.password,
            }
        if auth.digest is not None:
            kwargs["auth_data"] = [("digest", f"{auth.digest.username}:{auth.digest.password}")]
        super().__init__(**kwargs)
        self.auth = auth
        self.acl_policy: AclPolicy = KAFKA_SECURE if auth.set_acl else OPEN
        if auth.sasl is not None:
            _refused_login_stops_connecting(self._connection)

    def denied(self, path: str, operation: str) -> ZnodeAccessDenied:
        return ZnodeAccessDenied(path, operation, self.auth.describe())

    # Creates: the policy's ACL when the caller gave none.
    def create_async(self, path: str, value: bytes = b"", acl: Any = None, *args: Any, **kwargs: Any) -> Any:
        if acl is None or isinstance(acl, _PolicyAcl):
            acl = _PolicyAcl(self.acl_policy.acls_for(path.rstrip("/") if kwargs.get("sequence") else path))
        return super().create_async(path, value, acl, *args, **kwargs)

    def ensure_path_async(self, path: str, acl: Any = None) -> Any:
        # kazoo hands a child's ACL to the parents it creates; the policy decides each parent's own.
        return super().ensure_path_async(path, None if isinstance(acl, _PolicyAcl) else acl)

    def transaction(self) -> TransactionRequest:
        return _PolicyTransaction(self)

    # Refusals by ACL name what was refused.
    def create(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "create", super().create, path, *args, **kwargs)

    def ensure_path(self, path: str, acl: Any = None) -> Any:
        return self._named(path, "create", super().ensure_path, path, acl)

    def set(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "set", super().set, path, *args, **kwargs)

    def delete(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "delete", super().delete, path, *args, **kwargs)

    def get(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "get", super().get, path, *args, **kwargs)

    def get_children(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "get_children", super().get_children, path, *args, **kwargs)

    def set_acls(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self._named(path, "set_acls", super().set_acls, path, *args, **kwargs)

    def _named(self, path: str, operation: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except ZnodeAccessDenied:
            raise
        except NoAuthError as e:
            raise self.denied(path, operation) from e


class _PolicyTransaction(TransactionRequest):  # type: ignore[misc]  # kazoo is untyped
    """A multi whose creates get the policy's ACLs, and whose commit names the operation an ACL refused."""

    client: Client

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self._named_ops: list[tuple[str, str]] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, *args: Any, **kwargs: Any) -> None:
        if acl is None:
            sequence = kwargs.get("sequence") or (len(args) > 1 and args[1])
            acl = self.client.acl_policy.acls_for(path.rstrip("/") if sequence else path)
        self._named_ops.append(("create", path))
        super().create(path, value, acl, *args, **kwargs)

    def delete(self, path: str, *args: Any, **kwargs: Any) -> None:
        self._named_ops.append(("delete", path))
        super().delete(path, *args, **kwargs)

    def set_data(self, path: str, *args: Any, **kwargs: Any) -> None:
        self._named_ops.append(("set", path))
        super().set_data(path, *args, **kwargs)

    def check(self, path: str, *args: Any, **kwargs: Any) -> None:
        self._named_ops.append(("get", path))
        super().check(path, *args, **kwargs)

    def commit(self) -> list[Any]:
        results: list[Any] = super().commit()
        for (operation, path), result in zip(self._named_ops, results, strict=False):
            if isinstance(result, NoAuthError):
                raise self.client.denied(path, operation) from result
        return results


def _refused_login_stops_connecting(connection: Any) -> None:
    """ZooKeeper answers refused DIGEST-MD5 credentials with SessionClosedRequireSasl; kazoo 2.11 handles only
    AuthFailedError from its login (state AUTH_FAILED, stop connecting) and lets this one escape its connection
    thread, which dies printing a traceback. Raised as AuthFailedError instead, it takes kazoo's own path for a
    refused login, as kazoo does itself since python-zk/kazoo#810 (not in a release yet)."""
    login = connection._authenticate_with_sasl

    def authenticate(host: str, timeout: float) -> Any:
        try:
            return login(host, timeout)
        except SessionClosedRequireSaslError as exc:
            raise AuthFailedError("ZooKeeper closed the session during the SASL login") from exc

    connection._authenticate_with_sasl = authenticate


def connect(
    hosts: str,
    *,
    timeout: float = 15.0,
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    read_only: bool = False,
    auth: ZkAuth = NO_AUTH,
) -> Client:
    """A started client for `hosts` (chroot allowed: 'h:p,h2:p2/chroot'), authenticated as `auth`.

    kazoo's start() returns once the TCP session exists, before a SASL exchange has finished: a request is
    made before the client is handed out, so wrong credentials, or a server that requires authentication the
    client did not offer, fail here with ZkAuthFailed instead of on some later call.
    """
    client = Client(hosts=hosts, timeout=session_timeout_s, read_only=read_only, auth=auth)
    try:
        deadline = time.monotonic() + timeout
        try:
            client.start(timeout=timeout)  # with a chroot, start() itself makes the first request
            client.exists_async("/").get(timeout=max(0.5, deadline - time.monotonic()))
        except Exception as e:
            failure = _auth_failure(client, hosts, e)
            if failure is not None:
                raise failure from None
            if isinstance(e, KazooTimeoutError):
                raise ZkUnreachable(
                    f"cannot connect to ZooKeeper at {hosts}: no answer within {timeout:g} s (connection time-out); "
                    "check the connect string (HOST:PORT[,HOST:PORT...][/chroot]) and that the server runs"
                ) from None
            raise
    except BaseException:
        with contextlib.suppress(Exception):
            client.stop()
        client.close()  # a client that never connected still holds its worker threads' resources
        raise
    return client


_AUTH_SYMPTOMS = (
    SessionClosedRequireSaslError,
    AuthFailedError,
    ConnectionLoss,
    ConnectionClosedError,
    SessionExpiredError,
    KazooTimeoutError,
)


def _auth_failure(client: Client, hosts: str, e: BaseException) -> ZkAuthFailed | None:
    """What a failed first request means for authentication, or None when it says nothing about it."""
    if not isinstance(e, _AUTH_SYMPTOMS):
        return None
    if client.auth.authenticated:
        # The server drops a session whose SASL login failed: what the client sees next varies with timing.
        return ZkAuthFailed(
            f"ZooKeeper {hosts} refused the credentials of {client.auth.describe()} ({type(e).__name__}): "
            "check the user name and password against the server's JAAS Server section (or its digest ACLs)"
        )
    if isinstance(e, SessionClosedRequireSaslError):
        return ZkAuthFailed(
            f"ZooKeeper {hosts} requires SASL authentication and refused this unauthenticated session: give "
            "the JAAS file with --zk-jaas-config FILE (a Client section with DigestLoginModule username/password)"
        )
    return None


def on_session_lost(client: KazooClient, callback: Callable[[], None]) -> None:
    """Call `callback()` (on kazoo's event thread: keep it short) each time the client's session is lost: its
    ephemerals and watches are gone, a reconnect gets a new session."""

    def listener(state: KazooState) -> None:
        if state == KazooState.LOST:
            callback()

    client.add_listener(listener)


def ensure_chroot(hosts: str, chroot: str, auth: ZkAuth = NO_AUTH) -> str:
    """Create `chroot` (and its parents, with `auth`'s ACLs as Kafka does) on `hosts` if missing; return the
    connect string rooted there."""
    if not chroot.startswith("/") or chroot == "/":
        raise ValueError(f"a chroot is an absolute path below /, got {chroot!r}")
    root = connect(hosts, auth=auth)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return hosts + chroot


def host_string(client: KazooClient) -> str:
    """The client's servers as a connect string, without its chroot."""
    return ",".join(f"{h}:{p}" for h, p in client.hosts)


def update_znode(client: KazooClient, path: str, merge: Callable[[], tuple[bytes, int | None]]) -> bytes:
    """Read-merge-write without a lock: `merge()` reads the znode and returns the data to store and the version
    it read (None: the znode was absent); the write is conditional on that version (or on absence), and the
    merge runs again if another writer came between. Returns the data written."""
    while True:
        data, version = merge()
        try:
            if version is None:
                client.create(path, data, makepath=True)
            else:
                client.set(path, data, version=version)
            return data
        except (NodeExistsError, BadVersionError):
            continue  # raced another writer: merge again


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
    # The duplicate logs in as the original did: a server that requires authentication ignores its close otherwise.
    dup = Client(
        hosts=host_string(client),
        client_id=old_id,
        timeout=client._session_timeout / 1000.0,
        auth=client.auth if isinstance(client, Client) else NO_AUTH,
    )
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
