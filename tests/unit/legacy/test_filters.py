"""TopicFilter: Kafka's normalisation, full-match semantics, internal topics, Java dialect handling."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.legacy.codecs import ConsumerRegistration, SubscriptionPattern
from zkcoord.legacy.filters import InvalidTopicFilter, TopicFilter, normalise, translate_java_regex

TOPICS = ["a", "ab", "b", "c.1", "__consumer_offsets", "logs-2024", "x"]


def test_normalisation_order() -> None:
    assert normalise("  'a, b ,c'  ") == "a|b|c"
    assert normalise("\"'a.*'\"") == "a.*"
    assert normalise('a "b"') == 'a"b'  # inner quotes stay; only leading/trailing runs go


def test_whitelist_is_full_match() -> None:
    f = TopicFilter.whitelist("a,b")
    assert f.regex == "a|b"
    assert f.matching(TOPICS) == ["a", "b"]  # not "ab": Java String.matches is a full match
    assert TopicFilter.whitelist("a.*").matching(TOPICS) == ["a", "ab"]


def test_blacklist_and_internal_topics() -> None:
    f = TopicFilter.blacklist("a.*")
    assert f.matching(TOPICS) == ["b", "c.1", "logs-2024", "x"]
    assert "__consumer_offsets" in f.matching(TOPICS, exclude_internal_topics=False)
    w = TopicFilter.whitelist("__.*")
    assert w.matching(TOPICS) == []
    assert w.matching(TOPICS, exclude_internal_topics=False) == ["__consumer_offsets"]


def test_java_dialect_translation() -> None:
    assert TopicFilter.whitelist(r"\Qc.1\E").matching(["c.1", "cx1"]) == ["c.1"]
    assert TopicFilter.whitelist(r"(?<n>a)\k<n>").matching(["aa", "ab"]) == ["aa"]
    assert translate_java_regex(r"a\z") == r"a\Z"
    assert TopicFilter.whitelist("[]a]").matching(["]", "a", "b"]) == ["]", "a"]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (r"\p{Alpha}+", r"\p{...}"),
        ("[a-z&&[^e]]", "intersection"),
        ("[a[b]]", "nested"),
        ("[a-z&&b]", "intersection"),
        ("(?P<n>a)", "Python syntax"),
        ("[abc", "unterminated"),
        ("a(", "missing"),
        ("a\\", "trailing backslash"),
    ],
)
def test_invalid_regexes(raw: str, why: str) -> None:
    with pytest.raises(InvalidTopicFilter) as info:
        TopicFilter.whitelist(raw)
    assert "is an invalid regex." in str(info.value)
    assert why in info.value.why
    assert isinstance(info.value, ConfigError)


def test_filter_of_registration() -> None:
    reg = ConsumerRegistration.wildcard("a|b", 2, pattern=SubscriptionPattern.BLACK_LIST, timestamp_ms=1)
    f = TopicFilter.of_registration(ConsumerRegistration.decode("/p", reg.encode()))
    assert f == TopicFilter.blacklist("a,b")
    with pytest.raises(ConfigError):
        TopicFilter.of_registration(ConsumerRegistration.static({"a": 1}, timestamp_ms=1))
    with pytest.raises(ConfigError):
        TopicFilter(SubscriptionPattern.STATIC, "a")


@given(
    st.lists(st.from_regex(r"[a-zA-Z0-9._-]{1,8}", fullmatch=True), max_size=10),
    st.sampled_from(["a.*", "[a-c]+", "x|y.z", "(ab)*", ".*-1", r"\d+"]),
)
def test_whitelist_and_blacklist_partition_the_topics(topics: list[str], regex: str) -> None:
    w = set(TopicFilter.whitelist(regex).matching(topics))
    b = set(TopicFilter.blacklist(regex).matching(topics))
    assert all(TopicFilter.whitelist(regex).is_allowed(t, False) for t in w)
    assert w | b == set(topics) - {"__consumer_offsets"}
    assert not w & b
    assert w == {t for t in topics if re.fullmatch(regex, t)}
