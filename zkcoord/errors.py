"""The one error taxonomy: every zkcoord exception carries a Kafka-style `code` and a `retriable` flag.

Protocol outcomes are returned as error codes (see `zkcoord.group.errors`); exceptions are for invariant
breaks and edge failures. Only the retry policies decide whether to retry, and they read `retriable`.
"""

from __future__ import annotations


class ZkcoordError(Exception):
    """Base class. `code` is Kafka's error number where one applies, -1 (UNKNOWN_SERVER_ERROR) otherwise."""

    code: int = -1
    retriable: bool = False


class ConfigError(ZkcoordError, ValueError):
    """A configuration value is missing, of the wrong type, or out of range."""


class MalformedZnode(ZkcoordError, ValueError):
    """A znode's data does not parse; names the znode and leaves it untouched."""

    def __init__(self, path: str, reason: str, data: bytes | None = None) -> None:
        shown = "" if data is None else f" (data {data[:80]!r}{'...' if len(data) > 80 else ''})"
        super().__init__(f"malformed znode {path}: {reason}{shown}")
        self.path = path
        self.reason = reason
        self.data = data
