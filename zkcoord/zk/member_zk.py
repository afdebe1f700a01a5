"""The legacy member's ZooKeeper operations: checked registration, group snapshot reads (pipelined), owner release and
claim (one by one with rollback, or one multi-op) and waiting on an owner znode's deletion (its offsets are
written by zkcoord.zk.offset_store, the one writer of offset znodes). Stateless functions over a kazoo client; the runtime in
`zkcoord.zk.member` decides when to call them, through `Deadlined` so that every call has a deadline
(kazoo queues requests while the connection is suspended and its blocking calls would wait forever):
an unanswered call raises `ZooKeeperCallTimeout` naming the operation, the znode and the connection state.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)

from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import ConsumerRegistration, TopicAssignment, encode_owner
from zkcoord.legacy.rebalance import (
    Claim,
    GroupSnapshot,
    TopicPartition,
    batch_by_size,
    claim_payloads,
    op_size,
)
from zkcoord.zk import session
from zkcoord.zk.acl import ZnodeAccessDenied

log = logging.getLogger(__name__)
_MULTI_EXPECTED = (NodeExistsError, RolledBackError, RuntimeInconsistency)


class DuplicateConsumerId(ZkcoordError):
    """The registration znode exists and belongs to another live session: two members share a consumer id.
    The 0.8.2 consumer looped forever here; we refuse at once."""

    retriable = False

    def __init__(self, path: str, owner_session: int, my_session: int) -> None:
        super().__init__(
            f"consumer id already registered at {path} by another ZooKeeper session 0x{owner_session:x} "
            f"(mine is 0x{my_session:x}): every member of a group needs its own consumer.id"
        )
        self.path = path


class ZooKeeperCallTimeout(ZkcoordError):
    """A ZooKeeper call got no reply within its deadline (typically: the connection is suspended and kazoo
    holds the request until it reconnects). The rebalance attempt making it fails and is retried by the
    normal retry/backoff path. The request may still be applied later, so a caller that was creating
    znodes must treat them as possibly held."""

    retriable = True

    def __init__(self, op: str, path: str, timeout_s: float, state: str) -> None:
        super().__init__(
            f"ZooKeeper {op} {path} got no reply within {timeout_s * 1000:.0f} ms (connection {state})"
        )
        self.op = op
        self.path = path


class _DeadlinedTransaction:
    def __init__(self, owner: Deadlined) -> None:
        self._owner = owner
        self._tx = owner.client.transaction()
        self._first = ""

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False) -> None:
        self._first = self._first or path
        self._tx.create(path, value, ephemeral=ephemeral)

    def delete(self, path: str, version: int = -1) -> None:
        self._first = self._first or path
        self._tx.delete(path, version=version)

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._first = self._first or path
        self._tx.set_data(path, value, version=version)

    def commit(self) -> list[Any]:
        return list(self._owner.wait(self._tx.commit_async(), "multi", self._first))


class Deadlined:
    """A kazoo client whose blocking calls each wait at most `timeout_s` for their reply; everything else
    (client_id, state, listeners, watches' async calls) is the wrapped client's."""

    def __init__(self, client: KazooClient, timeout_s: float) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.requests: dict[str, int] = {}  # blocking calls made, by operation (read by the member's metrics)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def wait(self, result: Any, op: str, path: str) -> Any:
        from kazoo.handlers.threading import KazooTimeoutError

        self.requests[op] = self.requests.get(op, 0) + 1
        try:
            return result.get(timeout=self.timeout_s)
        except KazooTimeoutError:
            raise ZooKeeperCallTimeout(op, path, self.timeout_s, str(self.client.state)) from None
        except NoAuthError as e:
            if isinstance(e, ZnodeAccessDenied) or not isinstance(self.client, session.Client):
                raise
            raise self.client.denied(path, "create" if op == "ensure_path" else op) from e

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False) -> str:
        result = self.client.create_async(path, value, ephemeral=ephemeral, makepath=makepath)
        return str(self.wait(result, "create", path))

    def get(self, path: str, watch: Callable[..., Any] | None = None) -> Any:
        return self.wait(self.client.get_async(path, watch=watch), "get", path)

    def exists(self, path: str, watch: Callable[..., Any] | None = None) -> Any:
        return self.wait(self.client.exists_async(path, watch=watch), "exists", path)

    def get_children(self, path: str, watch: Callable[..., Any] | None = None) -> list[str]:
        return list(self.wait(self.client.get_children_async(path, watch=watch), "get_children", path))

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        return self.wait(self.client.set_async(path, value, version=version), "set", path)

    def delete(self, path: str, version: int = -1) -> Any:
        return self.wait(self.client.delete_async(path, version=version), "delete", path)

    def ensure_path(self, path: str) -> Any:
        return self.wait(self.client.ensure_path_async(path), "ensure_path", path)

    def transaction(self) -> _DeadlinedTransaction:
        return _DeadlinedTransaction(self)


Client: TypeAlias = "KazooClient | Deadlined"


def _gather(client: Client, pending: Sequence[tuple[str, Any]], op: str = "get") -> list[Any]:
    """Results of kazoo async calls sent together as (path, async result) (one round trip's worth of
    latency instead of one per call), each within the client's deadline when it has one; a NoNodeError is
    returned in place, anything else is raised."""
    out: list[Any] = []
    for path, result in pending:
        try:
            if isinstance(client, Deadlined):
                out.append(client.wait(result, op, path))
            else:
                out.append(result.get())
        except NoNodeError as exc:
            out.append(exc)
    return out


def session_id(client: Client) -> int:
    cid = client.client_id
    return -1 if cid is None else int(cid[0])


def register(client: Client, group: str, consumer_id: str, registration: ConsumerRegistration) -> int:
    """Create the ephemeral ids znode (parents on demand) and return the session it belongs to.

    NodeExists is ours (a create retried after connection loss) only when its ephemeralOwner is this
    session; then the payload is refreshed. Anything else is a duplicate consumer id."""
    path = paths.id_path(group, consumer_id)
    data = registration.encode()
    me = session_id(client)
    try:
        client.create(path, data, ephemeral=True, makepath=True)
        return me
    except NodeExistsError:
        pass
    try:
        _data, stat = client.get(path)
    except NoNodeError:
        client.create(path, data, ephemeral=True, makepath=True)
        return me
    if stat.ephemeralOwner != me:
        raise DuplicateConsumerId(path, stat.ephemeralOwner, me)
    if _data != data:
        client.set(path, data, version=stat.version)
    return me


def registration_owner(client: Client, group: str, consumer_id: str) -> int | None:
    """The session owning my ids znode, or None when it is gone."""
    stat = client.exists(paths.id_path(group, consumer_id))
    return None if stat is None else int(stat.ephemeralOwner)


def broker_ids(client: Client) -> list[str]:
    try:
        return list(client.get_children(paths.BROKER_IDS))
    except NoNodeError:
        return []


def read_snapshot(client: Client, group: str, *, need_all_topics: bool) -> GroupSnapshot:
    """Every registration of the group and the partition ids of every topic known to ZooKeeper that a member
    may need. A member that vanishes between list and read is skipped (its deletion fires another event)."""
    registrations: list[tuple[str, ConsumerRegistration]] = []
    try:
        ids = client.get_children(paths.ids_path(group))
    except NoNodeError:
        ids = []
    id_paths = [paths.id_path(group, cid) for cid in ids]
    for cid, path, got in zip(
        ids, id_paths, _gather(client, [(p, client.get_async(p)) for p in id_paths]), strict=True
    ):
        if isinstance(got, NoNodeError):
            continue
        registrations.append((cid, ConsumerRegistration.decode(path, got[0])))
    all_topics: tuple[str, ...] = ()
    if need_all_topics or any(reg.is_wildcard for _cid, reg in registrations):
        try:
            all_topics = tuple(client.get_children(paths.BROKER_TOPICS))
        except NoNodeError:
            all_topics = ()
    wanted = set(all_topics)
    for _cid, reg in registrations:
        if not reg.is_wildcard:
            wanted.update(t for t, _n in reg.subscription)
    topic_partitions = []
    topics = []
    for topic in sorted(wanted):
        try:
            topics.append((topic, paths.topic_path(topic)))
        except paths.InvalidName:
            continue
    for (topic, path), got in zip(
        topics, _gather(client, [(p, client.get_async(p)) for _t, p in topics]), strict=True
    ):
        if not isinstance(got, NoNodeError):
            topic_partitions.append((topic, tuple(TopicAssignment.decode(path, got[0]).partition_ids)))
    return GroupSnapshot(tuple(registrations), tuple(topic_partitions), all_topics)


def read_topic_partitions(client: Client, topic: str) -> tuple[int, ...] | None:
    try:
        path = paths.topic_path(topic)
    except paths.InvalidName:
        return None
    try:
        data, _stat = client.get(path)
    except NoNodeError:
        return None
    return tuple(TopicAssignment.decode(path, data).partition_ids)


# --- owners ------------------------------------------------------------------------------------------------


def release(
    client: Client,
    group: str,
    owned: Sequence[TopicPartition],
    session: int,
    *,
    batched: bool,
    budget: int,
) -> int:
    """Delete my owner znodes (only those whose ephemeralOwner is my session: a node re-created by someone
    else after my session moved is not mine to delete). Returns how many were deleted."""
    victims: list[tuple[str, int]] = []
    owner_paths = [paths.owner_path(group, tp.topic, tp.partition) for tp in owned]
    for path, stat in zip(
        owner_paths,
        _gather(client, [(p, client.exists_async(p)) for p in owner_paths], "exists"),
        strict=True,
    ):
        if stat is not None and stat.ephemeralOwner == session:
            victims.append((path, stat.version))
    if not batched:
        for path, version in victims:
            _delete_quietly(client, path, version)
        return len(victims)
    for batch in batch_by_size(victims, lambda v: op_size(v[0], b""), budget):
        tx = client.transaction()
        for path, version in batch:
            tx.delete(path, version=version)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            # Someone raced us on one node (it vanished); fall back to one by one for this batch.
            for path, version in batch:
                _delete_quietly(client, path, version)
    return len(victims)


def held_by(
    client: Client, group: str, tps: Mapping[TopicPartition, str], session: int
) -> dict[TopicPartition, int]:
    """Which of these owner znodes exist under `session` with the given thread id as payload, with their data
    versions (one pipelined round of reads): the ones an incremental rebalance may keep."""
    order = sorted(tps)
    owner_paths = [paths.owner_path(group, tp.topic, tp.partition) for tp in order]
    held = {}
    pending = [(p, client.get_async(p)) for p in owner_paths]
    for tp, got in zip(order, _gather(client, pending), strict=True):
        if isinstance(got, NoNodeError):
            continue
        data, stat = got
        if stat.ephemeralOwner == session and data == encode_owner(tps[tp]):
            held[tp] = stat.version
    return held


def retag(
    client: Client,
    group: str,
    claims: Sequence[Claim],
    versions: Mapping[TopicPartition, int],
    *,
    budget: int,
) -> None:
    """Rewrite the payload of owner znodes I keep under another of my thread ids, in place (versioned
    set_data: the znode, its czxid and its ephemeral owner stay). One multi-op per byte budget; a version
    that moved raises (the attempt fails and the next one reads again)."""
    items = list(zip(claims, claim_payloads(group, claims), strict=True))
    for batch in batch_by_size(items, lambda item: op_size(item[1][0], item[1][1]), budget):
        tx = client.transaction()
        for claim, (path, data) in batch:
            tx.set_data(path, data, version=versions[claim.tp])
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if failed:
            raise failed[0]


def _delete_quietly(client: Client, path: str, version: int) -> None:
    with contextlib.suppress(NoNodeError, BadVersionError):
        client.delete(path, version=version)


@dataclass(frozen=True, slots=True)
class ClaimResult:
    ok: bool
    conflicts: tuple[str, ...] = ()  # owner paths held by others


def claim_one_by_one(client: Client, group: str, claims: Sequence[Claim], session: int) -> ClaimResult:
    """The original `reflectPartitionOwnershipDecision`: create each owner znode; NodeExists is success only
    if the node holds my thread id under my session; on any conflict delete every node created here."""
    created: list[str] = []
    conflicts: list[str] = []
    try:
        for path, data in claim_payloads(group, claims):
            try:
                client.create(path, data, ephemeral=True, makepath=True)
                created.append(path)
            except NodeExistsError:
                if not _is_mine(client, path, data, session):
                    log.info(
                        "group=%s owner %s: waiting for the partition ownership to be deleted", group, path
                    )
                    conflicts.append(path)
    except BaseException:
        _rollback(client, created)
        raise
    if conflicts:
        _rollback(client, created)
        return ClaimResult(False, tuple(conflicts))
    return ClaimResult(True)


def claim_batched(
    client: Client, group: str, claims: Sequence[Claim], session: int, *, budget: int
) -> ClaimResult:
    """Claim with multi-ops (all-or-nothing per batch; batches beyond one are rolled back on a conflict)."""
    items = claim_payloads(group, claims)
    for topic in sorted({c.tp.topic for c in claims}):
        client.ensure_path(paths.owners_topic_path(group, topic))
    created: list[str] = []
    try:
        for batch in batch_by_size(items, lambda item: op_size(item[0], item[1]), budget):
            tx = client.transaction()
            for path, data in batch:
                tx.create(path, data, ephemeral=True)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                created.extend(path for path, _data in batch)
                continue
            for result in results:
                if isinstance(result, Exception) and not isinstance(result, _MULTI_EXPECTED):
                    raise result
            # A failed multi names only its first failing op; look at every node of the batch.
            conflicts = [
                path
                for path, data in batch
                if client.exists(path) is not None and not _is_mine(client, path, data, session)
            ]
            _rollback(client, created)
            if not conflicts:
                # The failing node was mine (a retried create); claim again one by one to keep the rest.
                return claim_one_by_one(client, group, claims, session)
            return ClaimResult(False, tuple(conflicts))
    except BaseException:
        _rollback(client, created)
        raise
    return ClaimResult(True)


def _is_mine(client: Client, path: str, data: bytes, session: int) -> bool:
    """createEphemeralPathExpectConflict's check, tightened: same payload AND my session."""
    try:
        current, stat = client.get(path)
    except NoNodeError:
        return False
    return bool(current == data and stat.ephemeralOwner == session)


def _rollback(client: Client, created: Sequence[str]) -> None:
    for path in created:
        try:
            client.delete(path)
        except NoNodeError:
            pass
        except Exception:  # the session is going away; its ephemerals go with it
            log.warning("rollback of owner %s failed", path, exc_info=True)


def delete_stale_own(client: Client, conflicts: Sequence[str], session: int) -> list[str]:
    """Delete conflicting owner znodes that my own session still holds (left by an interrupted rollback) and
    return the conflicts that belong to others."""
    others = []
    for path in conflicts:
        stat = client.exists(path)
        if stat is None:
            continue
        if stat.ephemeralOwner == session:
            _delete_quietly(client, path, stat.version)
        else:
            others.append(path)
    return others


def wait_deleted(
    client: Client,
    owner_paths: Sequence[str],
    timeout_s: float,
    wake: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Block until every path is gone, `wake` is set (a new group event) or the deadline passes; True when
    all are gone. Uses exists-watches, not polling."""
    gone = threading.Event()
    deadline = clock() + timeout_s
    for path in owner_paths:
        while True:
            gone.clear()
            if client.exists(path, watch=lambda _event: gone.set()) is None:
                break
            remaining = deadline - clock()
            if remaining <= 0 or wake.is_set():
                return False
            # Wake on either the deletion or a new group event; re-check both every 50 ms at most.
            gone.wait(min(remaining, 0.05))
    return True


def delete_registration(client: Client, group: str, consumer_id: str, session: int) -> None:
    path = paths.id_path(group, consumer_id)
    stat = client.exists(path)
    if stat is not None and stat.ephemeralOwner == session:
        with contextlib.suppress(NoNodeError, BadVersionError, NotEmptyError):
            client.delete(path, version=stat.version)


def wanted(
    client: Client, group: str, tps: Sequence[TopicPartition], watch: Callable[[Any], None]
) -> tuple[TopicPartition, ...]:
    """Which of `tps` a coordinator's hand-over now waits for (their hint znode exists); `watch` is set on
    every one of them, so it fires when one appears (one exists call each, pipelined)."""
    hints = [paths.wanted_path(group, tp.topic, tp.partition) for tp in tps]
    found = _gather(client, [(p, client.exists_async(p, watch=watch)) for p in hints], "exists")
    return tuple(tp for tp, stat in zip(tps, found, strict=True) if stat is not None)
