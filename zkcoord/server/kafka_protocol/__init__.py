"""The one adapter over kafka-python 3.x protocol classes: decode request frames, encode response frames.

Nothing else in zkcoord imports `kafka.protocol`. Requests come out as a `RequestFrame` whose `body` is the
kafka-python request object, read only in this package: the group APIs are decoded into `zkcoord.group.messages`
and the data-plane APIs into `zkcoord.server.messages`, and responses are encoded here from those values. Every way
a frame can be wrong raises a `ProtocolError` subclass naming what was wrong; the wire layer decides whether it can
answer (UNSUPPORTED_VERSION, ApiVersions v0 fallback) or must close the connection.

The modules, by concern: `codecs` (the classes and compiled decoders of every API in `zkcoord.api_keys.SERVED`,
resolved once per (api key, version) from that one table), `frames` (request and response headers, decoding,
errors), `common` (ApiVersions, error answers), `groups`, `data_plane`, `sasl`, `consumer_groups` (the KIP-848
APIs' hand-written codec framed) and `proxy` (what the proxy reads of forwarded frames). Callers use this
package's names below; the modules' own names are the package's business.
"""

from typing import Final

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, LeaveGroupRequest, SyncGroupRequest

from zkcoord.api_keys import API_NAMES, ApiKey
from zkcoord.api_keys import CONSUMER_GROUP_APIS as _CONSUMER_GROUP_APIS
from zkcoord.api_keys import GROUP_APIS as _GROUP_APIS
from zkcoord.group.errors import ErrorCode
from zkcoord.server import messages as dm
from zkcoord.server.kafka_protocol.codecs import ACCEPTED, ADVERTISED
from zkcoord.server.kafka_protocol.codecs import CLASSES as _CLASSES
from zkcoord.server.kafka_protocol.codecs import CODECS as _CODECS
from zkcoord.server.kafka_protocol.common import (
    api_versions_fallback,
    api_versions_response,
    decode_response,
    encode_request,
    error_response,
    unsupported_version_response,
)
from zkcoord.server.kafka_protocol.consumer_groups import (
    consumer_group_request,
    consumer_group_response,
    decode_consumer_group_response,
    encode_consumer_group_request,
)
from zkcoord.server.kafka_protocol.data_plane import (
    create_topics_request,
    create_topics_response,
    delete_topics_request,
    delete_topics_response,
    fetch_request,
    fetch_response,
    find_coordinator_request,
    find_coordinator_response,
    init_producer_id_request,
    init_producer_id_response,
    list_offsets_request,
    list_offsets_response,
    metadata_request,
    metadata_response,
    produce_request,
    produce_response,
)
from zkcoord.server.kafka_protocol.frames import (
    INVALID_REQUEST,
    UNSUPPORTED_VERSION,
    MalformedBody,
    MalformedFrame,
    ProtocolError,
    RequestFrame,
    UnknownApiKey,
    UnsupportedVersion,
    decode_request,
    expects_response,
    peek_header,
    produce_acks,
    valid_client_software,
)
from zkcoord.server.kafka_protocol.groups import group_requests, group_response
from zkcoord.server.kafka_protocol.proxy import (
    ADDRESS_APIS,
    CONSUMER_GROUP_VERSIONS,
    OFFSET_WRITE_APIS,
    AddressOf,
    cap_api_versions,
    consumer_group_split,
    describe_merged,
    describe_only,
    group_ids,
    listed_api_keys,
    metadata_max_version,
    offset_write_refusal,
    proxy_version_caps,
    rewrite_addresses,
    topic_metadata_request,
    topic_partitions,
    unserved_heartbeat,
)
from zkcoord.server.kafka_protocol.sasl import (
    sasl_auth_bytes,
    sasl_authenticate_response,
    sasl_handshake_mechanism,
    sasl_handshake_response,
)

