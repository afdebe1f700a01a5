"""Which brokers in a ZooKeeper-era registry are zkcoord cluster nodes and which belong to someone else's cluster:
a zkcoord node marks its registration with an ephemeral `/zkcoord/brokers/<id>` of the same session, and the
read here (`foreign_brokers`) only reads, so a node can refuse to join a real cluster before it writes anything.

Why the session and not the payload: a broker's registration JSON is read by every Kafka tool and client of that
era, so zkcoord adds nothing to it; and a marker alone could outlive or predate its node. `/brokers/ids/N` is
zkcoord's only when `/zkcoord/brokers/N` exists with the same ephemeral owner (both go with one session, which
ZooKeeper closes in one transaction); `/controller` is zkcoord's only when its owner is the session of a marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, ControllerInfo
from zkcoord.zk.registry import NodeIdInUse, claim_node_id

MARKS_ROOT = "/zkcoord/brokers"


def mark_path(node_id: int) -> str:
    return f"{MARKS_ROOT}/{int(node_id)}"


class MarkInUse(NodeIdInUse):
    """Another live session holds this node id's zkcoord mark."""


def mark_node(client: KazooClient, node_id: int, kind: str = "serve") -> None:
    """Create this session's ephemeral mark for node `node_id` (before `/brokers/ids/N`, so a registration of a
    zkcoord node is never seen unmarked). A mark of our own session (a retried create) is success."""
    data = json.dumps({"version": 1, "node_id": node_id, "kind": kind}, sort_keys=True).encode()
    claim_node_id(client, node_id, mark_path(node_id), data, verb="mark", error=MarkInUse)


@dataclass(frozen=True, slots=True)
class ForeignBroker:
    """A broker registered in ZooKeeper that no zkcoord node registered."""

    node_id: int
    endpoints: tuple[str, ...]  # as registered ('PLAINTEXT://host:port'); empty if the payload did not decode
    controller: bool  # it holds /controller

    def describe(self) -> str:
        where = ", ".join(self.endpoints) or "endpoints unreadable"
        return f"broker {self.node_id} ({where}{', controller' if self.controller else ''})"


@dataclass(frozen=True, slots=True)
class ForeignCluster:
    """What `foreign_brokers` found: registered brokers and, separately, a /controller held by a foreign session
    whose broker is not (or no longer) registered."""

    brokers: tuple[ForeignBroker, ...]
    controller_only: (
        int | None
    )  # /controller names this broker id, held by a non-zkcoord session, unregistered

    def __bool__(self) -> bool:
        return bool(self.brokers) or self.controller_only is not None

    def describe(self) -> str:
        parts = [b.describe() for b in self.brokers]
        if self.controller_only is not None:
            parts.append(f"/controller held by broker {self.controller_only} (not registered)")
        return "; ".join(parts)


def _owner(client: KazooClient, path: str) -> int | None:
    try:
        _, stat = client.get(path)
    except NoNodeError:
        return None
    return int(stat.ephemeralOwner)


def foreign_brokers(client: KazooClient) -> ForeignCluster:
    """Read-only: the brokers in /brokers/ids and the /controller holder that are not zkcoord nodes."""
    marks: dict[int, int] = {}
    try:
        names = client.get_children(MARKS_ROOT)
    except NoNodeError:
        names = []
    for name in names:
        if name.isascii() and name.isdigit():
            owner = _owner(client, mark_path(int(name)))
            if owner:
                marks[int(name)] = owner
    try:
        ids = sorted(int(n) for n in client.get_children(paths.BROKER_IDS) if n.isascii() and n.isdigit())
    except NoNodeError:
        ids = []
    controller_id: int | None = None
    controller_owner: int | None = None
    try:
        data, stat = client.get(paths.CONTROLLER)
        controller_owner = int(stat.ephemeralOwner)
        try:
            controller_id = ControllerInfo.decode(paths.CONTROLLER, data).brokerid
        except MalformedZnode:
            controller_id = -1
    except NoNodeError:
        pass
    foreign: list[ForeignBroker] = []
    for node_id in ids:
        path = paths.broker_path(node_id)
        try:
            data, stat = client.get(path)
        except NoNodeError:
            continue  # went away while we read
        if marks.get(node_id) == stat.ephemeralOwner:
            continue
        try:
            reg = BrokerRegistration.decode(path, data)
            endpoints = reg.endpoints or ((f"{reg.host}:{reg.port}",) if reg.host else ())
        except MalformedZnode:
            endpoints = ()
        foreign.append(ForeignBroker(node_id, tuple(endpoints), controller_id == node_id))
    controller_only = None
    foreign_controller = controller_owner is not None and controller_owner not in marks.values()
    if foreign_controller and not any(b.controller for b in foreign):
        controller_only = controller_id if controller_id is not None else -1
    return ForeignCluster(tuple(foreign), controller_only)
