"""One proxy node: the bootstrap listener, a listener per real broker (ports from zkcoord.proxy.ports), the broker
list watched in ZooKeeper, and, for the groups matching `--bridge-zk-groups`, zkcoord's own group coordinator
answering their group APIs.

The coordinator is cluster mode itself, run by the proxy nodes among themselves inside the ZooKeeper subtree
`/zkcoord/proxy-cluster` (a chroot): each proxy node registers there as node `--node-id` with its advertised
bootstrap address, one of them is that small cluster's controller, the offsets partitions are led by live proxy
nodes, and the coordinator records are fenced per partition (zkcoord.server.cluster_routing, zkcoord.zk.record_store).
So several proxy nodes share the groups with the failover `serve --zk` nodes have, and a group's FindCoordinator
names the proxy node that leads its offsets partition.

Guarantees: it never writes the cluster's znodes (`/brokers`, `/controller`, `/controller_epoch`, `/admin`,
`/config`, `/cluster`): it reads `/brokers/ids`, and writes only under `/zkcoord` (its announcement, the proxy
cluster) and what the mixed-group and offset bridges and OffsetCommit v0 write (`/consumers/G/...`); no client is ever told a real
broker's address (an answer whose addresses cannot be mapped closes the connection); it stores no partition data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.bridge.membership import MixedGroupBridge
from zkcoord.bridge.mirror import ZkOffsetBridge
from zkcoord.bridge.zk_store import ZkOffsetBridgeStore
from zkcoord.cluster.node import ClusterConfig
from zkcoord.errors import ConfigError, MalformedZnode
from zkcoord.group import messages as gm
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import TopicAssignment
from zkcoord.proxy.brokers import Brokers, BrokerWatch
from zkcoord.proxy.forward import Link, listen
from zkcoord.proxy.ports import PortMap
from zkcoord.proxy.topics import ClusterTopics
from zkcoord.proxy.upstream import PLAINTEXT, UpstreamSecurity
from zkcoord.security.acl import Operation, Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server import messages as dm
from zkcoord.server.authorization import RequestAuthorizer, authorized_group_call
from zkcoord.server.cluster_routing import ClusterRouting
from zkcoord.server.groups import GroupDispatch
from zkcoord.server.listener_security import ListenerSecurity
from zkcoord.server.log import LogManager
from zkcoord.server.offsets_v0 import ZooKeeperOffsetsV0
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.handoff import HandoffWatch, Phase
from zkcoord.zk.offset_store import read_node
from zkcoord.zk.registrations import announce
from zkcoord.zk.session import Client, connect, ensure_chroot

log = logging.getLogger(__name__)

PROXIES_ROOT = "/zkcoord/proxies"
PROXY_CLUSTER_ROOT = (
    "/zkcoord/proxy-cluster"  # the proxies' own zkcoord cluster (a chroot): never the real one's
)


def chroot_below(connect_string: str, path: str) -> tuple[str, str]:
    """(hosts, chroot) for `path` below whatever chroot `connect_string` already has."""
    hosts, slash, chroot = connect_string.partition("/")
    base = f"/{chroot.rstrip('/')}" if slash and chroot.strip("/") else ""
    return hosts, base + path


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    zk_connect: str
    host: str  # --listen host (bootstrap and broker ports bind there)
    node_id: int
    data_dir: Path
    ports: PortMap
    advertise_host: str | None = None  # what clients are told (default: host)
    bridge_groups: str | None = None  # groups the proxy coordinates (fullmatch)
    bridge_offsets: bool = False
    max_request_bytes: int = 100 * 1024 * 1024
    zk_auth: ZkAuth = NO_AUTH
    group_config: GroupConfig = field(default_factory=GroupConfig)
    zk_session_timeout_s: float = 6.0
    # Client side: what every port of the proxy requires (None: PLAINTEXT), and the ACLs of the groups it answers.
    security: ListenerSecurity | None = None
    authorizer: RequestAuthorizer | None = None
    # Broker side: how the proxy connects to the brokers (--command-config), and so which endpoint it uses.
    upstream: UpstreamSecurity = PLAINTEXT

    def __post_init__(self) -> None:
        if not 0 <= self.node_id < 2**31:
            raise ConfigError(f"--node-id must be in 0..2^31-1, got {self.node_id}")
        if self.bridge_groups is not None:
            try:
                re.compile(self.bridge_groups)
            except re.error as exc:
                raise ConfigError(f"--bridge-zk-groups: not a regular expression: {exc}") from exc
        if self.bridge_offsets and self.bridge_groups is None:
            raise ConfigError(
                "--bridge-zk-offsets applies to the groups the proxy coordinates: give --bridge-zk-groups"
            )

    @property
    def advertised(self) -> str:
        return self.advertise_host or self.host


class ProxyNode:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.caps = kp.proxy_version_caps()
        self.client: Client | None = None
        self.watch: BrokerWatch | None = None
        self._servers: dict[int | None, asyncio.base_events.Server] = {}  # None: the bootstrap
        self._starting: dict[int, asyncio.Task[None]] = {}
        self._links: set[asyncio.Task[None]] = set()
        self._seen: dict[int, tuple[str, int]] = {}  # brokers named in answers but not (yet) in ZooKeeper
        self._pattern = re.compile(config.bridge_groups) if config.bridge_groups is not None else None
        self.groups: ClusterRouting | None = None
        self._logs: LogManager | None = None
        self._dispatch: GroupDispatch | None = None
        self._members: MixedGroupBridge | None = None
        self._mirror: ZkOffsetBridge | None = None
        self._mirror_store: ZkOffsetBridgeStore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.handoffs: HandoffWatch | None = None
        self.topics: ClusterTopics | None = None  # the cluster's topic ids, for consumer-protocol members
        self._tls = config.security.tls if config.security is not None else None

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self.client = await asyncio.to_thread(
            connect, cfg.zk_connect, session_timeout_s=cfg.zk_session_timeout_s, auth=cfg.zk_auth
        )
        self.watch = BrokerWatch(self.client, self._brokers_changed, cfg.upstream.protocol)
        await asyncio.to_thread(self.watch.start)
        if cfg.node_id in self.watch.brokers:
            raise ConfigError(
                f"--node-id {cfg.node_id} is a broker of the cluster behind the proxy: clients would take the "
                "proxy's coordinator for that broker; pick an id no broker uses"
            )
        if self._pattern is not None:
            self.handoffs = HandoffWatch(self.client)
            await asyncio.to_thread(self.handoffs.start)
            await self._start_groups()
        try:
            server = await listen(
                cfg.host, cfg.ports.bootstrap, self._accept(None), self._links, ssl=self._tls
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {cfg.host}:{cfg.ports.bootstrap} (the bootstrap, --listen/--listeners): "
                f"{os.strerror(exc.errno) if exc.errno else exc}; is another proxy or server on that port?"
            ) from None
        self._servers[None] = server
        await self._sync(dict(self.watch.brokers))
        data = json.dumps(
            {
                "version": 1,
                "node_id": cfg.node_id,
                "host": cfg.advertised,
                "port": cfg.ports.bootstrap,
                "groups": cfg.bridge_groups,  # the groups it coordinates (`migrate handoff` reads it)
            },
            sort_keys=True,
        ).encode()
        await asyncio.to_thread(announce, self.client, f"{PROXIES_ROOT}/node-{cfg.node_id}-", data)

    async def _start_groups(self) -> None:
        cfg = self.config
        assert cfg.bridge_groups is not None
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self._members = MixedGroupBridge(
            cfg.zk_connect, cfg.bridge_groups, holder=f"proxy-{cfg.node_id}", auth=cfg.zk_auth
        )
        await self._members.start()
        if cfg.bridge_offsets:
            self._mirror_store = ZkOffsetBridgeStore(cfg.zk_connect, auth=cfg.zk_auth)
            await asyncio.to_thread(self._mirror_store.start)
            self._mirror = ZkOffsetBridge(self._mirror_store)
            await self._mirror.start()
        self.topics = ClusterTopics(lambda: self._upstream(None), cfg.upstream)
        self.topics.start()
        hosts, chroot = chroot_below(cfg.zk_connect, PROXY_CLUSTER_ROOT)
        cluster_connect = await asyncio.to_thread(ensure_chroot, hosts, chroot, cfg.zk_auth)
        # Partition logs are never written: nothing is produced to the proxies' cluster (its one topic is
        # __consumer_offsets, whose records are in ZooKeeper); the manager is what cluster routing reads topics into.
        self._logs = LogManager(cfg.data_dir)
        self.groups = ClusterRouting(
            ClusterConfig(
                zookeeper_connect=cluster_connect,
                node_id=cfg.node_id,
                host=cfg.advertised,
                port=cfg.ports.bootstrap,
                offsets_topic_num_partitions=cfg.group_config.offsets_topic_num_partitions,
                zookeeper_session_timeout_ms=int(cfg.zk_session_timeout_s * 1000),
                zookeeper_auth=cfg.zk_auth,
            ),
            cfg.group_config,
            self._logs,
            None,
            self._mirror,
            self._members,
            topics=self.topics.lookup,
            topic_names=self.topics.names,
        )
        await self.groups.start()
        # A commit's partitions are checked against the cluster's topics, as Kafka's own coordinator checks them.
        self._dispatch = GroupDispatch(
            self.groups, authorizer=cfg.authorizer, partition_count=self.topics.partitions
        )

    async def close(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._starting.values()) + list(self._links):
            task.cancel()
        for task in list(self._starting.values()) + list(self._links):
            with contextlib.suppress(BaseException):
                await task
        if self.watch is not None:
            self.watch.close()
        if self.handoffs is not None:
            self.handoffs.close()
        if self.topics is not None:
            self.topics.close()
        if self.groups is not None:
            await self.groups.close()
        if self._logs is not None:
            self._logs.close()
        if self._members is not None:
            await self._members.close()
        if self._mirror is not None:
            await self._mirror.close()
        if self._mirror_store is not None:
            await asyncio.to_thread(self._mirror_store.close)
        if self.client is not None:
            client = self.client

            def stop() -> None:
                try:
                    client.stop()
                finally:
                    client.close()

            await asyncio.to_thread(stop)

    # -- brokers and their ports ---------------------------------------------------------------------------

    def port_of(self, node_id: int) -> int | None:
        server = self._servers.get(node_id)
        return int(server.sockets[0].getsockname()[1]) if server is not None else None

    def _brokers_changed(self, brokers: Brokers) -> None:  # kazoo's thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: loop.create_task(self._sync_watched(brokers)))

    async def _sync_watched(self, brokers: Brokers) -> None:
        """A change of /brokers/ids: a broker port that cannot be opened is logged (the proxy keeps serving the
        others; the next change tries again), at start it stops the proxy (`start`)."""
        try:
            await self._sync(brokers)
        except ConfigError as exc:
            log.error("proxy: %s", exc)

    async def _sync(self, brokers: Brokers) -> None:
        for node_id in sorted(brokers):
            await self._listen_for(node_id)

    async def _listen_for(self, node_id: int) -> None:
        if node_id in self._servers:
            return
        task = self._starting.get(node_id)
        if task is None:
            task = self._starting[node_id] = asyncio.get_running_loop().create_task(self._bind(node_id))
        await asyncio.shield(task)

    async def _bind(self, node_id: int) -> None:
        port = self.config.ports.port_for(node_id)
        try:
            self._servers[node_id] = await listen(
                self.config.host, port, self._accept(node_id), self._links, ssl=self._tls
            )
        except OSError as exc:
            self._starting.pop(node_id, None)  # the next change of /brokers/ids tries again
            raise ConfigError(
                f"cannot listen on {self.config.host}:{port}, broker {node_id}'s port: "
                f"{os.strerror(exc.errno) if exc.errno else exc}; "
                f"give it a free one with --broker-port {node_id}=PORT, or move every broker port with "
                "--broker-ports BASE (docs/proxy.md 'Ports')"
            ) from None
        log.info("proxy: broker %d behind %s:%d", node_id, self.config.host, port)

    def _upstream(self, node_id: int | None) -> tuple[str, int] | None:
        brokers = self.watch.brokers if self.watch is not None else {}
        if node_id is None:  # the bootstrap: any live broker
            return brokers[min(brokers)] if brokers else None
        return brokers.get(node_id) or self._seen.get(node_id)

    def address_of(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Where a client is told broker `node_id` is: this proxy's port for it (a listener is opened for a
        broker the cluster names before ZooKeeper does)."""
        if node_id not in self._servers:
            self._seen[node_id] = (host, port)
            if node_id not in self._starting and self._loop is not None:
                self._starting[node_id] = self._loop.create_task(self._bind(node_id))
        return self.config.advertised, self.config.ports.port_for(node_id)

    def _accept(self, node_id: int | None) -> Callable[[asyncio.Transport], Link | None]:
        def make_link(transport: asyncio.Transport) -> Link | None:
            upstream = self._upstream(node_id)
            if upstream is None:
                log.warning("proxy: no live broker behind %s; closing the client connection",
                            "the bootstrap" if node_id is None else f"broker {node_id}")  # fmt: skip
                return None
            security = self.config.security
            peername = transport.get_extra_info("peername")
            ip, peer = (
                (str(peername[0]), f"{peername[0]}:{peername[1]}")
                if isinstance(peername, tuple)
                else (str(peername),) * 2
            )
            session: Session | None = Session(host=ip)
            if (
                security is not None
            ):  # the TLS handshake is done: an SSL listener's principal is the certificate's
                session = security.session(transport.get_extra_info("ssl_object"), ip, peer)
                if session is None:
                    return None
            # Nothing is connected upstream yet: the Link opens its broker connection at the first frame to
            # forward, and logs in there only once the client has logged in (zkcoord.proxy.forward).
            return Link(upstream, self.address_of, self.caps,
                        self if self._dispatch is not None else None, self.config.max_request_bytes,
                        security=self.config.upstream, session=session,
                        auth=security.authenticator(peer) if security is not None else None)  # fmt: skip

        return make_link

    # -- the groups this proxy coordinates (zkcoord.proxy.forward.LocalGroups) ------------------------------

    def coordinates(self, group_id: str) -> bool:
        """A group matching --bridge-zk-groups, unless it was handed off (`migrate handoff`): from then on its
        requests, FindCoordinator included, go to the cluster's own coordinator."""
        if self._pattern is None or self._pattern.fullmatch(group_id) is None:
            return False
        return self.handoffs is None or self.handoffs.phase(group_id) is not Phase.FORWARDING

    def coordinators(self) -> list[tuple[int, str, int]]:
        return self.groups.node.brokers() if self.groups is not None else []

    def answer(self, req: kp.RequestFrame) -> bytes | Awaitable[bytes | None] | None:
        authz = self.config.authorizer
        if req.api_key == kp.FIND_COORDINATOR:
            assert self.groups is not None
            keys = kp.find_coordinator_request(req).keys
            refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
            return kp.find_coordinator_response(
                req,
                dm.FindCoordinatorResponse(
                    tuple(
                        dm.Coordinator(k, refused, None, -1, "", -1)
                        if authz is not None and not authz.group(req, Operation.DESCRIBE, k)
                        else self.groups.find_coordinator(k)
                        for k in keys
                    )
                ),
            )
        assert self._dispatch is not None
        if req.api_version == 0 and req.api_key in (kp.OFFSET_COMMIT, kp.OFFSET_FETCH):
            return self._offsets_v0(req)
        if req.api_key in kp.CONSUMER_GROUP_APIS:
            return self._consumer_group(req)
        if req.api_key == kp.OFFSET_COMMIT:
            return self._offset_commit(req)
        if self.handoffs is not None and req.api_key in (kp.JOIN_GROUP, kp.HEARTBEAT):
            (group_id,) = kp.group_ids(req)
            if self.handoffs.phase(group_id) is Phase.RELEASING and (
                authz is None or authz.group(req, Operation.READ, group_id)
            ):  # a principal without Read on the group gets the dispatcher's refusal, and releases nobody
                return self._release(req, group_id)
        return self._dispatch.dispatch(req)

    def _consumer_group(self, req: kp.RequestFrame) -> bytes | Awaitable[bytes | None] | None:
        """ConsumerGroupHeartbeat/Describe of the groups this proxy coordinates (consumer-protocol members, KIP-848),
        answered by the server's group dispatch as `serve` answers them. A heartbeat subscribing to topics this
        proxy has not asked the cluster about waits for that answer first (the assignment names topics by the ids
        the cluster's brokers give). During a hand-off's release no member joins (epoch 0: NOT_COORDINATOR, as a
        classic JoinGroup is answered then). A Describe naming other groups too answers those NOT_COORDINATOR."""
        assert self._dispatch is not None and self.topics is not None
        dispatch, topics = self._dispatch, self.topics
        if req.api_key == kp.CONSUMER_GROUP_DESCRIBE:
            if kp.consumer_group_split(req, self.coordinates) == "local":
                return dispatch.dispatch(req)
            narrowed = kp.describe_only(req, self.coordinates)

            async def merged() -> bytes:
                answer = dispatch.dispatch(narrowed)
                frame = answer if isinstance(answer, bytes) or answer is None else await answer
                assert frame is not None
                _, described = kp.decode_consumer_group_response(req.api_key, req.api_version, frame[4:])
                return kp.describe_merged(req, described)

            return merged()
        body = req.body
        if (
            body.member_epoch == 0
            and self.handoffs is not None
            and self.handoffs.phase(body.group_id) is Phase.RELEASING
        ):
            return kp.error_response(req, ErrorCode.NOT_COORDINATOR)
        return self._after_lookup(req, [t for t in body.subscribed_topic_names or () if not topics.known(t)])

    def _offset_commit(self, req: kp.RequestFrame) -> bytes | Awaitable[bytes | None] | None:
        """OffsetCommit v1+ of a group this proxy coordinates: a partition the cluster does not have is answered
        UNKNOWN_TOPIC_OR_PARTITION (zkcoord.server.groups), judged by the cluster's Metadata; a topic or partition
        the proxy's cache does not have (never asked, created or grown since) is asked of the cluster first."""
        assert self.topics is not None
        topics = self.topics
        highest: dict[str, int] = {}
        for r in kp.group_requests(req):
            assert isinstance(r, gm.OffsetCommitRequest)
            for t in r.topics:
                top = max((p.partition_index for p in t.partitions), default=-1)
                highest[t.name] = max(top, highest.get(t.name, -1))
        return self._after_lookup(req, topics.unsure(highest))

    def _after_lookup(
        self, req: kp.RequestFrame, missing: list[str]
    ) -> bytes | Awaitable[bytes | None] | None:
        """`req` answered by the group dispatch, once the cluster has been asked about the `missing` topics."""
        assert self._dispatch is not None and self.topics is not None
        dispatch, topics = self._dispatch, self.topics
        if not missing:
            return dispatch.dispatch(req)

        async def after_metadata() -> bytes | None:
            await topics.fetch(missing)
            answer = dispatch.dispatch(req)
            return answer if isinstance(answer, bytes) or answer is None else await answer

        return after_metadata()

    async def _offsets_v0(self, req: kp.RequestFrame) -> bytes:
        """OffsetCommit/OffsetFetch v0 read and write `/consumers/G/offsets/T/P`, never the coordinator, as Kafka
        0.8.2-2.x brokers and `serve --zk` do (zkcoord.server.offsets_v0): so a legacy member of the mixed group and
        a kafka-node HighLevelConsumer see each other's offsets. The authorizer judges it as any other version."""
        v0 = ZooKeeperOffsetsV0(lambda: self.client, self._partition_known,
                                self.config.group_config.offset_metadata_max_bytes)  # fmt: skip

        async def call(r: gm.GroupRequest) -> gm.GroupResponse:
            if isinstance(r, gm.OffsetCommitRequest):
                return await v0.offset_commit(r)
            assert isinstance(r, gm.OffsetFetchRequest)
            return await v0.offset_fetch(r)

        r = kp.group_requests(req)[0]
        authz = self.config.authorizer
        if authz is not None:
            return kp.group_response(req, [await authorized_group_call(authz, req, r, call)])
        return kp.group_response(req, [await call(r)])

    def _partition_known(self, topic: str, partition: int) -> bool:
        """A partition of the cluster's `/brokers/topics/T` (Kafka's metadata cache); in ZooKeeperOffsetsV0's
        worker thread. A topic znode that does not decode knows no partition."""
        client = self.client
        if client is None:
            return False
        try:
            path = paths.topic_path(topic)
            data, _ = read_node(client, path)
            return data is not None and partition in TopicAssignment.decode(path, data).partition_ids
        except (paths.InvalidName, MalformedZnode):
            return False

    def _release(self, req: kp.RequestFrame, group_id: str) -> bytes | Awaitable[bytes | None] | None:
        """A group being handed off: a member's heartbeat starts a rebalance (answered REBALANCE_IN_PROGRESS, so an
        eager member commits and revokes everything before it rejoins); its JoinGroup removes it from the group and
        is answered MEMBER_ID_REQUIRED with no member id (UNKNOWN_MEMBER_ID below v4). A cooperative member rejoins
        still holding its partitions: librdkafka drops them as lost at that answer; kafka-python 3.0.12 keeps them
        (it prepares a join once per rebalance attempt, and the retry after the reset generation does not prepare
        again), reads nothing while it joins, and claims them in the cluster's group, where cooperative-sticky
        leaves them with it: one holder each, as nobody is admitted here meanwhile (docs/proxy.md "Hand-off", step
        2). Its next JoinGroup (no member id) is answered NOT_COORDINATOR, so it asks for the coordinator again,
        until the hand-off forwards that question to the cluster. No member is admitted meanwhile."""
        assert self.groups is not None and self._dispatch is not None
        service = self.groups.services.get(self.groups.node.partition_for(group_id))
        if req.api_key == kp.HEARTBEAT:
            if service is not None:
                service.request_rebalance(group_id)
            return self._dispatch.dispatch(req)
        (join,) = kp.group_requests(req)
        assert isinstance(join, gm.JoinGroupRequest)
        groups = self.groups

        async def refuse() -> bytes | None:
            if join.member_id:
                left = await groups.leave_group(
                    gm.LeaveGroupRequest(
                        3, group_id, (gm.LeaveGroupMember(join.member_id, join.group_instance_id),)
                    )
                )
                log.info("group=%s hand-off: member %s released (leave: %s)", group_id, join.member_id,
                         [m.error_code for m in left.members])  # fmt: skip
                # A cooperative member rejoins still holding its partitions. MEMBER_ID_REQUIRED (with no member
                # id) makes librdkafka drop them all as lost before it joins again (it does so for it and
                # ILLEGAL_GENERATION, not for UNKNOWN_MEMBER_ID on JoinGroup). kafka-python 3.0.12 resets its
                # generation but retries without preparing the join again, so it keeps them (reading nothing) and
                # claims them in the cluster's group: safe, as nobody else holds or is given them meanwhile.
                # JoinGroup < v4 has no MEMBER_ID_REQUIRED: UNKNOWN_MEMBER_ID (kafka-python's reset).
                code = ErrorCode.MEMBER_ID_REQUIRED if req.api_version >= 4 else ErrorCode.UNKNOWN_MEMBER_ID
                return kp.error_response(req, code)
            return kp.error_response(req, ErrorCode.NOT_COORDINATOR)

        return refuse()
