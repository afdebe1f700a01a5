"""The one API table: every advertised API has a codec, a decoder, an encoder, an authorization rule and a handler,
and its key and name are Kafka's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zkcoord.api_keys import API_NAMES, CONSUMER_GROUP_APIS, GROUP_APIS, SERVED, ApiKey, Windows, api_name
from zkcoord.security.acl import Operation, ResourceType
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.apis import API_TABLE, PUBLIC, Handler, handled_by
from zkcoord.server.authorization import GROUP_OPERATION
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager

# (apiKey, name) as Kafka's clients/src/main/resources/common/message/<Name>Request.json declare them.
KAFKA_MESSAGE_SPECS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    28: "TxnOffsetCommit",
    36: "SaslAuthenticate",
    42: "DeleteGroups",
    47: "OffsetDelete",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}


def test_keys_and_names_are_kafkas() -> None:
    assert {int(k): k.api_name for k in ApiKey} == KAFKA_MESSAGE_SPECS
    assert dict(API_NAMES) == KAFKA_MESSAGE_SPECS
    for key in ApiKey:  # Kafka's ApiKeys enum spells each name in upper snake case: OFFSET_COMMIT
        assert key.name == re.sub(r"(?<!^)(?=[A-Z])", "_", key.api_name).upper()
    assert api_name(8) == "OffsetCommit" and api_name(99) == "api_key 99"


def test_a_window_must_hold_what_it_advertises() -> None:
    assert Windows((0, 3), (0, 4)).accepted == (0, 4)
    for advertised, accepted in (((0, 4), (0, 3)), ((1, 2), (2, 2)), ((3, 2), (3, 2)), ((-1, 2), (-1, 2))):
        with pytest.raises(ValueError):
            Windows(advertised, accepted)


@pytest.mark.parametrize("key", sorted(SERVED), ids=lambda k: k.api_name)
def test_every_advertised_api_has_codec_decoder_encoder_authorization_and_handler(key: ApiKey) -> None:
    lo, hi = SERVED[key].accepted
    cls_max = kp._CLASSES[key][0].max_version if key in kp._CLASSES else hi
    assert [v for v in range(lo, hi + 1) if (key, v) not in kp._CODECS] == [
        v for v in range(lo, hi + 1) if v > cls_max
    ], "a codec for every accepted version the classes know"
    assert SERVED[key].advertised[1] <= cls_max, "every advertised version decodes"
    api = API_TABLE[key]
    assert api.key is key
    assert callable(api.decode) and callable(api.encode)
    assert isinstance(api.handler, Handler)
    assert all(
        isinstance(n.resource, ResourceType) and isinstance(n.operation, Operation) for n in api.authorization
    )
    # Only what a client needs before it may be told who it is goes without authorization.
    assert (api.authorization == PUBLIC) == (key in {ApiKey.API_VERSIONS, *handled_by(Handler.LOGIN)})


def test_the_table_serves_what_is_advertised_and_nothing_else() -> None:
    assert set(API_TABLE) == set(SERVED)
    assert {k for k, _ in kp._CODECS} == set(SERVED)
    req = kp.decode_request(kp.encode_request(kp.API_VERSIONS, 0, 1, "c")[4:])
    _, resp = kp.decode_response(kp.API_VERSIONS, 0, kp.api_versions_response(req)[4:])
    listed = {e.api_key: (e.min_version, e.max_version) for e in resp.api_keys}
    assert listed == {int(k): w.advertised for k, w in SERVED.items()}


def test_each_handler_answers_exactly_its_rows(tmp_path: Path) -> None:
    broker = Broker(ServerConfig(data_dir=tmp_path), LogManager(tmp_path))
    assert handled_by(Handler.BROKER) == set(broker._handlers)
    # GroupDispatch answers the classic group APIs and the consumer protocol's (zkcoord.server.groups).
    assert handled_by(Handler.GROUPS) == GROUP_APIS | CONSUMER_GROUP_APIS
    # listener_security's SaslAuthenticator reads SaslHandshake and SaslAuthenticate.
    assert handled_by(Handler.LOGIN) == {kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE}


def test_group_operations_come_from_the_rows() -> None:
    by_name = {t.__name__: op for t, op in GROUP_OPERATION.items()}
    assert by_name == {
        "JoinGroupRequest": Operation.READ,
        "SyncGroupRequest": Operation.READ,
        "HeartbeatRequest": Operation.READ,
        "LeaveGroupRequest": Operation.READ,
        "OffsetCommitRequest": Operation.READ,
        "OffsetFetchRequest": Operation.DESCRIBE,
        "DescribeGroupsRequest": Operation.DESCRIBE,
        "DeleteGroupsRequest": Operation.DELETE,
    }
