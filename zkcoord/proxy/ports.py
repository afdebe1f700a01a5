"""Which proxy port stands for which real broker (Kroxylicious's port-per-broker model): a pure, stable rule.

A broker's port is `base + (node id - lowest id)` unless pinned (`--broker-port ID=PORT`). The rule depends on
the id only, never on which brokers are up, so a client's cached metadata stays valid across proxy restarts and
every proxy node started with the same flags maps the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zkcoord.errors import ConfigError


@dataclass(frozen=True, slots=True)
class PortMap:
    bootstrap: int  # the --listen port: any broker behind it
    base: int  # the port of broker `lowest_id`
    lowest_id: int = 0
    pinned: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.bootstrap < 65536:
            raise ConfigError(f"--listen port must be 1..65535, got {self.bootstrap}")
        if not 0 < self.base < 65536:
            raise ConfigError(f"--broker-ports base must be 1..65535, got {self.base}")
        if self.lowest_id < 0:
            raise ConfigError(f"--lowest-broker-id must be >= 0, got {self.lowest_id}")
        ports = list(self.pinned.values())
        if len(set(ports)) != len(ports) or self.bootstrap in ports:
            raise ConfigError(
                f"--broker-port pins must name distinct ports other than --listen: {dict(self.pinned)}"
            )

    def port_for(self, node_id: int) -> int:
        """The proxy port of broker `node_id`; ConfigError when the rule gives no valid port for it."""
        pinned = self.pinned.get(node_id)
        if pinned is not None:
            return pinned
        port = self.base + (node_id - self.lowest_id)
        if (
            node_id < self.lowest_id
            or not 0 < port < 65536
            or port == self.bootstrap
            or port in self.pinned.values()
        ):
            raise ConfigError(
                f"broker {node_id} has no proxy port: base {self.base} + ({node_id} - lowest id {self.lowest_id}) "
                f"= {port}; pin one with --broker-port {node_id}=PORT or change --broker-ports/--lowest-broker-id"
            )
        return port
