"""Stored security data takes any bytes: ACL znode data and SCRAM credential strings either parse or raise a
ConfigError naming what is wrong, bounded in size and nesting depth (fuzzed: bytes, depth, size)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.security.acl import Acl, Operation, Permission, encode_acls, parse_acls
from zkcoord.security.scram import ScramCredential
from zkcoord.security.stored_json import (
    MAX_STORED_JSON_BYTES,
    MAX_STORED_JSON_DEPTH,
    load_stored_json,
    nesting_depth,
)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            b"[" * 5000,
            "brackets do not pair up",
        ),  # before: RecursionError out of json, crashing serve's start
        (b"[" * 5000 + b"]" * 5000, "nested deeper than 16"),
        (b'{"acls":' + b"[" * 17 + b"]" * 17 + b"}", "nested deeper than 16"),
        (b'{"acls":[}', "not JSON: brackets do not pair up"),
        (b"[" * 5000 + b"{]", "not JSON: brackets do not pair up"),
        (b'{"acls": "' + b"x" * MAX_STORED_JSON_BYTES + b'"}', f"at most {MAX_STORED_JSON_BYTES}"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"acls": [1e999999, 9' + b"9" * 5000 + b"]}", "not JSON"),  # an int beyond Python's digit limit
        (b"{", "not JSON: brackets do not pair up"),
        (b'{"acls":[[[]]]}', "ACL entry 0 is a JSON list, not an object"),
        (
            b'{"acls":[{"principal":' + b"[" * 10 + b"]" * 10 + b"}]}",
            "principal a JSON list is not TYPE:NAME",
        ),
    ],
)
def test_malformed_acl_data_is_a_config_error(data: bytes, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_acls(data)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    acl = Acl('User:CN=[a]{b}\\"[[[[', Permission.ALLOW, Operation.READ)
    deep_looking = encode_acls([acl] * 1)
    assert parse_acls(deep_looking) == (acl,)
    assert nesting_depth(b'["[[[[[[[[[[[[[[[[[[[[", {"a": "\\"]]]"}]', MAX_STORED_JSON_DEPTH) == 2


def test_a_large_valid_acl_set_parses() -> None:
    acls = [Acl(f"User:u{i}", Permission.ALLOW, Operation.READ) for i in range(5000)]
    assert len(parse_acls(encode_acls(acls))) == 5000


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab[]{}"\\,:', max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=300)
@given(_json)
def test_depth_of_any_json_value_is_its_nesting(value: Any) -> None:
    data = json.dumps(value).encode()
    assert nesting_depth(data, 100) == _depth(value)  # (json.dumps escapes the quotes inside strings)
    if _depth(value) <= MAX_STORED_JSON_DEPTH:
        assert load_stored_json(data) == value


_PIECES = [b"[", b"]", b"{", b"}", b'"', b"\\", b",", b":", b"1", b'"acls"', b"a"]


@settings(max_examples=500)
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.lists(st.sampled_from(_PIECES), max_size=400).map(b"".join),
        st.integers(0, 20_000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(0, 20_000).map(lambda n: b'{"acls":[' + b'{"a":' * n + b"1" + b"}" * n + b"]}"),
        _json.map(lambda v: json.dumps({"version": 1, "acls": v}).encode()),
    )
)
def test_any_acl_znode_bytes_parse_or_raise_config_error(data: bytes) -> None:
    try:
        acls = parse_acls(data)
    except ConfigError:
        return
    assert all(isinstance(a, Acl) for a in acls)


@settings(max_examples=300)
@given(
    st.text(max_size=300)
    | st.text(alphabet="salt=,stored_key=server_keyiterations0123456789AB+/", max_size=200)
)
def test_any_credential_string_parses_or_raises_config_error(text: str) -> None:
    with contextlib.suppress(ConfigError):
        ScramCredential.from_kafka(text)
