"""Path builders produce the reference layout and refuse names that cannot be znode path elements."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.legacy import paths


def test_consumer_paths() -> None:
    assert paths.group_path("g1") == "/consumers/g1"
    assert paths.ids_path("g1") == "/consumers/g1/ids"
    assert (
        paths.id_path("g1", "g1_host-1428512949385-1a2b3c4d")
        == "/consumers/g1/ids/g1_host-1428512949385-1a2b3c4d"
    )
    assert paths.owners_path("g1") == "/consumers/g1/owners"
    assert paths.owners_topic_path("g1", "topic1") == "/consumers/g1/owners/topic1"
    assert paths.owner_path("g1", "topic1", 3) == "/consumers/g1/owners/topic1/3"
    assert paths.offsets_path("g1") == "/consumers/g1/offsets"
    assert paths.offsets_topic_path("g1", "t") == "/consumers/g1/offsets/t"
    assert paths.offset_path("group1", "topic1", 0) == "/consumers/group1/offsets/topic1/0"


def test_broker_and_admin_paths() -> None:
    assert paths.broker_path(0) == "/brokers/ids/0"
    assert paths.topic_path("t.x-1_") == "/brokers/topics/t.x-1_"
    assert paths.partition_state_path("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert paths.delete_topic_path("t") == "/admin/delete_topics/t"
    assert paths.topic_config_path("t") == "/config/topics/t"
    assert paths.config_change_path(12) == "/config/changes/config_change_0000000012"
    assert paths.CONTROLLER == "/controller"
    assert paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert set(paths.PERSISTENT_PATHS_0_8_2) <= set(paths.PERSISTENT_PATHS_0_10_2)
    assert "/consumers" in paths.PERSISTENT_PATHS_0_8_2


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "tö", "x" * 256, "a\x00"])
def test_bad_topic_names(topic: str) -> None:
    with pytest.raises(paths.InvalidName) as info:
        paths.topic_path(topic)
    assert info.value.kind == "topic"
    assert repr(topic)[:20] in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_topic_length_limits() -> None:
    assert paths.topic_path("x" * 255)
    paths.validate_topic("x" * 249)
    with pytest.raises(paths.InvalidName, match="longer than 249"):
        paths.validate_topic("x" * 250)


@pytest.mark.parametrize("group", ["", ".", "..", "a/b", "a\x01", "a\ud800"])
def test_bad_group_names(group: str) -> None:
    with pytest.raises(paths.InvalidName) as info:
        paths.offset_path(group, "t", 0)
    assert info.value.kind == "group"


def test_groups_allow_what_the_old_consumer_allowed() -> None:
    assert paths.group_path("my group:ä") == "/consumers/my group:ä"


@pytest.mark.parametrize("partition", [-1, 2**31, True, "1"])
def test_bad_partitions(partition: object) -> None:
    with pytest.raises(paths.InvalidName, match="partition"):
        paths.owner_path("g", "t", partition)  # type: ignore[arg-type]


def test_parse_partition() -> None:
    assert paths.parse_partition("/p", "12") == 12
    for bad in ["", "-1", "01", "1a", "١"]:
        with pytest.raises(paths.InvalidName, match="/p"):
            paths.parse_partition("/p", bad)


@given(st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True).filter(lambda t: t not in (".", "..")))
def test_every_legal_topic_has_a_path(topic: str) -> None:
    assert paths.validate_topic(topic) == topic
    assert paths.offset_path("g", topic, 0).split("/")[4] == topic
