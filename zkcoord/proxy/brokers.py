"""The live brokers of the cluster behind the proxy, read from `/brokers/ids` and kept current by a ZooKeeper
watch (not polled; read again once a new session replaces an expired one, whose watches are gone): node id -> the
(host, port) of its PLAINTEXT endpoint. Reads only; never writes the cluster's znodes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration
from zkcoord.zk.controller import ZooKeeperError, read_brokers
from zkcoord.zk.session import Client

log = logging.getLogger(__name__)

Brokers = dict[int, tuple[str, int]]


class BrokerWatch:
    """`start()` reads `/brokers/ids` and watches it; `brokers` is replaced whole on every change (safe to read
    from any thread) and `on_change(brokers)` runs on kazoo's callback thread after each re-read."""

    def __init__(
        self, client: Client, on_change: Callable[[Brokers], None], security_protocol: str = "PLAINTEXT"
    ) -> None:
        self.client = client
        self.on_change = on_change
        self.security_protocol = security_protocol
        self.brokers: Brokers = {}
        self._lock = threading.Lock()
        self._closed = False
        self._lost = False

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._read()

    def close(self) -> None:
        self._closed = True
        self.client.remove_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        """Watches go with an expired session: once connected again after a loss, read (and watch) again. A
        listener must not block kazoo's connection thread, so the read runs on the client's handler."""
        if state == "LOST":
            self._lost = True
        elif state == "CONNECTED" and self._lost and not self._closed:
            self._lost = False
            self.client.handler.spawn(self._on_watch, None)

    def _on_watch(self, event: Any) -> None:
        if not self._closed:
            try:
                self._read()
            except ZooKeeperError as exc:  # the connection's next state change re-reads (see ProxyNode)
                log.warning("proxy: re-reading /brokers/ids failed: %r", exc)

    def _read(self) -> None:
        with self._lock:
            if not self.client.exists(paths.BROKER_IDS, watch=self._on_watch):
                found: Brokers = {}
            else:
                found = {}
                for node, data in read_brokers(self.client, self._on_watch).items():
                    try:
                        endpoint = BrokerRegistration.decode(paths.broker_path(node), data).endpoint_for(
                            self.security_protocol
                        )
                    except MalformedZnode as exc:
                        log.warning("proxy: ignoring broker %d: %s", node, exc)
                        continue
                    if endpoint is not None:
                        found[node] = endpoint
            changed = found != self.brokers
            self.brokers = found
        if changed:
            log.info(
                "proxy: brokers %s",
                ", ".join(f"{n}={h}:{p}" for n, (h, p) in sorted(found.items())) or "none",
            )
            self.on_change(found)
