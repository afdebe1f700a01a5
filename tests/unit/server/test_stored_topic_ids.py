"""A single node's topic ids (KIP-516): drawn at creation, stored in Kafka's partition.metadata format beside the
topic's logs, read back after a restart, new for a topic deleted and created again (whose old id is then
UNKNOWN_TOPIC_ID), given once to logs stored before ids; an unreadable id file is never overwritten."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest as KCreate
from kafka.protocol.metadata import MetadataRequest as KMetadata

from zkcoord.errors import ErrorCode as E
from zkcoord.legacy.codecs import kafka_uuid_string
from zkcoord.security.acl import Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager
from zkcoord.server.topic_ids import (
    PARTITION_METADATA_FILE,
    decode_partition_metadata,
    encode_partition_metadata,
    new_topic_id,
    topic_lookup,
)

ID = uuid.UUID(bytes=bytes(range(16)))


def test_partition_metadata_is_kafkas_format() -> None:
    assert encode_partition_metadata(ID) == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n"
    assert decode_partition_metadata(b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n") == ID
    assert (
        decode_partition_metadata(b"version: 1\r\ntopic_id:   AAECAwQFBgcICQoLDA0ODw") == ID
    )  # Kafka's split


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "0 lines"),
        (b"version: 0\n", "1 lines"),
        (b"version: x\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", "version"),
        (b"version: 0\nid: AAECAwQFBgcICQoLDA0ODw\n", "topic_id"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "reserved"),
        (b"version: 0\ntopic_id: not-an-id\n", "not a Kafka uuid"),
        (b"\xff\xfe", "ASCII"),
        (b"version: 0\n" * 100, "bytes"),
    ],
)
def test_a_bad_partition_metadata_file_says_what_is_wrong(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        decode_partition_metadata(data)


@settings(max_examples=300)
@given(st.binary(max_size=80) | st.text(max_size=60).map(str.encode))
def test_any_bytes_give_an_id_or_a_value_error(data: bytes) -> None:
    try:
        topic_id = decode_partition_metadata(data)
    except ValueError:
        return
    assert decode_partition_metadata(encode_partition_metadata(topic_id)) == topic_id


def test_new_ids_are_never_reserved_nor_start_with_a_dash() -> None:
    drawn = {new_topic_id() for _ in range(2000)}
    assert len(drawn) == 2000
    assert all(t.int > 1 and not kafka_uuid_string(t).startswith("-") for t in drawn)


def test_ids_are_stored_read_back_and_new_after_a_re_creation(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    logs.create_topic("t", 2, topic_id=ID)
    stored = tmp_path / "logs" / "t-0" / PARTITION_METADATA_FILE
    assert stored.read_bytes() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n"
    assert topic_lookup(logs)("t") == (ID.hex, 2)
    logs.close()

    logs = LogManager(tmp_path)  # a restart
    assert logs.topic_ids == {"t": ID} and logs.topic_by_id(ID) == "t"
    with pytest.raises(ValueError, match="stored with id"):
        logs.set_topic_id("t", new_topic_id())  # logs of one topic never take another's id
    logs.delete_topic("t")
    assert logs.topic_by_id(ID) is None and topic_lookup(logs)("t") is None
    logs.create_topic("t", 1, topic_id=new_topic_id())
    assert logs.topic_ids["t"] != ID and logs.topic_by_id(ID) is None


def test_logs_from_before_ids_get_one_once_and_an_unreadable_id_is_left_alone(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    logs.create_topic("old", 1)
    logs.create_topic("bad", 1)
    bad = tmp_path / "logs" / "bad-0" / PARTITION_METADATA_FILE
    bad.write_bytes(b"version: 0\ntopic_id: garbage\n")
    logs.close()

    logs = LogManager(tmp_path)
    assert logs.unreadable_ids == {"bad"} and "bad" not in logs.topic_ids
    assert logs.assign_missing_ids(new_topic_id) == ["old"]
    given_id = logs.topic_ids["old"]
    assert logs.assign_missing_ids(new_topic_id) == []
    assert bad.read_bytes() == b"version: 0\ntopic_id: garbage\n"  # the operator's to repair
    assert topic_lookup(logs)("bad") is None  # never assigned to consumer-protocol members without an id
    logs.close()
    assert LogManager(tmp_path).topic_ids == {"old": given_id}


class Node:
    """A single node's broker, requests as frames."""

    def __init__(self, tmp: Path) -> None:
        self.logs = LogManager(tmp)
        self.broker = Broker(ServerConfig(data_dir=tmp), self.logs)

    async def ask(self, api: int, version: int, **fields: Any) -> Any:
        frame = kp.encode_request(api, version, 5, "c", **fields)
        answer = self.broker.dispatch(
            kp.decode_request(frame[4:], Session(principal="User:a", host="127.0.0.1"))
        )
        if isinstance(answer, Awaitable):
            answer = await answer
        assert isinstance(answer, bytes)
        return kp.decode_response(api, version, answer[4:])[1]

    async def create(self, name: str) -> uuid.UUID:
        topic = KCreate.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
        )
        got = await self.ask(kp.CREATE_TOPICS, 7, topics=[topic], timeout_ms=1000, validate_only=False)
        assert got.topics[0].error_code == 0
        topic_id: uuid.UUID = got.topics[0].topic_id
        return topic_id

    async def metadata(self, *, name: str | None = None, topic_id: uuid.UUID | None = None) -> Any:
        wanted = [KMetadata.MetadataRequestTopic(topic_id=topic_id, name=name)]
        got = await self.ask(kp.METADATA, 12, topics=wanted, allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)  # fmt: skip
        return got.topics[0]


def test_a_re_created_topic_has_a_new_id_and_the_old_one_is_unknown(tmp_path: Path) -> None:
    async def run() -> None:
        node = Node(tmp_path)
        first = await node.create("t")
        assert first == node.logs.topic_ids["t"] and first.int != 0  # CreateTopics v7 answers the stored id
        assert (await node.metadata(name="t")).topic_id == first
        assert (await node.metadata(topic_id=first)).name == "t"
        deleted = await node.ask(kp.DELETE_TOPICS, 5, topic_names=["t"], timeout_ms=1000)
        assert deleted.responses[0].error_code == 0
        second = await node.create("t")
        assert second != first
        assert (await node.metadata(name="t")).topic_id == second
        old = await node.metadata(topic_id=first)
        assert (old.error_code, old.name) == (E.UNKNOWN_TOPIC_ID, "")
        node.logs.close()
        again = Node(tmp_path)  # a restart answers the same id
        assert (await again.metadata(name="t")).topic_id == second

    asyncio.run(run())
