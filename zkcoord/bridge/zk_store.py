"""The ZooKeeper side of the coordinator's offset mirror (`zkcoord serve --bridge-zk-offsets`): reads a group's
legacy offset znodes and mirrors acknowledged commits into them, never moving one backwards.

Guarantees: znodes are `/consumers/[group]/offsets/[topic]/[partition]` holding the decimal next offset, exactly
as the 0.8 consumer writes them (zkcoord.legacy.paths / codecs through ZooKeeperOffsetStore); a mirror write is
versioned and never-regress (a higher value written by a legacy member meanwhile is kept), batched in multi-ops
under the 1 MB jute.maxbuffer limit; a call on a disconnected session fails at once with `ZkBridgeUnavailable`
instead of waiting for a reconnect, so the coordinator's request path is never held by a ZooKeeper outage.
Names a legacy tree cannot hold (a group with '/', a topic longer than 255 characters) are reported, not written.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterable, Mapping

from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import registrations
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.offset_store import OffsetsRead, WriteMode, WriteReport, ZooKeeperOffsetStore
from zkcoord.zk.session import Client, ZooKeeperError, connect, on_session_lost

log = logging.getLogger(__name__)

# Where running bridges announce themselves (ephemeral), so `zkcoord migrate` can tell whether broker-protocol
# commits reach ZooKeeper. A zkcoord path: no legacy reader looks outside /consumers, /brokers, /controller.
BRIDGES_PATH = "/zkcoord/offset-bridges"


def list_offset_bridges(client: Client) -> list[dict[str, object]]:
    """The registrations of the running offset bridges (sorted by name); unreadable ones are named as such."""
    found: list[dict[str, object]] = []
    for name, data in registrations.read_children(client, BRIDGES_PATH):
        try:
            info = json.loads(data)
            found.append({"name": name, **(info if isinstance(info, dict) else {})})
        except ValueError:
            found.append({"name": name, "error": "unreadable registration"})
    return found


class ZkBridgeUnavailable(ZkcoordError):
    """ZooKeeper did not answer (not connected, connection lost, session expired): nothing is known."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # what a Kafka client retries on OffsetFetch
    retriable = True


class ZkOffsetBridgeStore:
    """One kazoo session for the bridge; `hosts` may carry a chroot. Thread-safe (kazoo is)."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_s: float = 10.0,
        connect_timeout_s: float = 15.0,
        max_batch_bytes: int = 512 * 1024,
        client: Client | None = None,
        auth: ZkAuth = NO_AUTH,
    ) -> None:
        if not hosts and client is None:
            raise ZkcoordError("the offset bridge needs a ZooKeeper connect string")
        self.hosts = hosts
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_batch_bytes = max_batch_bytes
        self.auth = auth
        self._owns_client = client is None
        self.client = client
        self._registered = False
        self.registration: str | None = None

    def start(self) -> None:
        """Connect; raises when ZooKeeper cannot be reached within `connect_timeout_s` (a startup error is
        clearer than a bridge that silently never mirrors). Later outages are retried by kazoo's reconnects."""
        if self.client is None:
            try:
                client = connect(
                    self.hosts,
                    timeout=self.connect_timeout_s,
                    session_timeout_s=self.session_timeout_s,
                    auth=self.auth,
                )
            except Exception as exc:
                raise ZkBridgeUnavailable(
                    f"cannot reach ZooKeeper {self.hosts!r} for the offset bridge: {exc}"
                ) from exc
            self.client = client
        on_session_lost(self.client, self._on_session_lost)
        self._register()

    def _on_session_lost(self) -> None:
        self._registered = False  # the ephemeral went with the session; re-created on the next call

    def _register(self) -> None:
        assert self.client is not None
        info = {
            "version": 1,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_ms": int(time.time() * 1000),
        }
        try:
            self.registration = registrations.announce(
                self.client, f"{BRIDGES_PATH}/bridge-", json.dumps(info, sort_keys=True).encode()
            )
            self._registered = True
        except ZooKeeperError as exc:
            log.warning("offset bridge: could not register under %s: %r (retried later)", BRIDGES_PATH, exc)

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None and self._owns_client:
            client.stop()
            client.close()

    @property
    def connected(self) -> bool:
        return self.client is not None and bool(self.client.connected)

    def _store(self, group: str) -> ZooKeeperOffsetStore:
        if not self.connected:
            raise ZkBridgeUnavailable("ZooKeeper session not connected")
        assert self.client is not None
        if not self._registered:
            self._register()
        # One attempt per call and no reconnect wait inside: the caller (the mirror queue) owns retries.
        return ZooKeeperOffsetStore(
            self.client, group, max_batch_bytes=self.max_batch_bytes, max_attempts=3, reconnect_timeout_s=0.0
        )

    def read(self, group: str, partitions: Iterable[TopicPartition] | None) -> OffsetsRead:
        """The group's offsets for `partitions` (all of its offset znodes when None); `errors` holds the
        znodes that cannot be used (malformed)."""
        try:
            paths.validate_group(group)
        except paths.InvalidName:
            return OffsetsRead()  # such a group can have no znodes: nothing stored on this side
        wanted = None if partitions is None else sorted(set(partitions))
        if wanted is not None:
            legal = []
            for tp in wanted:
                try:
                    paths.offset_path(group, *tp)
                    legal.append(tp)
                except paths.InvalidName:
                    pass  # a topic a legacy tree cannot name has no znode: nothing stored on this side
            wanted = legal
        try:
            return self._store(group).read(wanted)
        except ZooKeeperError as exc:
            raise ZkBridgeUnavailable(f"reading offsets of group {group!r}: {type(exc).__name__}") from exc

    def mirror(self, group: str, offsets: Mapping[TopicPartition, int]) -> WriteReport:
        """Write `offsets` in never-regress mode: the store's report, with `refused` for what a legacy tree cannot
        hold (an illegal name, a negative offset). `errors` are worth retrying, `refused` never will be.

        Raises ZkBridgeUnavailable when ZooKeeper did not answer (the whole call may be retried: it re-reads
        first, so it does not matter whether an earlier try landed)."""
        refused: dict[TopicPartition, str] = {}
        writable: dict[TopicPartition, int] = {}
        for tp, offset in sorted(offsets.items()):
            try:
                paths.offset_path(group, *tp)
            except paths.InvalidName as exc:
                refused[tp] = str(exc)
                continue
            if offset < 0:
                refused[tp] = f"offset {offset} is not a position"
                continue
            writable[tp] = offset
        if not writable:
            return WriteReport(refused=refused)
        try:
            report = self._store(group).write(writable, WriteMode.NEVER_REGRESS)
        except ZkBridgeUnavailable:
            raise
        except (ZooKeeperError, ZkcoordError) as exc:
            raise ZkBridgeUnavailable(
                f"mirroring offsets of group {group!r}: {type(exc).__name__}: {exc}"
            ) from exc
        report.refused.update(refused)
        return report
