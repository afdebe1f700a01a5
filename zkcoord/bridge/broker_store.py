"""The broker offset store of a group through kafka-python's high-level admin API: OffsetFetch to read,
OffsetCommit with generation -1 (a committer outside group management, as `alter_group_offsets` sends)
to write; works against `zkcoord serve` and any Kafka broker. Per-partition errors come back as
StoreErrors; a request-level failure becomes one StoreError on every partition, never an exception
the caller has to guess about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from zkcoord.bridge.policy import Store, StoreError, StoreRead, StoreReply, TopicPartition, as_tp
from zkcoord.zk.offset_store import OffsetWriteMode, WriteMode

log = logging.getLogger(__name__)


def _error_name(error: Any) -> str:
    """Kafka's name (NOT_COORDINATOR) for broker error classes, the class name for client-side errors."""
    message = getattr(error, "message", None)
    if isinstance(message, str) and message.isupper():
        return message
    return str(getattr(error, "__name__", None) or type(error).__name__)


def _broker_error(error: Any, message: str = "") -> StoreError:
    return StoreError(Store.BROKER, _error_name(error), message, bool(getattr(error, "retriable", False)))


def default_admin_factory(
    bootstrap: str, request_timeout_ms: int, bootstrap_timeout_ms: int, **security: Any
) -> Any:
    """`security`: kafka-python's security arguments (zkcoord.security.client_config)."""
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="zkcoord-migrate",
        request_timeout_ms=request_timeout_ms,
        bootstrap_timeout_ms=bootstrap_timeout_ms,
        **security,
    )


class BrokerOffsetStore:
    """Offsets of one group on the broker. The admin client is created on first use and shared."""

    store = Store.BROKER

    def __init__(
        self,
        bootstrap: str,
        group: str,
        *,
        request_timeout_ms: int = 10_000,
        bootstrap_timeout_ms: int = 10_000,
        admin_factory: Callable[..., Any] = default_admin_factory,
        admin: Any = None,
        security: Mapping[str, Any] | None = None,  # kafka-python security arguments (--command-config)
    ) -> None:
        if not group:
            raise ValueError("group id must not be empty")
        self.bootstrap = bootstrap
        self.group = group
        self.request_timeout_ms = request_timeout_ms
        self.bootstrap_timeout_ms = bootstrap_timeout_ms
        self._admin_factory = admin_factory
        self._admin = admin
        self._owns_admin = admin is None
        self.security = dict(security or {})

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = self._admin_factory(
                self.bootstrap, self.request_timeout_ms, self.bootstrap_timeout_ms, **self.security
            )
        return self._admin

    def for_group(self, group: str) -> BrokerOffsetStore:
        """Another group through the same admin connection."""
        return BrokerOffsetStore(
            self.bootstrap,
            group,
            request_timeout_ms=self.request_timeout_ms,
            bootstrap_timeout_ms=self.bootstrap_timeout_ms,
            admin_factory=self._admin_factory,
            admin=self.admin,
            security=self.security,
        )

    def close(self) -> None:
        if self._admin is not None and self._owns_admin:
            self._admin.close()
        self._admin = None

    def __enter__(self) -> BrokerOffsetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------- offsets

    def write_offsets(self, offsets: Mapping[Any, int], mode: OffsetWriteMode | None = None) -> StoreReply:
        """OffsetCommit: the broker has no conditional write, so OVERWRITE (or None) is its only `mode`."""
        from kafka.structs import OffsetAndMetadata
        from kafka.structs import TopicPartition as KafkaTP

        if mode not in (None, WriteMode.OVERWRITE):
            raise ValueError(f"the broker's OffsetCommit cannot write in mode {mode!r}: it only overwrites")
        wanted = {as_tp(k): int(v) for k, v in offsets.items()}
        if not wanted:
            return StoreReply(Store.BROKER, ())
        request = {
            KafkaTP(tp.topic, tp.partition): OffsetAndMetadata(off, "", -1) for tp, off in wanted.items()
        }
        try:
            reply = self.admin.alter_group_offsets(self.group, request)
        except Exception as exc:
            log.warning("group=%s broker commit failed: %s", self.group, exc)
            return StoreReply.all_failed(Store.BROKER, wanted, _broker_error(type(exc), str(exc)))
        errors: dict[TopicPartition, StoreError | None] = {}
        for ktp, error in reply.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            if tp in wanted:
                errors[tp] = None if _error_name(error) == "NO_ERROR" else _broker_error(error)
        # A partition the broker did not answer for is left out: combine_commit reports it as NO_REPLY.
        return StoreReply.of(Store.BROKER, errors)

    def read_offsets(self, partitions: Iterable[Any] | None = None) -> StoreRead:
        """Committed offsets (all of the group's when `partitions` is None); -1 means none committed."""
        from kafka.structs import TopicPartition as KafkaTP

        spec = None if partitions is None else sorted(KafkaTP(*as_tp(p)) for p in partitions)
        try:
            result = self.admin.list_group_offsets({self.group: spec})
        except Exception as exc:
            return StoreRead(Store.BROKER, request_error=_broker_error(type(exc), str(exc)))
        found: dict[TopicPartition, int] = {}
        for ktp, meta in (result.get(self.group) or {}).items():
            offset = int(meta.offset)
            if offset >= 0:
                found[TopicPartition(ktp.topic, ktp.partition)] = offset
        return StoreRead(Store.BROKER, offsets=dict(sorted(found.items())))

    # -------------------------------------------------------------------------------------- membership

    def describe(self) -> dict[str, Any]:
        """DescribeGroups for this group: {'state', 'protocol_type', 'protocol', 'members': [...]}, members as
        dicts with member_id, client_id, client_host. Raises what the admin client raises."""
        described = self.admin.describe_groups([self.group])
        info = described.get(self.group, {}) if isinstance(described, dict) else {}
        members = []
        for member in info.get("members", []) or []:
            members.append(
                {
                    "member_id": member.get("member_id", ""),
                    "client_id": member.get("client_id", ""),
                    "client_host": member.get("client_host", ""),
                }
            )
        return {
            "state": info.get("group_state") or info.get("state") or "",
            "protocol_type": info.get("protocol_type", ""),
            "protocol": info.get("protocol_data") or info.get("protocol", ""),
            "members": sorted(members, key=lambda m: m["member_id"]),
        }

    def list_groups(self) -> list[str]:
        return sorted({g.get("group_id", "") for g in self.admin.list_groups()} - {""})
