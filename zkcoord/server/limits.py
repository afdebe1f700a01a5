"""The node's resource limits, with Kafka's property names where Kafka has one; validated at construction.

`ConnectionLimits` bounds what clients can hold on the wire listener (connections, idle and half-sent frames,
request memory, frames before a SASL login, per-connection pipelining); `LogLimits` bounds partitions and the
descriptors their logs hold.
docs/operations.md lists every limit, its default and what a client sees when it hits it.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkcoord.errors import ConfigError

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 1000  # max.connections (Kafka: unbounded; a Python node runs out of descriptors)
    max_connections_per_ip: int = INT32_MAX  # max.connections.per.ip (Kafka's default)
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms (Kafka's default, 10 min)
    # zkcoord's own: a frame whose size header arrived must be complete within this (slow-sender defence).
    request_read_timeout_ms: int = 30_000
    # queued.max.request.bytes (Kafka: unbounded): bytes of request frames being read or waiting, all
    # connections together; a reader waits for room instead of allocating.
    queued_max_request_bytes: int = 256 * 1024 * 1024
    # zkcoord's own: requests of one connection queued or being answered; the reader pauses at the bound.
    max_in_flight_per_connection: int = 100
    # sasl.server.max.receive.size (Kafka's name and default, 512 KiB): on a SASL listener, until the login
    # completes, a frame whose size prefix is larger closes the connection before any of its body is read.
    sasl_server_max_receive_size: int = 524_288

    def __post_init__(self) -> None:
        for name in (
            "max_connections",
            "max_connections_per_ip",
            "connections_max_idle_ms",
            "request_read_timeout_ms",
            "queued_max_request_bytes",
            "max_in_flight_per_connection",
            "sasl_server_max_receive_size",
        ):
            value = getattr(self, name)
            if value < 1:
                raise ConfigError(f"{name.replace('_', '.')} must be >= 1, got {value}")


@dataclass(frozen=True, slots=True)
class LogLimits:
    # KIP-578's names. Kafka leaves both unbounded; each partition here is a directory and (while open) a
    # descriptor, so a bound keeps one CreateTopics from making a node unable to restart.
    max_partitions_per_topic: int = 10_000
    max_broker_partitions: int = 100_000
    # zkcoord's own: partition log files open at once; the least recently used are closed beyond it.
    log_max_open_files: int = 512

    def __post_init__(self) -> None:
        if self.max_partitions_per_topic < 1 or self.max_broker_partitions < 1:
            raise ConfigError("max.partitions.per.topic and max.broker.partitions must be >= 1")
        if self.log_max_open_files < 2:
            raise ConfigError(f"log.max.open.files must be >= 2, got {self.log_max_open_files}")
