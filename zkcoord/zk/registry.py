"""Reads and writes of the 0.8-era cluster and consumer-group registry in ZooKeeper, through the legacy codecs.

Guarantees: every read that meets bad data raises `MalformedZnode` naming the znode and writes nothing back;
a znode that vanishes between a listing and its read (a broker or member going away) is skipped, not an
error; writes use Kafka's primitives (`updatePersistentPath`: set, else create with parents; ephemeral
registration checked against our own session like 0.9's `ZKCheckedEphemeral`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from zkcoord.errors import MalformedZnode, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import (
    METADATA_TOPIC_ID,
    ZERO_UUID,
    BrokerRegistration,
    ConsumerRegistration,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    decode_controller_epoch,
    decode_offset,
    decode_owner,
    kafka_uuid_string,
)
from zkcoord.legacy.ids import java_sorted
from zkcoord.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class DuplicateBrokerId(ZkcoordError):
    """Another session holds `/brokers/ids/N`: Kafka's "A broker is already registered on the path"."""

    def __init__(self, path: str, owner_session: int) -> None:
        super().__init__(
            f"A broker is already registered on the path {path} (ephemeral owner session 0x{owner_session:x}). "
            "This probably indicates that you either have configured a brokerid that is already in use, or "
            "else you have shutdown this broker and restarted it faster than the zookeeper timeout so it "
            "appears to be re-registering."
        )
        self.path = path
        self.owner_session = owner_session


class NoLeader(ZkcoordError, LookupError):
    """A partition has no reachable leader in the registry (no state znode, leader -1, or no broker znode)."""

    retriable = True


class ZnodeVersionConflict(ZkcoordError, BadVersionError):  # type: ignore[misc]
    """A versioned write lost the race: the znode is no longer at the expected version."""

    def __init__(self, path: str, expected: int) -> None:
        ZkcoordError.__init__(self, f"{path} is no longer at version {expected}")
        self.path = path
        self.expected = expected


class TopicAlreadyMarkedForDeletion(ZkcoordError):
    """`/admin/delete_topics/T` already exists (0.10.x `TopicAlreadyMarkedForDeletionException`)."""


# --- primitives -------------------------------------------------------------------------------------------------


def _get(client: KazooClient, path: str) -> bytes | None:
    """Data of `path`, or None when it does not exist."""
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return bytes(data) if data is not None else b""


def children(client: KazooClient, path: str) -> list[str]:
    """Children of `path`, or none when it does not exist (Kafka's getChildrenParentMayNotExist)."""
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def update_persistent_path(client: KazooClient, path: str, data: bytes) -> int:
    """Kafka's `updatePersistentPath`: set; on NoNode create with parents; on NodeExists set again.
    Returns the znode version after the write."""
    try:
        return int(client.set(path, data).version)
    except NoNodeError:
        pass
    try:
        client.create(path, data, makepath=True)
        return 0
    except NodeExistsError:
        return int(client.set(path, data).version)


def ensure_cluster_paths(client: KazooClient, *, generation: str = "0.10.2") -> tuple[str, ...]:
    """The persistent paths a broker of `generation` ("0.8.2" or "0.10.2") creates at start-up."""
    if generation not in ("0.8.2", "0.10.2"):
        raise ValueError(f"generation must be '0.8.2' or '0.10.2', got {generation!r}")
    wanted = paths.PERSISTENT_PATHS_0_8_2 if generation == "0.8.2" else paths.PERSISTENT_PATHS_0_10_2
    for path in wanted:
        client.ensure_path(path)
    return wanted


# --- brokers: the one home of /brokers/ids reads and writes --------------------------------------------------


class NodeIdInUse(ZkcoordError):
    """Another live process is registered with this node id."""


