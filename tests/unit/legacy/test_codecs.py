"""Codecs write the exact bytes of Kafka 0.8.2-0.10.2 (examples from the reference) and read any key order;
every malformed payload raises MalformedZnode naming the znode."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import MalformedZnode
from zkcoord.legacy.codecs import (
    BrokerRegistration,
    ConsumerRegistration,
    ControllerInfo,
    PartitionState,
    SubscriptionPattern,
    TopicAssignment,
    TopicConfig,
    decode_controller_epoch,
    decode_offset,
    decode_owner,
    encode_controller_epoch,
    encode_json,
    encode_offset,
    encode_owner,
    json_escape_string,
    parse_endpoint,
)

P = "/some/znode"
TS = 1428512949385

# --- byte-exact writes (expected bytes copied from the reference) -------------------------------------------


def test_consumer_registration_bytes() -> None:
    reg = ConsumerRegistration.static({"topic1": 2, "topic2": 1}, timestamp_ms=TS)
    assert reg.encode() == (
        b'{"version":1,"subscription":{"topic1":2,"topic2":1},"pattern":"static","timestamp":"1428512949385"}'
    )


def test_empty_static_registration_bytes() -> None:
    reg = ConsumerRegistration.static({}, timestamp_ms=TS)
    assert reg.encode() == b'{"version":1,"subscription":{},"pattern":"static","timestamp":"1428512949385"}'
    assert ConsumerRegistration.decode(P, reg.encode()) == reg


def test_wildcard_registration_escapes_the_regex() -> None:
    reg = ConsumerRegistration.wildcard(
        'a/b\\d"\x1b\x7f', 3, pattern=SubscriptionPattern.WHITE_LIST, timestamp_ms=TS
    )
    assert reg.encode() == (
        b'{"version":1,"subscription":{"a\\/b\\\\d\\"\\u001b\\u007f":3},"pattern":"white_list",'
        b'"timestamp":"1428512949385"}'
    )
    back = ConsumerRegistration.decode(P, reg.encode())
    assert back == reg
    assert back.is_wildcard


def test_json_escape_string_table() -> None:
    assert json_escape_string('"\\/\b\f\n\r\t') == '\\"\\\\\\/\\b\\f\\n\\r\\t'
    assert json_escape_string("\x00\x1f\x7f\x9f\xa0é") == "\\u0000\\u001f\\u007f\\u009f\xa0é"


def test_writer_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="cannot represent"):
        encode_json({"host": 'a"b'})
    with pytest.raises(ValueError, match="never writes float"):
        encode_json(1.5)  # type: ignore[arg-type]
    assert encode_json({"a": 1, "b": [1, 2], "c": None, "d": True}) == '{"a":1,"b":[1,2],"c":null,"d":true}'


def test_owner_offset_epoch_bytes() -> None:
    assert encode_owner("group1_consumer1-0") == b"group1_consumer1-0"
    assert encode_offset(17780915) == b"17780915"
    assert encode_controller_epoch(1) == b"1"
    assert decode_owner(P, b"group1_consumer1-0") == "group1_consumer1-0"
    assert decode_offset(P, b"17780915") == 17780915
    assert decode_offset(P, b"-1") == -1
    assert decode_controller_epoch(P, b"12") == 12


def test_topic_assignment_bytes() -> None:
    ta = TopicAssignment.of({1: [2, 3], 0: [1, 2]})
    assert ta.encode() == b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    assert ta.partition_ids == [0, 1]
    assert ta.replicas == {0: (1, 2), 1: (2, 3)}


def test_partition_state_bytes() -> None:
    st_ = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    assert st_.encode() == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'


def test_controller_bytes_and_bare_integer_fallback() -> None:
    c = ControllerInfo(brokerid=0, timestamp_ms=TS)
    assert c.encode() == b'{"version":1,"brokerid":0,"timestamp":"1428512949385"}'
    old = ControllerInfo.decode(P, b"3")
    assert old == ControllerInfo(brokerid=3, timestamp_ms=None, version=0)
    assert old.encode() == b"3"


def test_broker_v1_bytes() -> None:
    b = BrokerRegistration.create("h", 9092, version=1, timestamp_ms=TS)
    assert b.encode() == b'{"jmx_port":-1,"timestamp":"1428512949385","host":"h","version":1,"port":9092}'


def test_broker_v2_bytes_both_writers() -> None:
    b = BrokerRegistration.create("h", 9092, version=2, timestamp_ms=TS, jmx_port=9999)
    assert b.encode() == (
        b'{"jmx_port":9999,"timestamp":"1428512949385","endpoints":["PLAINTEXT://h:9092"],"host":"h",'
        b'"version":2,"port":9092}'
    )
    b2 = BrokerRegistration.create("h", 9092, version=2, timestamp_ms=TS, writer="0.10.2")
    assert b2.encode() == (
        b'{"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"host":"h","timestamp":"1428512949385",'
        b'"port":9092,"version":2}'
    )
    assert BrokerRegistration.decode(P, b2.encode()).encode() == b2.encode()


def test_broker_v3_rack_bytes() -> None:
    b = BrokerRegistration.create("h", 9092, version=3, timestamp_ms=TS, rack="r1")
    assert b.encode() == (
        b'{"jmx_port":-1,"timestamp":"1428512949385","endpoints":["PLAINTEXT://h:9092"],"host":"h",'
        b'"version":3,"port":9092,"rack":"r1"}'
    )
    assert BrokerRegistration.create("h", 1, version=2, timestamp_ms=TS, rack="r1").rack is None


def test_broker_v4_bytes() -> None:
    b = BrokerRegistration.create("h", 9092, timestamp_ms=TS)
    assert b.encode() == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],'
        b'"jmx_port":-1,"host":"h","timestamp":"1428512949385","port":9092,"version":4}'
    )
    r = BrokerRegistration.create("h", 9092, timestamp_ms=TS, rack="r1")
    assert r.encode() == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],'
        b'"rack":"r1","jmx_port":-1,"host":"h","timestamp":"1428512949385","port":9092,"version":4}'
    )


def test_broker_without_plaintext_listener() -> None:
    b = BrokerRegistration.create("h", 9093, timestamp_ms=TS, endpoints=["SSL://h:9093"])
    assert b.host is None and b.port == -1
    assert b'"host":null' in b.encode()
    assert BrokerRegistration.decode(P, b.encode()) == b
    assert b.plaintext_endpoint() is None


def test_broker_plaintext_endpoint_via_protocol_map() -> None:
    data = (
        b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXT":"SSL"},'
        b'"endpoints":["EXT://e:1","INTERNAL://i:2"],"jmx_port":-1,"host":null,"timestamp":"1","port":-1,'
        b'"version":4}'
    )
    assert BrokerRegistration.decode(P, data).plaintext_endpoint() == ("i", 2)
    assert BrokerRegistration.decode(P, data).encode() == data


def test_broker_endpoint_of_a_secured_protocol() -> None:
    """A cluster node on a SASL_SSL listener registers that endpoint, and its peers find it by protocol."""
    b = BrokerRegistration.create("h", 9094, timestamp_ms=TS, endpoints=["SASL_SSL://h:9094"])
    assert b.endpoint_for("SASL_SSL") == ("h", 9094)
    assert b.endpoint_for("PLAINTEXT") is None and b.endpoint_for("SSL") is None
    old = BrokerRegistration.create("h", 9092, version=1, timestamp_ms=TS)  # host/port only: PLAINTEXT
    assert old.endpoint_for("PLAINTEXT") == ("h", 9092) and old.endpoint_for("SASL_SSL") is None


def test_broker_listeners_are_every_endpoint_with_its_protocol() -> None:
    data = (
        b'{"listener_security_protocol_map":{"EXT":"SASL_SSL","INTERNAL":"PLAINTEXT"},'
        b'"endpoints":["EXT://e:1","INTERNAL://i:2","SSL://s:3"],"jmx_port":-1,"host":null,"timestamp":"1",'
        b'"port":-1,"version":4}'
    )
    assert BrokerRegistration.decode(P, data).listeners() == (
        ("EXT", "SASL_SSL", "e", 1),
        ("INTERNAL", "PLAINTEXT", "i", 2),
        ("SSL", "SSL", "s", 3),  # not in the map: named by its protocol
    )
    secured = BrokerRegistration.create("h", 9094, timestamp_ms=TS, endpoints=["SASL_SSL://h:9094"])
    assert secured.listeners() == (("SASL_SSL", "SASL_SSL", "h", 9094),)
    old = BrokerRegistration.create("h", 9092, version=1, timestamp_ms=TS)
    assert old.listeners() == (("PLAINTEXT", "PLAINTEXT", "h", 9092),)


def test_ipv6_endpoint() -> None:
    assert parse_endpoint("PLAINTEXT://[::1]:9092") == ("PLAINTEXT", "::1", 9092)
    b = BrokerRegistration.create("::1", 9092, timestamp_ms=TS)
    assert b.endpoints == ("PLAINTEXT://[::1]:9092",)
    assert b.plaintext_endpoint() == ("::1", 9092)


# --- reading: key order, whitespace, escapes, extra keys, Jackson-era writes ---------------------------------


def test_readers_ignore_key_order_whitespace_and_extra_keys() -> None:
    data = b'{ "timestamp" : "1" , "pattern":"static", "extra": [1], "subscription" : {"t\\/x": 1}, "version":1 }'
    reg = ConsumerRegistration.decode(P, data)
    assert reg.topic_counts == {"t/x": 1} and reg.timestamp_ms == 1
    b = BrokerRegistration.decode(
        P,
        b'{"features":{},"version":5,"port":1,"host":"h","endpoints":["PLAINTEXT://h:1"],"jmx_port":-1,'
        b'"timestamp":"5","listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}',
    )
    assert b.version == 5 and b.plaintext_endpoint() == ("h", 1)


def test_kafka_reader_rules_for_registration() -> None:
    # An unknown pattern reads as static (TopicCount.constructTopicCount); so does an empty wildcard map.
    r = ConsumerRegistration.decode(P, b'{"subscription":{"t":1},"pattern":"weird"}')
    assert r.pattern is SubscriptionPattern.STATIC and r.timestamp_ms is None
    r = ConsumerRegistration.decode(P, b'{"subscription":{},"pattern":"white_list","timestamp":"1"}')
    assert r.pattern is SubscriptionPattern.STATIC


def test_round_trip_of_reference_examples_read_in_other_key_order() -> None:
    ps = PartitionState.decode(
        P, b'{"isr":[1,2],"leader":1,"leader_epoch":0,"version":1,"controller_epoch":1}'
    )
    assert ps.encode() == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    ta = TopicAssignment.decode(P, b'{"partitions":{"1":[2,3],"0":[1,2]},"version":1}')
    assert ta.encode() == b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    tc = TopicConfig.decode(P, b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert tc.encode() == b'{"version":1,"config":{"retention.ms":"1000"}}'


# --- malformed input ---------------------------------------------------------------------------------------

MALFORMED: list[tuple[object, bytes, str]] = [
    (ConsumerRegistration.decode, b"", "empty"),
    (ConsumerRegistration.decode, b"\xff\xfe", "not UTF-8"),
    (ConsumerRegistration.decode, b"{", "not JSON"),
    (ConsumerRegistration.decode, b"[1]", "expected a JSON object"),
    (ConsumerRegistration.decode, b'{"subscription":{"t":1}}', "missing key 'pattern'"),
    (ConsumerRegistration.decode, b'{"pattern":"static"}', "missing key 'subscription'"),
    (
        ConsumerRegistration.decode,
        b'{"pattern":"static","subscription":[]}',
        "subscription must be an object",
    ),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{"t":"1"}}', "stream count"),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{"t":0}}', ">= 1"),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{"t":1.5}}', "non-integer"),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{"t":2147483648}}', "32-bit"),
    (ConsumerRegistration.decode, b'{"pattern":"white_list","subscription":{"a":1,"b":1}}', "exactly one"),
    (ConsumerRegistration.decode, b'{"pattern":1,"subscription":{}}', "pattern must be a string"),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{},"timestamp":"x"}', "timestamp"),
    (ConsumerRegistration.decode, b'{"pattern":"static","subscription":{},"timestamp":NaN}', "not JSON"),
    (decode_owner, b"", "empty owner"),
    (decode_owner, b"\xc3", "not UTF-8"),
    (decode_offset, b"", "not a decimal"),
    (decode_offset, b" 12", "not a decimal"),
    (decode_offset, b"1_000", "not a decimal"),
    (decode_offset, b"9223372036854775808", "64-bit"),
    (decode_controller_epoch, b"2147483648", "32-bit"),
    (decode_controller_epoch, b"one", "not a decimal"),
    (BrokerRegistration.decode, b'{"host":"h","port":1}', "missing key 'version'"),
    (
        BrokerRegistration.decode,
        b'{"version":0,"host":"h","port":1}',
        "unsupported broker registration version 0",
    ),
    (BrokerRegistration.decode, b'{"version":1,"port":1}', "without host"),
    (BrokerRegistration.decode, b'{"version":1,"host":"h"}', "missing key 'port'"),
    (BrokerRegistration.decode, b'{"version":2,"host":"h","port":1}', "missing key 'endpoints'"),
    (BrokerRegistration.decode, b'{"version":2,"endpoints":"x"}', "endpoints must be a list"),
    (BrokerRegistration.decode, b'{"version":2,"endpoints":["nonsense"]}', "LISTENER://host:port"),
    (
        BrokerRegistration.decode,
        b'{"version":4,"endpoints":[],"listener_security_protocol_map":[]}',
        "must be an",
    ),
    (BrokerRegistration.decode, b'{"version":2,"endpoints":[],"rack":1}', "rack must be a string"),
    (BrokerRegistration.decode, b'{"version":1,"host":"h","port":"9092"}', "port must be an integer"),
    (TopicAssignment.decode, b'{"version":1}', "missing key 'partitions'"),
    (TopicAssignment.decode, b'{"partitions":{"a":[1]}}', "partition id 'a'"),
    (TopicAssignment.decode, b'{"partitions":{"-1":[1]}}', "partition id '-1'"),
    (TopicAssignment.decode, b'{"partitions":{"0":[1],"00":[2]}}', "appears twice"),
    (TopicAssignment.decode, b'{"partitions":{"0":1}}', "must be a list"),
    (TopicAssignment.decode, b'{"partitions":{"0":[true]}}', "must be an integer"),
    (TopicAssignment.decode, b'{"partitions":[]}', "partitions must be an object"),
    (PartitionState.decode, b'{"leader":1,"leader_epoch":0,"isr":[1]}', "missing key 'controller_epoch'"),
    (
        PartitionState.decode,
        b'{"leader":null,"leader_epoch":0,"isr":[1],"controller_epoch":1}',
        "leader must",
    ),
    (ControllerInfo.decode, b'{"version":1}', "missing key 'brokerid'"),
    (ControllerInfo.decode, b"abc", "not JSON"),
    (ControllerInfo.decode, b"99999999999", "32-bit"),
    (TopicConfig.decode, b'{"config":{"a":1}}', "config 'a' must be a string"),
    (TopicConfig.decode, b'{"config":1}', "config must be an object"),
]


@pytest.mark.parametrize(("decoder", "data", "reason"), MALFORMED)
def test_malformed_payloads_name_the_znode(decoder: object, data: bytes, reason: str) -> None:
    path = "/brokers/ids/7"
    with pytest.raises(MalformedZnode) as info:
        decoder(path, data)  # type: ignore[operator]
    assert info.value.path == path
    assert path in str(info.value)
    assert reason in info.value.reason
    assert info.value.data == data


def test_none_data_is_empty() -> None:
    with pytest.raises(MalformedZnode, match="empty"):
        PartitionState.decode(P, None)


def test_deep_nesting_is_malformed_not_a_crash() -> None:
    with pytest.raises(MalformedZnode):
        TopicAssignment.decode(P, b"[" * 100000)


# --- property tests ------------------------------------------------------------------------------------------

DECODERS = [
    ConsumerRegistration.decode,
    BrokerRegistration.decode,
    TopicAssignment.decode,
    PartitionState.decode,
    ControllerInfo.decode,
    TopicConfig.decode,
    decode_owner,
    decode_offset,
    decode_controller_epoch,
]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.sampled_from(DECODERS))
def test_random_bytes_only_ever_raise_malformed(data: bytes, decoder: object) -> None:
    try:
        decoder(P, data)  # type: ignore[operator]
    except MalformedZnode as exc:
        assert exc.path == P


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KEYS = [
    "version",
    "subscription",
    "pattern",
    "timestamp",
    "host",
    "port",
    "endpoints",
    "jmx_port",
    "isr",
    "leader",
    "leader_epoch",
    "controller_epoch",
    "brokerid",
    "partitions",
    "config",
    "rack",
    "listener_security_protocol_map",
]


@settings(max_examples=400)
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8), st.sampled_from(DECODERS))
def test_random_json_objects_only_ever_raise_malformed(obj: dict[str, object], decoder: object) -> None:
    data = json.dumps(obj).encode()
    try:
        decoder(P, data)  # type: ignore[operator]
    except MalformedZnode as exc:
        assert exc.path == P


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
ts = st.integers(0, 2**63 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)


@given(st.dictionaries(topics, st.integers(1, 2**31 - 1), max_size=6), ts)
def test_static_registration_round_trip(sub: dict[str, int], t: int) -> None:
    reg = ConsumerRegistration.static(sub, timestamp_ms=t)
    data = reg.encode()
    assert ConsumerRegistration.decode(P, data) == reg
    assert json.loads(data) == {"version": 1, "subscription": sub, "pattern": "static", "timestamp": str(t)}


@given(
    st.text(min_size=1, max_size=30).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
    ts,
    st.sampled_from([SubscriptionPattern.WHITE_LIST, SubscriptionPattern.BLACK_LIST]),
)
def test_wildcard_registration_round_trip(regex: str, t: int, pattern: SubscriptionPattern) -> None:
    reg = ConsumerRegistration.wildcard(regex, 2, pattern=pattern, timestamp_ms=t)
    data = reg.encode()
    assert ConsumerRegistration.decode(P, data) == reg
    # the bytes are valid JSON carrying the raw regex (the escaping is exactly reversible)
    assert json.loads(data)["subscription"] == {regex: 2}


hosts = st.from_regex(r"[a-z0-9.-]{1,15}", fullmatch=True)


@given(
    hosts,
    st.integers(0, 65535),
    st.integers(1, 4),
    ts,
    st.one_of(st.none(), topics),
    int32,
    st.sampled_from(["0.9", "0.10.2"]),
)
def test_broker_round_trip(
    host: str, port: int, version: int, t: int, rack: str | None, jmx: int, writer: str
) -> None:
    b = BrokerRegistration.create(
        host, port, version=version, timestamp_ms=t, rack=rack, jmx_port=jmx, writer=writer
    )
    data = b.encode()
    back = BrokerRegistration.decode(P, data)
    assert back == b
    assert back.encode() == data
    assert back.plaintext_endpoint() == (host, port)


@given(st.dictionaries(st.integers(0, 2**31 - 1), st.lists(int32, max_size=4), max_size=8))
def test_topic_assignment_round_trip(replicas: dict[int, list[int]]) -> None:
    ta = TopicAssignment.of(replicas)
    assert TopicAssignment.decode(P, ta.encode()) == ta
    # reading a shuffled key order gives the same value
    items = list(json.loads(ta.encode())["partitions"].items())
    random.Random(0).shuffle(items)
    shuffled = json.dumps({"partitions": dict(items), "version": 1}).encode()
    assert TopicAssignment.decode(P, shuffled) == ta


@given(int32, int32, st.lists(int32, max_size=5), int32)
def test_partition_state_round_trip(leader: int, epoch: int, isr: list[int], cepoch: int) -> None:
    s = PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=cepoch)
    assert PartitionState.decode(P, s.encode()) == s


@given(st.integers(0, 2**31 - 1), ts)
def test_controller_round_trip(broker: int, t: int) -> None:
    c = ControllerInfo(brokerid=broker, timestamp_ms=t)
    assert ControllerInfo.decode(P, c.encode()) == c


@given(st.integers(-(2**63), 2**63 - 1))
def test_offset_round_trip(offset: int) -> None:
    assert decode_offset(P, encode_offset(offset)) == offset


def test_broker_endpoint_for_a_security_protocol() -> None:
    data = (
        b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXT":"SASL_SSL"},'
        b'"endpoints":["EXT://e:1","INTERNAL://i:2"],"jmx_port":-1,"host":null,"timestamp":"1","port":-1,'
        b'"version":4}'
    )
    b = BrokerRegistration.decode(P, data)
    assert b.endpoint_for("SASL_SSL") == ("e", 1)
    assert b.endpoint_for("PLAINTEXT") == ("i", 2)
    # No listener of that protocol: none (a client of one protocol cannot talk to a listener of another).
    assert b.endpoint_for("SSL") is None
    assert (
        BrokerRegistration.create("h", 9093, timestamp_ms=TS, endpoints=["SSL://h:9093"]).endpoint_for(
            "SASL_SSL"
        )
        is None
    )
