"""Wildcard topic filters of the old consumer (`TopicFilter.scala`): Kafka's regex normalisation, Java
full-match semantics, and `exclude.internal.topics`, with Java-only regex syntax translated or refused.

Normalisation, in Kafka's order: trim; `,` -> `|`; remove every space; strip a leading run and a trailing run
of `"`/`'` ("property files may bring quotes"). The normalised text is what a registration stores.
Dialect: `\\Q...\\E` quoting, `(?<name>...)`, `\\k<name>` and `\\z` are translated to Python; `\\p{..}`/`\\P{..}`
classes, nested classes and class intersection (`&&`) are refused with `InvalidTopicFilter` rather than
silently matching something else. Python-only syntax (`(?P<..>)`) is refused because Java refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from zkcoord.errors import ConfigError
from zkcoord.legacy.codecs import ConsumerRegistration, SubscriptionPattern
from zkcoord.legacy.ids import java_sorted
from zkcoord.legacy.paths import INTERNAL_TOPICS


class InvalidTopicFilter(ConfigError):
    """`<regex> is an invalid regex.` (Kafka's words) plus why."""

    def __init__(self, regex: str, why: str) -> None:
        super().__init__(f"{regex} is an invalid regex. ({why})")
        self.regex = regex
        self.why = why


def normalise(raw: str) -> str:
    """Kafka's TopicFilter normalisation of a user-supplied regex."""
    text = raw.strip().replace(",", "|").replace(" ", "")
    return text.lstrip("\"'").rstrip("\"'")


def translate_java_regex(regex: str) -> str:
    """A Java regex as an equivalent Python regex, or `InvalidTopicFilter` when there is none we trust."""
    out: list[str] = []
    i, n = 0, len(regex)
    in_class = False
    while i < n:
        ch = regex[i]
        if ch == "\\":
            if i + 1 >= n:
                raise InvalidTopicFilter(regex, "trailing backslash")
            nxt = regex[i + 1]
            if nxt == "Q" and not in_class:
                end = regex.find("\\E", i + 2)
                literal = regex[i + 2 :] if end < 0 else regex[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt in "pP":
                raise InvalidTopicFilter(regex, f"Java character class \\{nxt}{{...}} is not supported")
            if nxt == "z":
                out.append("\\Z")
            elif nxt == "k" and regex.startswith("<", i + 2):
                close = regex.find(">", i + 3)
                if close < 0:
                    raise InvalidTopicFilter(regex, "unterminated \\k<name>")
                out.append(f"(?P={regex[i + 3 : close]})")
                i = close + 1
                continue
            else:
                out.append(regex[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "[":
                raise InvalidTopicFilter(regex, "nested character classes (Java union) are not supported")
            if regex.startswith("&&", i):
                raise InvalidTopicFilter(regex, "character class intersection '&&' is not supported")
            if ch == "]":
                in_class = False
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            # a ']' right after '[' or '[^' is a literal in both dialects
            if regex.startswith("^", i):
                out.append("^")
                i += 1
            if regex.startswith("]", i):
                out.append("\\]")
                i += 1
            continue
        if regex.startswith("(?P", i):
            raise InvalidTopicFilter(regex, "(?P...) is Python syntax, not Java")
        if regex.startswith("(?<", i) and i + 3 < n and regex[i + 3].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(ch)
        i += 1
    if in_class:
        raise InvalidTopicFilter(regex, "unterminated character class")
    return "".join(out)


@lru_cache(maxsize=256)
def _compile(regex: str) -> re.Pattern[str]:
    translated = translate_java_regex(regex)
    try:
        return re.compile(translated)
    except re.error as exc:
        raise InvalidTopicFilter(regex, str(exc)) from None


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """A whitelist or blacklist over topic names; `regex` is already normalised (as stored in ZooKeeper)."""

    pattern: SubscriptionPattern
    regex: str

    def __post_init__(self) -> None:
        if self.pattern is SubscriptionPattern.STATIC:
            raise ConfigError("a topic filter is a white_list or black_list, not static")
        _compile(self.regex)

    @classmethod
    def whitelist(cls, raw: str) -> TopicFilter:
        return cls(SubscriptionPattern.WHITE_LIST, normalise(raw))

    @classmethod
    def blacklist(cls, raw: str) -> TopicFilter:
        return cls(SubscriptionPattern.BLACK_LIST, normalise(raw))

    @classmethod
    def of_registration(cls, registration: ConsumerRegistration) -> TopicFilter:
        """The filter a wildcard member registered (raises ConfigError for a static registration)."""
        if not registration.is_wildcard:
            raise ConfigError("a static registration has no topic filter")
        ((regex, _streams),) = registration.subscription
        return cls(registration.pattern, regex)

    def allows(self, topic: str, *, exclude_internal_topics: bool = True) -> bool:
        """`isTopicAllowed`: Java full match for a whitelist, no match for a blacklist; internal topics are
        refused when `exclude_internal_topics` (the default, as `exclude.internal.topics`)."""
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        matched = _compile(self.regex).fullmatch(topic) is not None
        return matched if self.pattern is SubscriptionPattern.WHITE_LIST else not matched

    def is_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        """Kafka's `isTopicAllowed(topic, excludeInternalTopics)`; same as `allows`."""
        return self.allows(topic, exclude_internal_topics=exclude_internal_topics)

    def matching(self, topics: Iterable[str], *, exclude_internal_topics: bool = True) -> list[str]:
        """The allowed topics among `topics`, in Java String order."""
        return java_sorted(
            {t for t in topics if self.allows(t, exclude_internal_topics=exclude_internal_topics)}
        )
