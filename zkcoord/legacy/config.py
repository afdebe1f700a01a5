"""LegacyConsumerConfig: the 0.8-era high-level consumer's settings with their Java names and defaults,
typed and validated at construction so a bad value fails before anything touches ZooKeeper.

Defaults follow 0.8.2.2 `ConsumerConfig` + `ZKConfig`: `rebalance.backoff.ms` defaults to
`zookeeper.sync.time.ms` (KAFKA-2589), `zookeeper.connection.timeout.ms` to the session timeout,
`dual.commit.enabled` to `offsets.storage == "kafka"`, `client.id` to `group.id`. zkcoord adds `mode`
(property `zkcoord.mode`): `faithful` keeps the original retry timing, `fast` waits on the conflicting owner
znode instead of sleeping; both leave identical znodes.

`offsets.storage=kafka` commits through the bridge (zkcoord.zk.member_offsets): with `dual.commit.enabled`
to the broker and ZooKeeper in the order `zkcoord.commit.order` (`broker-first`, the original, or
`zookeeper-first`); the broker is `zkcoord.bootstrap.servers` or any live broker in `/brokers/ids`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from zkcoord.errors import ConfigError

Mode = Literal["faithful", "fast"]
Strategy = Literal["range", "roundrobin"]
OffsetReset = Literal["smallest", "largest"]
RoundRobinGeneration = Literal["0.8.2", "0.10.2"]
DualCommitOrder = Literal["broker-first", "zookeeper-first"]

# ZooKeeper refuses requests above jute.maxbuffer (1 MiB by default); multi-op batches stay well under it.
ZK_REQUEST_LIMIT_BYTES: Final = 1024 * 1024
DEFAULT_MULTI_BUDGET_BYTES: Final = 512 * 1024


@dataclass(frozen=True, slots=True)
class LegacyConsumerConfig:
    """Settings of one legacy group member. Field names are the Java property names with `_` for `.`."""

    group_id: str
    zookeeper_connect: str
    consumer_id: str | None = None
    client_id: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int | None = None
    zookeeper_sync_time_ms: int = 2000
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int | None = None
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    partition_assignment_strategy: Strategy = "range"
    offsets_storage: str = "zookeeper"
    dual_commit_enabled: bool | None = None
    offsets_commit_max_retries: int = 5
    offsets_channel_backoff_ms: int = 1000
    auto_offset_reset: OffsetReset = "largest"
    exclude_internal_topics: bool = True
    consumer_timeout_ms: int = -1
    fetch_message_max_bytes: int = 1048576
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 100
    socket_timeout_ms: int = 30000
    refresh_leader_backoff_ms: int = 200
    # zkcoord extensions (property names prefixed `zkcoord.`).
    mode: Mode = "fast"
    roundrobin_generation: RoundRobinGeneration = "0.10.2"
    multi_budget_bytes: int = DEFAULT_MULTI_BUDGET_BYTES
    claim_wait_ms: int | None = None
    # Deadline of every ZooKeeper call the member makes (None: the session timeout, after which a blocked
    # call's session is gone anyway): a call still unanswered then fails its rebalance attempt.
    zk_call_timeout_ms: int | None = None
    commit_order: DualCommitOrder = "broker-first"
    bootstrap_servers: str | None = None

    def __post_init__(self) -> None:
        _require_text("group.id", self.group_id)
        _require_text("zookeeper.connect", self.zookeeper_connect)
        if self.consumer_id is not None:
            _require_text("consumer.id", self.consumer_id)
        if self.client_id is None:
            object.__setattr__(self, "client_id", self.group_id)
        _require_int("zookeeper.session.timeout.ms", self.zookeeper_session_timeout_ms, low=1)
        if self.zookeeper_connection_timeout_ms is None:
            object.__setattr__(self, "zookeeper_connection_timeout_ms", self.zookeeper_session_timeout_ms)
        _require_int("zookeeper.connection.timeout.ms", self.zookeeper_connection_timeout_ms, low=1)
        _require_int("zookeeper.sync.time.ms", self.zookeeper_sync_time_ms, low=0)
        _require_int("rebalance.max.retries", self.rebalance_max_retries, low=1)
        if self.rebalance_backoff_ms is None:
            object.__setattr__(self, "rebalance_backoff_ms", self.zookeeper_sync_time_ms)
        _require_int("rebalance.backoff.ms", self.rebalance_backoff_ms, low=0)
        _require_bool("auto.commit.enable", self.auto_commit_enable)
        _require_int("auto.commit.interval.ms", self.auto_commit_interval_ms, low=1)
        _require_choice(
            "partition.assignment.strategy", self.partition_assignment_strategy, ("range", "roundrobin")
        )
        storage = (
            self.offsets_storage.lower() if isinstance(self.offsets_storage, str) else self.offsets_storage
        )
        _require_choice("offsets.storage", storage, ("zookeeper", "kafka"))
        object.__setattr__(self, "offsets_storage", storage)
        if self.dual_commit_enabled is None:
            object.__setattr__(self, "dual_commit_enabled", storage == "kafka")
        _require_bool("dual.commit.enabled", self.dual_commit_enabled)
        _require_choice("zkcoord.commit.order", self.commit_order, ("broker-first", "zookeeper-first"))
        if self.bootstrap_servers is not None:
            _require_text("zkcoord.bootstrap.servers", self.bootstrap_servers)
        _require_int("offsets.commit.max.retries", self.offsets_commit_max_retries, low=0)
        _require_int("offsets.channel.backoff.ms", self.offsets_channel_backoff_ms, low=0)
        _require_choice("auto.offset.reset", self.auto_offset_reset, ("smallest", "largest"))
        _require_bool("exclude.internal.topics", self.exclude_internal_topics)
        _require_int("consumer.timeout.ms", self.consumer_timeout_ms, low=-1)
        _require_int("fetch.message.max.bytes", self.fetch_message_max_bytes, low=1)
        _require_int("fetch.min.bytes", self.fetch_min_bytes, low=0)
        _require_int("fetch.wait.max.ms", self.fetch_wait_max_ms, low=0)
        _require_int("socket.timeout.ms", self.socket_timeout_ms, low=1)
        _require_int("refresh.leader.backoff.ms", self.refresh_leader_backoff_ms, low=0)
        _require_choice("zkcoord.mode", self.mode, ("faithful", "fast"))
        _require_choice("zkcoord.roundrobin.generation", self.roundrobin_generation, ("0.8.2", "0.10.2"))
        _require_int(
            "zkcoord.multi.budget.bytes",
            self.multi_budget_bytes,
            low=1024,
            high=ZK_REQUEST_LIMIT_BYTES - 4096,
        )
        if self.claim_wait_ms is None:
            object.__setattr__(self, "claim_wait_ms", self.zookeeper_session_timeout_ms)
        _require_int("zkcoord.claim.wait.ms", self.claim_wait_ms, low=1)
        if self.zk_call_timeout_ms is None:
            object.__setattr__(self, "zk_call_timeout_ms", self.zookeeper_session_timeout_ms)
        _require_int("zkcoord.zk.call.timeout.ms", self.zk_call_timeout_ms, low=1)

    # Resolved views (never None after construction); typed for callers.
    @property
    def backoff_ms(self) -> int:
        assert self.rebalance_backoff_ms is not None
        return self.rebalance_backoff_ms

    @property
    def claim_deadline_ms(self) -> int:
        assert self.claim_wait_ms is not None
        return self.claim_wait_ms

    @property
    def call_deadline_ms(self) -> int:
        assert self.zk_call_timeout_ms is not None
        return self.zk_call_timeout_ms

    @property
    def connection_timeout_ms(self) -> int:
        assert self.zookeeper_connection_timeout_ms is not None
        return self.zookeeper_connection_timeout_ms

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LegacyConsumerConfig:
        """Build from Java-style properties (`group.id=...`); unknown names are refused, naming them."""
        unknown = sorted(k for k in props if k not in _PROPERTY_FIELDS)
        if unknown:
            raise ConfigError(f"unknown legacy consumer properties: {', '.join(unknown)}")
        kwargs: dict[str, object] = {}
        for prop, raw in props.items():
            field_name = _PROPERTY_FIELDS[prop]
            kwargs[field_name] = _convert(prop, field_name, raw)
        missing = [p for p in ("group.id", "zookeeper.connect") if p not in props]
        if missing:
            raise ConfigError(f"missing required properties: {', '.join(missing)}")
        return cls(**kwargs)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """The Java property form of every set value (round-trips through from_properties)."""
        out: dict[str, str] = {}
        for prop, field_name in _PROPERTY_FIELDS.items():
            value = getattr(self, field_name)
            if value is None:
                continue
            out[prop] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def replace(self, **changes: object) -> LegacyConsumerConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _java_name(field_name: str) -> str:
    if field_name in _ZKCOORD_FIELDS:
        return "zkcoord." + field_name.replace("_", ".")
    return field_name.replace("_", ".")


_ZKCOORD_FIELDS: Final = frozenset(
    {
        "mode",
        "roundrobin_generation",
        "multi_budget_bytes",
        "claim_wait_ms",
        "zk_call_timeout_ms",
        "commit_order",
        "bootstrap_servers",
    }
)
_PROPERTY_FIELDS: Final[dict[str, str]] = {
    _java_name(f.name): f.name for f in dataclasses.fields(LegacyConsumerConfig)
}
_INT_FIELDS: Final = frozenset(
    f.name for f in dataclasses.fields(LegacyConsumerConfig) if "int" in str(f.type)
)
_BOOL_FIELDS: Final = frozenset(
    f.name for f in dataclasses.fields(LegacyConsumerConfig) if "bool" in str(f.type)
)


def _convert(prop: str, field_name: str, raw: str) -> object:
    if not isinstance(raw, str):
        raise ConfigError(f"{prop}: property values must be strings, got {type(raw).__name__}")
    text = raw.strip()
    if field_name in _BOOL_FIELDS:
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{prop}={raw!r}: expected true or false")
        return text.lower() == "true"
    if field_name in _INT_FIELDS:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{prop}={raw!r}: expected an integer") from None
    if field_name in ("partition_assignment_strategy", "commit_order"):
        return text.lower()
    return text


def _require_text(prop: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{prop} is required and must be a non-empty string (got {value!r})")


def _require_int(prop: str, value: object, *, low: int, high: int = 2**63 - 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{prop} must be an integer (got {value!r})")
    if not low <= value <= high:
        raise ConfigError(f"{prop}={value} is out of range {low}..{high}")


def _require_bool(prop: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{prop} must be true or false (got {value!r})")


def _require_choice(prop: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{prop}={value!r} is not one of {', '.join(choices)}")
