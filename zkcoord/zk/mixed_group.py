"""The ZooKeeper side of mixed groups: reading a group's ids and owners raw, and the fenced writes with which a
coordinator holds `/consumers/G/ids/<id>` and `/consumers/G/owners/T/P` for its broker-protocol members.

Guarantees: those znodes are persistent (they do not vanish with one node's session while a broker-protocol member
may still consume); every write is one multi-op that also checks the version of the group's fence znode
`/zkcoord/mixed-groups/<group>`, so once another coordinator adopted the group (bumped the fence), the old one can
no longer create or delete anything; an owner is deleted only when it still holds the expected thread id. A fence
whose data is not what `adopt` writes (`{"holder": <text>, "epoch": <int >= 0>}`) is malformed: `adopt` raises
`MalformedZnode` and writes nothing (fail closed: no coordinator adopts the group until it is repaired). An owner
znode whose data is no thread id reads as held by `MALFORMED_OWNER` (someone unknown: never ours, never a legacy
member's), so its partition is neither handed out nor counted as a legacy member's, and it is never deleted here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import decode_owner, encode_owner
from zkcoord.legacy.ids import java_sorted
from zkcoord.ratelog import RateLimitedLog
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import registry

log = logging.getLogger(__name__)
_say = RateLimitedLog(log)

FENCE_ROOT = "/zkcoord/mixed-groups"
MALFORMED_OWNER = "<malformed owner znode>"
OwnerHeld = NodeExistsError  # a create found the owner znode held by someone else


class FenceMoved(Exception):
    """Another coordinator adopted the group since this one did: it must stop writing for the group."""


def fence_path(group: str) -> str:
    return f"{FENCE_ROOT}/{paths.validate_group(group)}"


MAX_FENCE_BYTES = 4096


def decode_fence(path: str, data: bytes | None) -> int:
    """The epoch of a fence znode; MalformedZnode for any other data (any bytes in, one exception type out)."""
    if data is None or len(data) > MAX_FENCE_BYTES:
        raise MalformedZnode(path, f"fence data of {0 if data is None else len(data)} bytes", data)
    try:
        obj = json.loads(data)
    except Exception as exc:  # ValueError, RecursionError (nesting is bounded by the size above anyway)
        raise MalformedZnode(path, f"not JSON ({type(exc).__name__})", data) from None
    epoch = obj.get("epoch") if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(obj.get("holder"), str):
        raise MalformedZnode(path, 'expected {"holder": <text>, "epoch": <int>}', data)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < 2**63:
        raise MalformedZnode(path, f"epoch must be an integer >= 0, got {json.dumps(epoch)[:40]}", data)
    return epoch


def read_ids(client: KazooClient, group: str) -> dict[str, bytes]:
    """Consumer id -> raw registration, Java order; members that vanish while read are left out."""
    out: dict[str, bytes] = {}
    for cid in java_sorted(registry.children(client, paths.ids_path(group))):
        try:
            out[cid] = client.get(paths.id_path(group, cid))[0]
        except NoNodeError:
            continue
    return out


def read_owners(client: KazooClient, group: str) -> dict[TopicPartition, str]:
    """(topic, partition) -> owning thread id (topics in Java order, partitions ascending). An owner znode whose
    data is no thread id maps to MALFORMED_OWNER; a child that is no partition id owns nothing we assign and is
    skipped; both are logged (rate-limited), neither raises."""
    out: dict[TopicPartition, str] = {}
    base = paths.owners_path(group)
    for topic in java_sorted(registry.children(client, base)):
        try:
            topic_path = paths.owners_topic_path(group, topic)
        except paths.InvalidName as exc:
            _malformed(f"{base}/{topic}", exc.rule, "skipped")
            continue
        found: list[tuple[int, str]] = []
        for name in registry.children(client, topic_path):
            try:
                partition = paths.parse_partition(topic_path, name)
            except paths.InvalidName as exc:
                _malformed(f"{topic_path}/{name}", exc.rule, "skipped")
                continue
            holder = _holder(client, f"{topic_path}/{name}")
            if holder is not None:
                found.append((partition, holder))
        for partition, holder in sorted(found):
            out[TopicPartition(topic, partition)] = holder
    return out


def _holder(client: KazooClient, path: str) -> str | None:
    try:
        data = client.get(path)[0]
    except NoNodeError:
        return None
    try:
        return decode_owner(path, data)
    except Exception as exc:  # any bytes: one owner znode's problem
        reason = exc.reason if isinstance(exc, MalformedZnode) else f"{type(exc).__name__}: {exc}"
        _malformed(path, reason, "its partition counts as held by someone unknown")
        return MALFORMED_OWNER


def _malformed(path: str, reason: str, consequence: str) -> None:
    _say.log(logging.ERROR, "mixed-malformed-owner", "malformed znode %s: %s; %s (left intact)",
             path, reason, consequence)  # fmt: skip


def adopt(client: KazooClient, group: str, holder: str) -> int:
    """Become the only writer of the group's bridged znodes: bump the fence; returns its new version."""
    path = fence_path(group)
    while True:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                client.create(path, json.dumps({"holder": holder, "epoch": 0}).encode(), makepath=True)
            continue
        epoch = decode_fence(path, data) + 1  # a malformed fence raises: nothing is written over it
        try:
            new = client.set(
                path, json.dumps({"holder": holder, "epoch": epoch}).encode(), version=stat.version
            )
        except BadVersionError:
            continue
        return int(new.version)


