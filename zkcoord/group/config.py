"""Coordinator configuration with Kafka's broker names and defaults (`GroupCoordinatorConfig`), validated at construction."""

from __future__ import annotations

from dataclasses import dataclass

from zkcoord.errors import ConfigError
from zkcoord.group.consumer_assignors import ASSIGNORS

INT32_MAX = 2**31 - 1
# A new member's JoinGroup may be parked this long before the member is dropped (Kafka's NewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
# group.consumer.migration.policy values (Kafka's ConsumerGroupMigrationPolicy), the default first.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT32_MAX
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    # The consumer protocol (KIP-848), with Kafka's names and defaults; the first assignor is the default one.
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_max_size: int = INT32_MAX
    group_consumer_migration_policy: str = MIGRATION_POLICIES[0]
    # zkcoord's own: how often a group's subscribed regular expressions are resolved again (on a heartbeat once
    # this much time has passed since the last resolution); a new expression is resolved at once.
    group_consumer_regex_refresh_interval_ms: int = 10_000

    def __post_init__(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise ConfigError(f"GroupConfig: {what}")

        for name in (
            "group_min_session_timeout_ms",
            "group_max_session_timeout_ms",
            "group_initial_rebalance_delay_ms",
            "group_max_size",
            "offsets_topic_num_partitions",
            "offset_metadata_max_bytes",
            "offsets_retention_minutes",
            "offsets_retention_check_interval_ms",
            "offsets_commit_timeout_ms",
            "new_member_join_timeout_ms",
            "group_consumer_session_timeout_ms",
            "group_consumer_heartbeat_interval_ms",
            "group_consumer_max_size",
            "group_consumer_regex_refresh_interval_ms",
        ):
            value = getattr(self, name)
            need(
                isinstance(value, int) and not isinstance(value, bool),
                f"{name} must be an int, got {value!r}",
            )
        need(self.group_min_session_timeout_ms >= 0, "group.min.session.timeout.ms must be >= 0")
        need(
            self.group_max_session_timeout_ms >= self.group_min_session_timeout_ms,
            "group.max.session.timeout.ms must be >= group.min.session.timeout.ms",
        )
        need(self.group_initial_rebalance_delay_ms >= 0, "group.initial.rebalance.delay.ms must be >= 0")
        need(self.group_max_size >= 1, "group.max.size must be >= 1")
        need(self.offsets_topic_num_partitions >= 1, "offsets.topic.num.partitions must be >= 1")
        need(self.offset_metadata_max_bytes >= 0, "offset.metadata.max.bytes must be >= 0")
        need(self.offsets_retention_minutes >= 1, "offsets.retention.minutes must be >= 1")
        need(
            self.offsets_retention_check_interval_ms >= 1, "offsets.retention.check.interval.ms must be >= 1"
        )
        need(self.offsets_commit_timeout_ms >= 1, "offsets.commit.timeout.ms must be >= 1")
        need(self.new_member_join_timeout_ms >= 1, "new_member_join_timeout_ms must be >= 1")
        need(self.group_consumer_session_timeout_ms >= 1, "group.consumer.session.timeout.ms must be >= 1")
        need(
            1 <= self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms must be >= 1 and below group.consumer.session.timeout.ms",
        )
        known = ASSIGNORS
        need(
            bool(self.group_consumer_assignors)
            and all(a in known for a in self.group_consumer_assignors)
            and len(set(self.group_consumer_assignors)) == len(self.group_consumer_assignors),
            f"group.consumer.assignors must be distinct names among {', '.join(known)}, "
            f"got {', '.join(self.group_consumer_assignors) or 'none'}",
        )
        need(self.group_consumer_max_size >= 1, "group.consumer.max.size must be >= 1")
        need(
            self.group_consumer_regex_refresh_interval_ms >= 0,
            "group.consumer.regex.refresh.interval.ms must be >= 0",
        )
        need(
            self.group_consumer_migration_policy in MIGRATION_POLICIES,
            f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
            f"got {self.group_consumer_migration_policy!r}",
        )

    @property
    def upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("bidirectional", "downgrade")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