# The names callers know the keys by, from the one enum (zkcoord.api_keys): the plain ints frames carry, so the
# tables and sets callers key by them are looked up with a frame's `api_key` at plain-int speed.
PRODUCE: Final[int] = int(ApiKey.PRODUCE)
FETCH: Final[int] = int(ApiKey.FETCH)
LIST_OFFSETS: Final[int] = int(ApiKey.LIST_OFFSETS)
METADATA: Final[int] = int(ApiKey.METADATA)
OFFSET_COMMIT: Final[int] = int(ApiKey.OFFSET_COMMIT)
OFFSET_FETCH: Final[int] = int(ApiKey.OFFSET_FETCH)
FIND_COORDINATOR: Final[int] = int(ApiKey.FIND_COORDINATOR)
JOIN_GROUP: Final[int] = int(ApiKey.JOIN_GROUP)
HEARTBEAT: Final[int] = int(ApiKey.HEARTBEAT)
LEAVE_GROUP: Final[int] = int(ApiKey.LEAVE_GROUP)
SYNC_GROUP: Final[int] = int(ApiKey.SYNC_GROUP)
DESCRIBE_GROUPS: Final[int] = int(ApiKey.DESCRIBE_GROUPS)
LIST_GROUPS: Final[int] = int(ApiKey.LIST_GROUPS)
SASL_HANDSHAKE: Final[int] = int(ApiKey.SASL_HANDSHAKE)
API_VERSIONS: Final[int] = int(ApiKey.API_VERSIONS)
CREATE_TOPICS: Final[int] = int(ApiKey.CREATE_TOPICS)
DELETE_TOPICS: Final[int] = int(ApiKey.DELETE_TOPICS)
INIT_PRODUCER_ID: Final[int] = int(ApiKey.INIT_PRODUCER_ID)
TXN_OFFSET_COMMIT: Final[int] = int(ApiKey.TXN_OFFSET_COMMIT)
SASL_AUTHENTICATE: Final[int] = int(ApiKey.SASL_AUTHENTICATE)
DELETE_GROUPS: Final[int] = int(ApiKey.DELETE_GROUPS)
OFFSET_DELETE: Final[int] = int(ApiKey.OFFSET_DELETE)
DESCRIBE_CLUSTER: Final[int] = int(ApiKey.DESCRIBE_CLUSTER)
CONSUMER_GROUP_HEARTBEAT: Final[int] = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
CONSUMER_GROUP_DESCRIBE: Final[int] = int(ApiKey.CONSUMER_GROUP_DESCRIBE)

GROUP_APIS: Final[frozenset[int]] = frozenset(map(int, _GROUP_APIS))
CONSUMER_GROUP_APIS: Final[frozenset[int]] = frozenset(map(int, _CONSUMER_GROUP_APIS))

# Re-exported: the Metadata values predate `zkcoord.server.messages` and callers know them as kp.TopicMeta.
PartitionMeta = dm.PartitionMeta
TopicMeta = dm.TopicMeta

__all__ = [
    "ACCEPTED", "ADDRESS_APIS", "ADVERTISED", "API_NAMES", "CONSUMER_GROUP_APIS", "CONSUMER_GROUP_VERSIONS",
    "GROUP_APIS", "INVALID_REQUEST", "OFFSET_WRITE_APIS", "UNSUPPORTED_VERSION", "_CLASSES", "_CODECS", "AddressOf",
    "ApiKey", "CreateTopicsRequest", "ErrorCode", "FetchRequest", "LeaveGroupRequest", "MalformedBody",
    "MalformedFrame", "PartitionMeta", "ProtocolError", "RequestFrame", "SyncGroupRequest", "TopicMeta",
    "UnknownApiKey", "UnsupportedVersion", "api_versions_fallback", "api_versions_response", "cap_api_versions",
    "consumer_group_request", "consumer_group_response", "consumer_group_split", "create_topics_request",
    "create_topics_response", "decode_consumer_group_response", "decode_request", "decode_response",
    "delete_topics_request", "delete_topics_response", "describe_merged", "describe_only",
    "encode_consumer_group_request", "encode_request", "error_response", "expects_response", "fetch_request",
    "fetch_response", "find_coordinator_request", "find_coordinator_response", "group_ids", "group_requests",
    "group_response", "init_producer_id_request", "init_producer_id_response", "list_offsets_request",
    "list_offsets_response", "listed_api_keys", "metadata_max_version", "metadata_request", "metadata_response",
    "offset_write_refusal", "peek_header", "produce_acks", "produce_request", "produce_response",
    "proxy_version_caps", "rewrite_addresses", "sasl_auth_bytes", "sasl_authenticate_response",
    "sasl_handshake_mechanism", "sasl_handshake_response", "topic_metadata_request", "topic_partitions",
    "unserved_heartbeat", "unsupported_version_response", "valid_client_software"
]  # fmt: skip