def fenced_write(
    client: KazooClient,
    group: str,
    fence_version: int,
    *,
    create: Sequence[tuple[str, bytes]] = (),
    delete: Sequence[str] = (),
) -> None:
    """All-or-nothing: create persistent `create` znodes and delete `delete` ones (missing ones are skipped), if
    the fence is still at `fence_version`. Raises FenceMoved, or NodeExistsError when a create found its znode
    held (the caller waits for it)."""
    for path, _ in create:
        client.ensure_path(path.rsplit("/", 1)[0])
    live = [p for p in delete if client.exists(p) is not None]
    tx = client.transaction()
    tx.check(fence_path(group), fence_version)
    for path in live:
        tx.delete(path)
    for path, data in create:
        tx.create(path, data)
    results = tx.commit()
    errors = [r for r in results if isinstance(r, Exception)]
    if not errors:
        return
    if isinstance(results[0], Exception) and not isinstance(
        results[0], (RolledBackError, RuntimeInconsistency)
    ):
        raise FenceMoved(f"group {group}: another coordinator adopted it ({results[0]!r})")
    for r in errors:
        if isinstance(r, NodeExistsError):
            raise r
    # A delete raced with someone else's (the node vanished): retry without it.
    fenced_write(client, group, fence_version, create=create, delete=[p for p in delete if client.exists(p)])


def owner_holder(client: KazooClient, group: str, tp: TopicPartition) -> str | None:
    """The thread holding `tp`'s owner znode, None when free, MALFORMED_OWNER when its data is no thread id."""
    return _holder(client, paths.owner_path(group, tp.topic, tp.partition))


def owner_payload(thread: str) -> bytes:
    return encode_owner(thread)


def wait_gone(client: KazooClient, path: str, timeout_s: float) -> bool:
    """Wait (a watch, no polling) until `path` does not exist; False on timeout."""
    gone = threading.Event()

    def watch(_event: object) -> None:
        if client.exists(path, watch=watch) is None:
            gone.set()

    if client.exists(path, watch=watch) is None:
        return True
    return gone.wait(timeout_s)


def announce_wanted(client: KazooClient, group: str, tps: Sequence[TopicPartition]) -> list[str]:
    """Create the hand-over hints of `tps` (ephemeral, this coordinator's session: they go with it): a leaving
    fast-mode legacy member holds such a partition until its hint appears (`LegacyConsumer.leave`). A hint
    already there is fine. Returns the paths created, for `withdraw_wanted`."""
    created = []
    for tp in tps:
        path = paths.wanted_path(group, tp.topic, tp.partition)
        client.ensure_path(paths.wanted_topic_path(group, tp.topic))
        with contextlib.suppress(NodeExistsError):
            client.create(path, b"", ephemeral=True)
            created.append(path)
    return created


def withdraw_wanted(client: KazooClient, created: Sequence[str]) -> None:
    """Delete the hints `announce_wanted` created (gone already: fine)."""
    for path in created:
        with contextlib.suppress(NoNodeError):
            client.delete(path)


def watch_group(
    client: KazooClient,
    group: str,
    topics: Sequence[str],
    on_change: Callable[[tuple[str, ...] | None], None],
) -> Callable[[], None]:
    """Call `on_change(ids children)` with the first read of the ids children of `group` and whenever they change
    (the caller tells our own registrations from legacy changes against the first read), and `on_change(None)`
    when the partition data of one of `topics` changes (not for its first read). Returns a function that stops
    it."""
    stopped = threading.Event()
    first = dict.fromkeys(topics, True)

    def fire(key: str, children: Sequence[str] | None) -> bool:
        if stopped.is_set():
            return False
        if first.get(key):
            first[key] = False
        else:
            on_change(None if children is None else tuple(sorted(children)))
        return True

    client.ensure_path(paths.ids_path(group))
    ChildrenWatch(client, paths.ids_path(group), lambda children: fire("", children))  # "": no topic's name
    for topic in topics:
        DataWatch(client, paths.topic_path(topic), _topic_callback(fire, topic))
    return stopped.set


def _topic_callback(
    fire: Callable[[str, Sequence[str] | None], bool], topic: str
) -> Callable[[Any, Any], bool]:
    # Two parameters exactly: kazoo's DataWatch passes the event too to a function that takes three.
    def changed(_data: Any, _stat: Any) -> bool:
        return fire(topic, None)

    return changed


def repair_ops(
    client: KazooClient, group: str, classic_ids: Sequence[str], threads: Sequence[str]
) -> list[str]:
    """Delete every ids znode in `classic_ids`, every owner held by one of `threads`, and the fence: the
    znodes of broker-protocol members left behind by coordinators that are all gone. Returns the deleted paths."""
    gone: list[str] = []
    wanted = set(threads)
    for tp, thread in read_owners(client, group).items():
        if thread in wanted:
            gone.append(paths.owner_path(group, tp.topic, tp.partition))
    gone += [paths.id_path(group, cid) for cid in classic_ids]
    deleted = []
    for path in gone:
        try:
            client.delete(path)
            deleted.append(path)
        except NoNodeError:
            continue
    with contextlib.suppress(NoNodeError):
        client.delete(fence_path(group))
    return deleted
