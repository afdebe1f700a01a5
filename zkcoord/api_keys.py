"""Kafka's API keys, numbered once: every request zkcoord serves or reads, with Kafka's key and name (from Kafka's
clients/src/main/resources/common/message/*.json) and, for the APIs the wire server serves, the version windows
it advertises in ApiVersions and the wider ones it decodes; every layer takes API numbers and names from here.

Adding an API to the server starts with a row here (its key and name in `ApiKey` and `_NAMES`, its windows in
`SERVED`); the adapter (`zkcoord.server.kafka_protocol`) adds its codec and `zkcoord.server.apis` its
authorization rule and handler, and a unit test fails until every advertised API has all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Final


class ApiKey(IntEnum):
    """Kafka's `ApiKeys`: the request's number on the wire (equal to the plain int)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69

    @property
    def api_name(self) -> str:
        """Kafka's name of the API (its message specs' `name` without Request/Response): "OffsetCommit"."""
        return _NAMES[self]


_NAMES: Final[MappingProxyType[ApiKey, str]] = MappingProxyType(
    {
        ApiKey.PRODUCE: "Produce",
        ApiKey.FETCH: "Fetch",
        ApiKey.LIST_OFFSETS: "ListOffsets",
        ApiKey.METADATA: "Metadata",
        ApiKey.OFFSET_COMMIT: "OffsetCommit",
        ApiKey.OFFSET_FETCH: "OffsetFetch",
        ApiKey.FIND_COORDINATOR: "FindCoordinator",
        ApiKey.JOIN_GROUP: "JoinGroup",
        ApiKey.HEARTBEAT: "Heartbeat",
        ApiKey.LEAVE_GROUP: "LeaveGroup",
        ApiKey.SYNC_GROUP: "SyncGroup",
        ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
        ApiKey.LIST_GROUPS: "ListGroups",
        ApiKey.SASL_HANDSHAKE: "SaslHandshake",
        ApiKey.API_VERSIONS: "ApiVersions",
        ApiKey.CREATE_TOPICS: "CreateTopics",
        ApiKey.DELETE_TOPICS: "DeleteTopics",
        ApiKey.INIT_PRODUCER_ID: "InitProducerId",
        ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
        ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
        ApiKey.DELETE_GROUPS: "DeleteGroups",
        ApiKey.OFFSET_DELETE: "OffsetDelete",
        ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
        ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
        ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    }
)

# Kafka's name of every key above, by plain number (for labels and messages about a key read off the wire).
API_NAMES: Final[MappingProxyType[int, str]] = MappingProxyType({int(k): n for k, n in _NAMES.items()})


def api_name(api_key: int) -> str:
    """Kafka's name of `api_key`, or "api_key N" for a number this table does not know."""
    return API_NAMES.get(api_key) or f"api_key {api_key}"


@dataclass(frozen=True, slots=True)
class Windows:
    """The versions of one served API: `advertised` in ApiVersions, `accepted` (decoded and answered: the
    advertised window, or a wider one for versions a client may send when pinned to a newer table)."""

    advertised: tuple[int, int]
    accepted: tuple[int, int]

    def __post_init__(self) -> None:
        (alo, ahi), (clo, chi) = self.advertised, self.accepted
        if not 0 <= alo <= ahi or not 0 <= clo <= alo or chi < ahi:
            raise ValueError(f"accepted window {self.accepted} must hold the advertised {self.advertised}")


def _same(lo: int, hi: int) -> Windows:
    return Windows((lo, hi), (lo, hi))


# The Kafka 2.8 maxima (group-protocol.md §12.5): kafka-python infers "2.8" from them, librdkafka gets RecordBatch
# v2 (Produce >= 3, Fetch >= 4), kcat's librdkafka 2.0.2 picks its own maxima below these. Minimums are 0 as in
# 2.8, and served: Produce v0-v2 message sets are converted up, Fetch v0-v3 answers converted down
# (zkcoord.server.old_formats), OffsetCommit/OffsetFetch v0 go to ZooKeeper on a cluster node. SASL keeps Kafka
# 2.8's windows: SaslHandshake 0-1 (v0 advertised because librdkafka enables SASL only when the window includes 0,
# its raw-token flow answered UNSUPPORTED_VERSION), SaslAuthenticate 0-2 (v2 flexible). The accepted windows
# are bounded again by what the codec knows (kafka-python's class maxima).
SERVED: Final[MappingProxyType[ApiKey, Windows]] = MappingProxyType(
    {
        ApiKey.PRODUCE: _same(0, 9),
        ApiKey.FETCH: _same(0, 12),
        ApiKey.LIST_OFFSETS: Windows((0, 6), (0, 7)),
        ApiKey.METADATA: _same(0, 12),  # v12: topics by id, which librdkafka needs for KIP-848 assignments
        ApiKey.OFFSET_COMMIT: _same(
            0, 9
        ),  # v9: consumer-protocol members (member id + member epoch, KIP-848)
        ApiKey.OFFSET_FETCH: _same(0, 9),
        ApiKey.FIND_COORDINATOR: Windows((0, 3), (0, 4)),  # v4: batched keys, for clients pinned to it
        ApiKey.JOIN_GROUP: Windows((0, 7), (0, 9)),
        ApiKey.HEARTBEAT: _same(0, 4),
        ApiKey.LEAVE_GROUP: Windows((0, 4), (0, 5)),
        ApiKey.SYNC_GROUP: _same(0, 5),
        ApiKey.DESCRIBE_GROUPS: _same(0, 5),
        ApiKey.LIST_GROUPS: _same(
            0, 5
        ),  # v5: the group type (classic, consumer) and a types filter (KIP-848)
        ApiKey.SASL_HANDSHAKE: _same(0, 1),
        ApiKey.API_VERSIONS: Windows((0, 3), (0, 4)),
        ApiKey.CREATE_TOPICS: _same(0, 7),
        ApiKey.DELETE_TOPICS: _same(0, 5),  # v6 names topics by id: not served (ids derive from names)
        ApiKey.INIT_PRODUCER_ID: _same(0, 4),
        ApiKey.SASL_AUTHENTICATE: _same(0, 2),
        ApiKey.DELETE_GROUPS: _same(0, 2),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: _same(0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: _same(0, 0),
    }
)

# The classic group APIs (answered by a group coordinator) and the consumer rebalance protocol's (KIP-848).
GROUP_APIS: Final = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
        ApiKey.DELETE_GROUPS,
    }
)
CONSUMER_GROUP_APIS: Final = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE})
