"""Subscribed topic regular expressions of consumer groups (KIP-848 SubscribedTopicRegex): their validation and
their resolution against the topics that exist.

Kafka compiles them with RE2J and resolves them with a full match (`Pattern.matcher(topic).matches()`). zkcoord uses
RE2 (google-re2), the engine RE2J ports: the same syntax (no backreferences, no lookaround, no possessive
quantifiers, repetition counts up to 1000) and matching in time linear in the topic name, so no expression a
client sends can make resolution backtrack exponentially. Python's `re` is not used: it accepts more than Kafka
does and backtracks. An expression is bounded in length before it is compiled, and compiled expressions are kept
in a bounded cache. A refusal names the reason as RE2J does (its parser's descriptions, which Kafka's message
carries), translated from RE2's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import re2

MAX_REGEX_CHARS = 1024  # longer ones are refused before compiling: a topic filter, not a program
_MAX_MEM = (
    1 << 20
)  # RE2's memory budget per expression (program and DFA cache; too large a program fails to compile)


# RE2's error texts -> RE2J's (PatternSyntaxException.getDescription(), Go's regexp/syntax texts); the others agree.
_RE2J_TEXT = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


# What Python or PCRE users reach for and RE2 (like RE2J) does not have: named after Kafka's message, as a hint.
_UNSUPPORTED = (
    (re.compile(r"\\[1-9]"), "backreferences"),
    (re.compile(r"\(\?<?[=!]"), "lookahead and lookbehind"),
    (re.compile(r"\(\?>|[*+?}]\+"), "atomic groups and possessive quantifiers"),
)


class InvalidRegex(ValueError):
    """The expression is not one Kafka (RE2J) accepts, or is too long: the message says why."""


@lru_cache(maxsize=64)  # with _MAX_MEM: at most 64 MB of compiled expressions
def _compile(pattern: str) -> re2._Regexp[str]:
    options = re2.Options()
    options.log_errors = False  # RE2 logs each parse error to stderr itself; the caller reports it
    options.max_mem = _MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "unexpected error"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        code = str(detail).split(": ", 1)[0]  # RE2: "<code text>: <the offending part>"
        raise InvalidRegex(_RE2J_TEXT.get(code, code)) from None


def check(pattern: str) -> str | None:
    """None when `pattern` is valid; else Kafka's INVALID_REGULAR_EXPRESSION message for it."""
    if len(pattern) > MAX_REGEX_CHARS:
        return f"SubscribedTopicRegex is {len(pattern)} characters long: zkcoord accepts at most {MAX_REGEX_CHARS}."
    try:
        _compile(pattern)
    except InvalidRegex as exc:
        hints = [what for found, what in _UNSUPPORTED if found.search(pattern)]
        hint = f" Not supported (RE2 syntax, as Kafka's RE2J): {', '.join(hints)}." if hints else ""
        return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}.{hint}"
    return None


def resolve(pattern: str, topic_names: Iterable[str]) -> tuple[str, ...]:
    """The topics whose whole name matches `pattern`, sorted. The caller checked the pattern (`check`)."""
    compiled = _compile(pattern)
    return tuple(sorted(name for name in topic_names if compiled.fullmatch(name) is not None))
