"""The live brokers of the cluster behind the proxy, read from `/brokers/ids` and kept current by a ZooKeeper
watch (not polled; `zkcoord.zk.watch.RearmedWatch` reads again once a new session replaces an expired one): node id -> the
(host, port) of its PLAINTEXT endpoint. Reads only; never writes the cluster's znodes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration
from zkcoord.zk.registry import read_broker_data
from zkcoord.zk.session import Client
from zkcoord.zk.watch import RearmedWatch, Watcher

log = logging.getLogger(__name__)

Brokers = dict[int, tuple[str, int]]


class BrokerWatch:
    """`start()` reads `/brokers/ids` and watches it; `brokers` is replaced whole on every change (safe to read
    from any thread) and `on_change(brokers)` runs on kazoo's callback thread after each re-read that changed it."""

    def __init__(
        self, client: Client, on_change: Callable[[Brokers], None], security_protocol: str = "PLAINTEXT"
    ) -> None:
        self.client = client
        self.on_change = on_change
        self.security_protocol = security_protocol
        self._watch: RearmedWatch[Brokers] = RearmedWatch(
            client, self._read, {}, name=f"proxy: {paths.BROKER_IDS}", on_change=self._changed
        )

    @property
    def brokers(self) -> Brokers:
        return self._watch.value

    def start(self) -> None:
        self._watch.start()

    def close(self) -> None:
        self._watch.close()

    def _read(self, watch: Watcher) -> Brokers:
        found: Brokers = {}
        if not self.client.exists(paths.BROKER_IDS, watch=watch):
            return found
        for node, data in read_broker_data(self.client, watch).items():
            try:
                endpoint = BrokerRegistration.decode(paths.broker_path(node), data).endpoint_for(
                    self.security_protocol
                )
            except MalformedZnode as exc:
                log.warning("proxy: ignoring broker %d: %s", node, exc)
                continue
            if endpoint is not None:
                found[node] = endpoint
        return found

    def _changed(self, found: Brokers) -> None:
        log.info(
            "proxy: brokers %s",
            ", ".join(f"{n}={h}:{p}" for n, (h, p) in sorted(found.items())) or "none",
        )
        self.on_change(found)