def create_checked_ephemeral(
    client: KazooClient,
    path: str,
    data: bytes,
    in_use: Callable[[int | None], Exception],
    *,
    attempts: int = 3,
) -> None:
    """0.9+ `ZKCheckedEphemeral`: create the ephemeral `path` (parents made as needed). NodeExists owned by our
    own session (a retried create after a connection loss) is success. Raises `in_use(owner session)` when
    another session holds it, `in_use(None)` when it kept changing hands."""
    for _ in range(attempts):
        try:
            client.create(path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            try:
                _, stat = client.get(path)
            except NoNodeError:
                continue  # the old owner just went away: create again
            own_session = client.client_id[0] if client.client_id else None
            if stat.ephemeralOwner == own_session:
                return
            raise in_use(int(stat.ephemeralOwner)) from None
    raise in_use(None)


def _broker_id(name: str) -> int:
    if not (name.isascii() and name.isdigit()) or int(name) > 2**31 - 1:
        raise MalformedZnode(f"{paths.BROKER_IDS}/{name}", "child name is not a broker id")
    return int(name)


def read_brokers(client: KazooClient) -> dict[int, BrokerRegistration]:
    """Every registered broker by id (ascending), decoded; none when `/brokers/ids` is missing. Strict (tools):
    a child that is no broker id or a registration that does not parse raises MalformedZnode."""
    out: dict[int, BrokerRegistration] = {}
    for broker_id in sorted(_broker_id(c) for c in children(client, paths.BROKER_IDS)):
        path = paths.broker_path(broker_id)
        data = _get(client, path)
        if data is not None:
            out[broker_id] = BrokerRegistration.decode(path, data)
    return out


def read_broker_znodes(
    client: KazooClient, watch: Callable[[Any], None] | None = None, *, watch_each: bool = False
) -> dict[int, tuple[bytes, ZnodeStat]]:
    """Raw data and stat of every live registration, for readers that decode each broker themselves and skip a
    bad one (a node, the proxy, the controller): children that are not ids are left out, NoNodeError when
    `/brokers/ids` is missing. `watch` is set on the listing, and with `watch_each` on every registration too."""
    out: dict[int, tuple[bytes, ZnodeStat]] = {}
    for name in client.get_children(paths.BROKER_IDS, watch=watch):
        if not name.isdigit():
            continue
        try:
            data, stat = client.get(paths.broker_path(int(name)), watch=watch if watch_each else None)
        except NoNodeError:
            continue
        out[int(name)] = (data, stat)
    return out


def read_broker_data(client: KazooClient, watch: Callable[[Any], None] | None = None) -> dict[int, bytes]:
    """`read_broker_znodes` without the stats: raw registration data of every live node, by id."""
    return {node: data for node, (data, _) in read_broker_znodes(client, watch).items()}


def read_broker(client: KazooClient, broker_id: int) -> BrokerRegistration | None:
    path = paths.broker_path(broker_id)
    data = _get(client, path)
    return None if data is None else BrokerRegistration.decode(path, data)


def claim_node_id(
    client: KazooClient,
    node_id: int,
    path: str,
    data: bytes,
    *,
    verb: str = "register",
    error: type[NodeIdInUse] = NodeIdInUse,
) -> None:
    """A zkcoord node's ephemeral, checked znode for its id (`/brokers/ids/N`, its mark): another session's
    znode ⇒ `error` (NodeIdInUse) telling the operator what to do."""

    def in_use(owner: int | None) -> Exception:
        if owner is None:
            return error(f"could not {verb} node id {node_id} at {path}: it kept changing hands")
        return error(
            f"node id {node_id} is already registered at {path} by another live session "
            f"(0x{owner:x}); pick another --node-id or stop that process"
        )

    create_checked_ephemeral(client, path, data, in_use)


def register_node(client: KazooClient, node_id: int, registration: bytes) -> None:
    """A zkcoord node's `/brokers/ids/N` (ephemeral, checked): another session's znode ⇒ NodeIdInUse."""
    claim_node_id(client, node_id, paths.broker_path(node_id), registration)


def register_broker(
    client: KazooClient,
    broker_id: int,
    host: str,
    port: int,
    *,
    version: int = 4,
    endpoints: Sequence[str] | None = None,
    rack: str | None = None,
    timestamp_ms: int,
    jmx_port: int = -1,
) -> BrokerRegistration:
    """Create the ephemeral `/brokers/ids/N` of a broker as Kafka writes it (tools, tests). A node already there
    is accepted only if our own session made it (a retried create after connection loss); otherwise
    `DuplicateBrokerId`."""
    registration = BrokerRegistration.create(
        host,
        port,
        version=version,
        endpoints=endpoints,
        rack=rack,
        timestamp_ms=timestamp_ms,
        jmx_port=jmx_port,
    )
    path = paths.broker_path(broker_id)
    create_checked_ephemeral(
        client,
        path,
        registration.encode(),
        lambda owner: NodeExistsError(path) if owner is None else DuplicateBrokerId(path, owner),
    )
    return registration


# --- topics and partition state --------------------------------------------------------------------------------


def read_topic(client: KazooClient, topic: str) -> TopicAssignment | None:
    path = paths.topic_path(topic)
    data = _get(client, path)
    return None if data is None else TopicAssignment.decode(path, data)


def read_topics(client: KazooClient) -> dict[str, TopicAssignment]:
    """Every topic's replica assignment, topics in Java String order."""
    out: dict[str, TopicAssignment] = {}
    for topic in java_sorted(children(client, paths.BROKER_TOPICS)):
        assignment = read_topic(client, topic)
        if assignment is not None:
            out[topic] = assignment
    return out


def new_topic_id() -> uuid.UUID:
    """A fresh KIP-516 topic id as Kafka's `Uuid.randomUuid` draws one: random, never a reserved id, and never one
    whose string starts with "-" (command-line tools would read it as an option)."""
    while True:
        value = uuid.uuid4()
        if value not in (ZERO_UUID, METADATA_TOPIC_ID) and not kafka_uuid_string(value).startswith("-"):
            return value


def write_topic(client: KazooClient, topic: str, replicas: Mapping[int, Sequence[int]]) -> TopicAssignment:
    """Create or update the persistent `/brokers/topics/T` (AdminUtils.writeTopicPartitionAssignment, as a
    0.8-era tool writes it: a new topic gets no id). An update keeps the stored topic id (Kafka's addPartitions
    rewrites the id it read) and is conditional on the version read: ZnodeVersionConflict when the znode moved."""
    path = paths.topic_path(topic)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        assignment = TopicAssignment.of(replicas)
        client.create(path, assignment.encode(), makepath=True)
        return assignment
    stored = TopicAssignment.decode(path, data)
    assignment = TopicAssignment.of(replicas, version=stored.version, topic_id=stored.topic_id)
    try:
        client.set(path, assignment.encode(), version=stat.version)
    except (BadVersionError, NoNodeError):
        raise ZnodeVersionConflict(path, stat.version) from None
    return assignment


def read_partition_state_versioned(
    client: KazooClient, topic: str, partition: int
) -> tuple[PartitionState, int] | None:
    """(state, znode version) for fenced updates, or None when the state znode is missing."""
    path = paths.partition_state_path(topic, partition)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    return PartitionState.decode(path, data), int(stat.version)


def read_partition_state(client: KazooClient, topic: str, partition: int) -> PartitionState | None:
    found = read_partition_state_versioned(client, topic, partition)
    return None if found is None else found[0]


def write_partition_state(
    client: KazooClient, topic: str, partition: int, state: PartitionState, *, version: int | None = None
) -> int:
    """Write `.../partitions/P/state`; returns the new znode version. With `version`, a conditional set that
    raises `ZnodeVersionConflict` (also a kazoo `BadVersionError`) when the znode moved or is gone."""
    path = paths.partition_state_path(topic, partition)
    if version is None:
        return update_persistent_path(client, path, state.encode())
    try:
        return int(client.set(path, state.encode(), version=version).version)
    except (BadVersionError, NoNodeError):
        raise ZnodeVersionConflict(path, version) from None


def leader_endpoint(
    client: KazooClient, topic: str, partition: int, protocol: str = "PLAINTEXT"
) -> tuple[str, int]:
    """(host, port) of the partition's leader: partition state -> broker registration -> the endpoint of the
    client's security `protocol` (BrokerRegistration.endpoint_for)."""
    state = read_partition_state(client, topic, partition)
    if state is None:
        raise NoLeader(f"no partition state for [{topic},{partition}]")
    if state.leader < 0:
        raise NoLeader(f"partition [{topic},{partition}] has no leader (leader {state.leader})")
    broker = read_broker(client, state.leader)
    if broker is None:
        raise NoLeader(
            f"leader {state.leader} of [{topic},{partition}] is not registered in {paths.BROKER_IDS}"
        )
    endpoint = broker.endpoint_for(protocol)
    if endpoint is None:
        raise NoLeader(f"leader {state.leader} of [{topic},{partition}] has no {protocol} listener")
    return endpoint


def mark_topic_for_deletion(client: KazooClient, topic: str) -> None:
    """Create `/admin/delete_topics/T` (empty), as AdminUtils.deleteTopic does."""
    try:
        client.create(paths.delete_topic_path(topic), b"", makepath=True)
    except NodeExistsError:
        raise TopicAlreadyMarkedForDeletion(f"topic {topic} is already marked for deletion") from None


# --- cluster id -----------------------------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
_CLUSTER_ID_MAX_BYTES = 4096


def decode_cluster_id(data: bytes) -> str:
    """The id in `/cluster/id` = `{"version":"1","id":"<id>"}` (Kafka's ClusterIdZNode); MalformedZnode else."""
    if len(data) > _CLUSTER_ID_MAX_BYTES:
        raise MalformedZnode(CLUSTER_ID_PATH, f"{len(data)} bytes, more than {_CLUSTER_ID_MAX_BYTES}")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedZnode(CLUSTER_ID_PATH, f"not JSON ({exc})", data) from None
    cluster_id = doc.get("id") if isinstance(doc, dict) else None
    if not isinstance(cluster_id, str) or not cluster_id:
        raise MalformedZnode(CLUSTER_ID_PATH, 'no non-empty string "id"', data)
    return cluster_id


def get_or_create_cluster_id(client: KazooClient, new_id: str) -> str:
    """The cluster's id, as KafkaServer.getOrGenerateClusterId: the one in `/cluster/id` if present, else
    `new_id` written there (a create that another node won is read back); MalformedZnode for a bad znode."""
    data = _get(client, CLUSTER_ID_PATH)
    if data is None:
        doc = json.dumps({"version": "1", "id": new_id}, separators=(",", ":")).encode()
        try:
            client.create(CLUSTER_ID_PATH, doc, makepath=True)
            return new_id
        except NodeExistsError:
            data, _ = client.get(CLUSTER_ID_PATH)
    return decode_cluster_id(data)


# --- controller ------------------------------------------------------------------------------------------------


def read_controller(client: KazooClient) -> ControllerInfo | None:
    data = _get(client, paths.CONTROLLER)
    return None if data is None else ControllerInfo.decode(paths.CONTROLLER, data)


def read_controller_epoch(client: KazooClient) -> tuple[int, int] | None:
    """(epoch, znode version) of `/controller_epoch`, or None when absent."""
    try:
        data, stat = client.get(paths.CONTROLLER_EPOCH)
    except NoNodeError:
        return None
    return decode_controller_epoch(paths.CONTROLLER_EPOCH, data), int(stat.version)


# --- consumer groups --------------------------------------------------------------------------------------------


def list_groups(client: KazooClient) -> list[str]:
    """Children of `/consumers`, in Java String order."""
    return java_sorted(children(client, paths.CONSUMERS))


def group_exists(client: KazooClient, group: str) -> bool:
    return client.exists(paths.group_path(group)) is not None


def read_registrations(client: KazooClient, group: str) -> dict[str, ConsumerRegistration]:
    """Members of `group` (ids children in Java order) with their registrations."""
    out: dict[str, ConsumerRegistration] = {}
    for cid in java_sorted(children(client, paths.ids_path(group))):
        path = paths.id_path(group, cid)
        data = _get(client, path)
        if data is not None:
            out[cid] = ConsumerRegistration.decode(path, data)
    return out


def _partition_children(client: KazooClient, parent: str) -> list[int]:
    found = []
    for name in children(client, parent):
        try:
            found.append(paths.parse_partition(parent, name))
        except paths.InvalidName as exc:
            raise MalformedZnode(f"{parent}/{name}", exc.rule) from None
    return sorted(found)


def read_owners(client: KazooClient, group: str) -> dict[TopicPartition, str]:
    """(topic, partition) -> owning thread id, topics in Java order then partitions ascending."""
    out: dict[TopicPartition, str] = {}
    for topic in java_sorted(children(client, paths.owners_path(group))):
        for p in _partition_children(client, paths.owners_topic_path(group, topic)):
            path = paths.owner_path(group, topic, p)
            data = _get(client, path)
            if data is not None:
                out[TopicPartition(topic, p)] = decode_owner(path, data)
    return out


def read_offsets(client: KazooClient, group: str) -> dict[TopicPartition, int]:
    """(topic, partition) -> next offset to consume, topics in Java order then partitions ascending."""
    out: dict[TopicPartition, int] = {}
    for topic in java_sorted(children(client, paths.offsets_path(group))):
        for p in _partition_children(client, paths.offsets_topic_path(group, topic)):
            path = paths.offset_path(group, topic, p)
            data = _get(client, path)
            if data is not None:
                out[TopicPartition(topic, p)] = decode_offset(path, data)
    return out
