"""The topic znode's KIP-516 id: Kafka 2.8+'s version-3 `/brokers/topics/T` (`"topic_id"`, `Uuid.toString`) is
written and read exactly, older versions keep their bytes, and a malformed id fails closed naming the znode."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import MalformedZnode
from zkcoord.legacy.codecs import TopicAssignment, kafka_uuid_string, parse_kafka_uuid

P = "/brokers/topics/t"
ID = uuid.UUID(bytes=bytes(range(16)))

ids = st.builds(lambda i: uuid.UUID(int=i), st.integers(2, 2**128 - 1))
int32 = st.integers(-(2**31), 2**31 - 1)
replica_maps = st.dictionaries(st.integers(0, 2**31 - 1), st.lists(int32, max_size=4), max_size=6)


def test_kafka_uuid_string_is_url_safe_base64_without_padding() -> None:
    # Uuid.toString = Base64.getUrlEncoder().withoutPadding() of the 16 bytes, most significant first
    assert kafka_uuid_string(ID) == "AAECAwQFBgcICQoLDA0ODw"
    assert kafka_uuid_string(uuid.UUID(int=2**128 - 1)) == "_____________________w"
    assert parse_kafka_uuid("AAECAwQFBgcICQoLDA0ODw") == ID


def test_a_topic_id_is_written_as_kafka_28_writes_it() -> None:
    ta = TopicAssignment.of({1: [2], 0: [1]}, topic_id=ID)
    assert ta.encode() == (
        b'{"version":3,"partitions":{"0":[1],"1":[2]},"adding_replicas":{},"removing_replicas":{},'
        b'"topic_id":"AAECAwQFBgcICQoLDA0ODw"}'
    )
    assert TopicAssignment.decode(P, ta.encode()) == ta


def test_without_an_id_the_08_bytes_are_unchanged() -> None:
    assert TopicAssignment.of({0: [1]}).encode() == b'{"version":1,"partitions":{"0":[1]}}'


def test_kafka_written_znodes_read_in_any_key_order() -> None:
    # as a Kafka 3.x broker's Jackson writer leaves it (HashMap order), and a 2.4-2.7 v2 znode mid-reassignment
    kafka3 = (
        b'{"removing_replicas":{},"partitions":{"1":[2,1],"0":[1,2]},"topic_id":"AAECAwQFBgcICQoLDA0ODw",'
        b'"adding_replicas":{},"version":3}'
    )
    ta = TopicAssignment.decode(P, kafka3)
    assert ta.topic_id == ID and ta.version == 3 and ta.replicas == {0: (1, 2), 1: (2, 1)}
    v2 = b'{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}'
    moving = TopicAssignment.decode(P, v2)
    assert moving.topic_id is None and moving.adding_replicas == ((0, (3,)),)
    assert moving.encode() == v2  # a version-2 znode keeps its reassignment when written back


def test_assigning_an_id_keeps_every_other_field() -> None:
    v2 = b'{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}'
    with_id = TopicAssignment.decode(P, v2).with_topic_id(ID)
    doc = json.loads(with_id.encode())
    assert doc == {
        "version": 3,
        "partitions": {"0": [1, 2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [1]},
        "topic_id": "AAECAwQFBgcICQoLDA0ODw",
    }


@pytest.mark.parametrize("reserved", [uuid.UUID(int=0), uuid.UUID(int=1)])
def test_reserved_ids_are_never_written(reserved: uuid.UUID) -> None:
    with pytest.raises(ValueError, match="reserved"):
        TopicAssignment.of({0: [1]}, topic_id=reserved)


@pytest.mark.parametrize(
    ("topic_id", "reason"),
    [
        ("1", "must be a string"),
        ('"AAECAwQFBgcICQoLDA0ODw=="', "not a Kafka uuid"),  # padded: not what Kafka writes
        ('"AAECAwQFBgcICQoLDA0ODx"', "not a Kafka uuid"),  # non-zero trailing bits: another id's bytes
        ('"AAECAwQFBgcICQoLDA0OD+"', "not a Kafka uuid"),  # the standard alphabet, not the URL-safe one
        ('"00010203-0405-0607-0809-0a0b0c0d0e0f"', "not a Kafka uuid"),
        ('""', "not a Kafka uuid"),
        ("null", "must be a string"),
        ('"AAAAAAAAAAAAAAAAAAAAAA"', "reserves"),
        ('"AAAAAAAAAAAAAAAAAAAAAQ"', "reserves"),
    ],
)
def test_a_malformed_topic_id_names_the_znode(topic_id: str, reason: str) -> None:
    data = b'{"version":3,"partitions":{"0":[1]},"topic_id":' + topic_id.encode() + b"}"
    with pytest.raises(MalformedZnode) as info:
        TopicAssignment.decode(P, data)
    assert info.value.path == P and info.value.data == data
    assert "topic_id" in info.value.reason and reason in info.value.reason


def test_reassignment_maps_are_checked_like_partitions() -> None:
    for bad, reason in [
        (b'{"partitions":{"0":[1]},"adding_replicas":[]}', "adding_replicas must be an object"),
        (b'{"partitions":{"0":[1]},"removing_replicas":{"x":[1]}}', "partition id 'x' in removing_replicas"),
        (b'{"partitions":{"' + b"9" * 5000 + b'":[1]}}', "32-bit non-negative"),  # no int() of 5,000 digits
    ]:
        with pytest.raises(MalformedZnode, match=reason.replace("[", r"\[")):
            TopicAssignment.decode(P, bad)


@given(replica_maps, ids)
def test_round_trip_with_an_id(replicas: dict[int, list[int]], topic_id: uuid.UUID) -> None:
    ta = TopicAssignment.of(replicas, topic_id=topic_id)
    data = ta.encode()
    assert TopicAssignment.decode(P, data) == ta
    assert parse_kafka_uuid(json.loads(data)["topic_id"]) == topic_id
    assert len(json.loads(data)["topic_id"]) == 22


@given(ids)
def test_uuid_string_round_trip(topic_id: uuid.UUID) -> None:
    assert parse_kafka_uuid(kafka_uuid_string(topic_id)) == topic_id


@settings(max_examples=400)
@given(st.text(max_size=30))
def test_any_text_either_parses_canonically_or_is_refused(text: str) -> None:
    try:
        value = parse_kafka_uuid(text)
    except ValueError:
        return
    assert kafka_uuid_string(value) == text  # the only accepted form of each id


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=24)
topic_docs = st.fixed_dictionaries(
    {},
    optional={
        "version": json_scalars,
        "partitions": st.dictionaries(st.text(max_size=4), st.lists(json_scalars, max_size=3) | json_scalars),
        "adding_replicas": st.dictionaries(st.text(max_size=4), st.lists(json_scalars, max_size=3)),
        "removing_replicas": json_scalars,
        "topic_id": json_scalars | ids.map(kafka_uuid_string),
    },
)


@settings(max_examples=400)
@given(topic_docs)
def test_structured_garbage_is_read_or_refused_naming_the_znode(doc: dict[str, object]) -> None:
    data = json.dumps(doc).encode()
    try:
        ta = TopicAssignment.decode(P, data)
    except MalformedZnode as exc:
        assert exc.path == P and exc.data == data
        return
    assert TopicAssignment.decode(P, ta.encode()) == ta  # whatever is accepted is written back unchanged


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_malformed(data: bytes) -> None:
    try:
        TopicAssignment.decode(P, data)
    except MalformedZnode as exc:
        assert exc.path == P
