"""Every parser of stored topic and identity data takes any input and either answers or raises its one precise
error: `/cluster/id`, a topic's configs (CreateTopics, `topic-config.json`, `/config/topics/T`), and
`meta.properties`. Fuzzed with hypothesis: bytes, nesting depth and size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import ConfigError, MalformedZnode
from zkcoord.server.log import TOPIC_CONFIG_FILE, InvalidConfig, LogManager, TopicConfig
from zkcoord.server.meta import META_FILE, parse_properties, read_or_create_cluster_id
from zkcoord.zk.registry import decode_cluster_id

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_cluster_id_znode_parses_or_is_malformed(data: bytes) -> None:
    try:
        cluster_id = decode_cluster_id(data)
    except MalformedZnode as exc:
        assert exc.path == "/cluster/id"
    else:
        assert isinstance(cluster_id, str) and cluster_id


def test_cluster_id_znode_bounds_depth_and_size() -> None:
    with pytest.raises(MalformedZnode, match="not JSON"):
        decode_cluster_id(b"[" * 4000)  # deeper than the JSON parser goes, within the size bound
    with pytest.raises(MalformedZnode, match="more than 4096"):
        decode_cluster_id(b'{"version":"1","id":"' + b"x" * 5000 + b'"}')
    assert decode_cluster_id(b'{"version":"1","id":"AbC-_0123456789abcdefg"}') == "AbC-_0123456789abcdefg"


config_keys = st.sampled_from(
    ["retention.ms", "retention.bytes", "segment.bytes", "flush.messages", "flush.ms", "cleanup.policy", "x"]
)
config_values = st.none() | st.text(max_size=12) | st.integers(-(2**65), 2**65).map(str)


@given(st.dictionaries(config_keys, config_values, max_size=6))
def test_topic_configs_apply_or_are_invalid(configs: dict[str, str | None]) -> None:
    try:
        config = TopicConfig().with_overrides(configs)
    except InvalidConfig as exc:
        assert exc.code == 40
    else:
        assert config.segment_bytes >= 1024 and config.retention_ms >= -1 and config.flush_messages >= 1


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_a_stored_topic_config_file_never_shortens_retention(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    root = tmp_path_factory.mktemp("cfg")
    defaults = TopicConfig(retention_ms=1000, retention_bytes=1000)
    LogManager(root, defaults=defaults).create_topic("t", 1)
    (root / "logs" / "t-0" / TOPIC_CONFIG_FILE).write_bytes(data)
    config = LogManager(root, defaults=defaults).topic_config("t")
    parsed = None
    try:
        doc = json.loads(data)
        parsed = (
            defaults.with_overrides(doc["config"])
            if all(isinstance(v, str) for v in doc["config"].values())
            else None
        )
    except Exception:
        parsed = None
    if parsed is None:  # unreadable: everything kept
        assert (config.retention_ms, config.retention_bytes) == (-1, -1)
    else:
        assert config == parsed


@given(st.text(max_size=200))
def test_properties_parse_any_text(text: str) -> None:
    props = parse_properties(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_meta_properties_give_an_id_or_a_precise_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    root: Path = tmp_path_factory.mktemp("meta")
    (root / META_FILE).write_bytes(data)
    try:
        cluster_id = read_or_create_cluster_id(root, 0)
    except ConfigError as exc:
        assert str(root / META_FILE) in str(exc)
    else:
        assert cluster_id == parse_properties(data.decode("utf-8"))["cluster.id"]
    assert (root / META_FILE).read_bytes() == data  # an existing file is never rewritten
