"""Kafka's ACLs in ZooKeeper: `/kafka-acl/<ResourceType>/<name>` in Kafka's JSON, read into a cache a serving
node consults per request, and written as `kafka-acls.sh --authorizer-properties zookeeper.connect=...` does.

Guarantees: after `start()` the cache holds every resource's ACLs; a child or data watch on each znode brings any
later change (by zkcoord, Kafka's tools, or a hand-written znode without a change notification) into it, and the
table a reader gets is an immutable snapshot swapped whole. A znode whose data is not Kafka's ACL JSON (any bytes:
size and depth bounded, any failure) denies everyone but super users on that resource, even under
allow.everyone.if.no.acl.found, replacing whatever ACLs it held (an earlier Deny cannot be frozen) and never
stopping start-up; it is logged once per distinct reason, and a repaired znode counts from its next write. A
write merges with the ACLs already there (versioned, retried on a race; refused when the stored znode is
malformed, which is left as it is) and announces the resource under `/kafka-acl-changes` (`acl_changes_N`
holding `Topic:name`) so running Kafka brokers reload it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from kazoo.exceptions import NoNodeError

from zkcoord.errors import ConfigError
from zkcoord.security.acl import (
    WILDCARD_PRINCIPAL,
    Acl,
    AclTable,
    Operation,
    Permission,
    Resource,
    ResourceType,
    encode_acls,
    parse_acls,
)
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.session import Client, connect, update_znode

log = logging.getLogger(__name__)

ACL_ROOT = "/kafka-acl"
CHANGES_PATH = "/kafka-acl-changes"
CHANGE_PREFIX = "acl_changes_"
# What a malformed ACL znode stands for: nobody but a super user.
_FAIL_CLOSED = (Acl(WILDCARD_PRINCIPAL, Permission.DENY, Operation.ALL),)


def resource_path(resource: Resource) -> str:
    name = resource.name
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"a resource name cannot be empty, '.', '..' or contain '/': {name!r}")
    return f"{ACL_ROOT}/{resource.type.value}/{name}"


def read_acls(client: Client, resource: Resource) -> tuple[tuple[Acl, ...], int | None]:
    """The resource's ACLs and znode version (None: no znode)."""
    path = resource_path(resource)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return (), None
    try:
        return parse_acls(data), stat.version
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def add_acls(client: Client, resource: Resource, acls: Iterable[Acl]) -> tuple[Acl, ...]:
    """Add `acls` to the resource's set (kept: the others); returns the stored set."""
    path = resource_path(resource)
    new = tuple(acls)

    def merge() -> tuple[bytes, int | None]:
        current, version = read_acls(client, resource)
        return encode_acls(current + new), version

    data = update_znode(client, path, merge)
    client.create(
        f"{CHANGES_PATH}/{CHANGE_PREFIX}",
        f"{resource.type.value}:{resource.name}".encode(),
        sequence=True,
        makepath=True,
    )
    return parse_acls(data)


class AclCache:
    """Every `/kafka-acl` resource's ACLs, kept current by watches on its own ZooKeeper session. `table` is
    read on the event loop without a lock: it is replaced, never changed."""

    def __init__(self, hosts: str, auth: ZkAuth = NO_AUTH) -> None:
        self.hosts = hosts
        self.auth = auth
        self._client: Client | None = None
        self._lock = threading.Lock()  # writers only (kazoo's callback thread and start)
        self._acls: dict[Resource, tuple[Acl, ...]] = {}
        self._watched: set[str] = set()
        self.table: AclTable = MappingProxyType({})
        self.malformed: dict[str, str] = {}  # path -> why, for every znode read as malformed (fail closed)
        self.malformed_writes = 0

    def start(self) -> None:
        client = self._client = connect(self.hosts, auth=self.auth)
        for rtype in ResourceType:
            # Kafka's authorizer creates these at start (createAclPaths); a ChildrenWatch needs its node.
            client.ensure_path(f"{ACL_ROOT}/{rtype.value}")
            client.ChildrenWatch(f"{ACL_ROOT}/{rtype.value}", self._on_children(rtype))

    def _on_children(self, rtype: ResourceType) -> Any:
        def on_children(children: list[str]) -> None:
            assert self._client is not None
            for name in sorted(children):
                path = f"{ACL_ROOT}/{rtype.value}/{name}"
                with self._lock:
                    if path in self._watched:
                        continue
                    self._watched.add(path)
                # A DataWatch keeps watching across deletion and re-creation; it reads the data now.
                self._client.DataWatch(path, self._on_data(Resource(rtype, name)))

        return on_children

    def _on_data(self, resource: Resource) -> Any:
        path = f"{ACL_ROOT}/{resource.type.value}/{resource.name}"

        def on_data(data: bytes | None, _stat: Any) -> None:
            reason: str | None = None
            if data is None:
                acls: tuple[Acl, ...] = ()
            else:
                try:
                    acls = parse_acls(data)
                except Exception as exc:  # whatever fails, this resource fails closed
                    reason = (
                        str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"[:200]
                    )
                    acls = _FAIL_CLOSED
            with self._lock:
                if acls:
                    self._acls[resource] = acls
                else:
                    self._acls.pop(resource, None)
                self.table = MappingProxyType(dict(self._acls))
                self._report(path, reason, len(data) if data is not None else 0)
            if reason is None:
                log.info("ACLs of %s: %d entries", resource, len(acls))

        return on_data

    def _report(self, path: str, reason: str | None, size: int) -> None:
        """Log a malformed znode once per distinct reason (a writer repeating the same bad data adds no lines;
        `malformed_writes` counts every one), and its repair once."""
        before = self.malformed.get(path)
        if reason is None:
            if before is not None:
                del self.malformed[path]
                log.warning("%s: parses again; its ACLs apply from now on", path)
            return
        self.malformed_writes += 1
        self.malformed[path] = reason
        if before != reason:
            log.warning(
                "%s: malformed ACL znode (%d bytes: %s); denying everyone but super users on this resource "
                "until it is repaired",
                path,
                size,
                reason,
            )

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None
