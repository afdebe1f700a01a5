"""The records layer's one exception: a `__consumer_offsets` key or value that does not decode.

It lives here, below `zkcoord.group`, so the codecs import nothing from the coordinator built on them;
`zkcoord.group.errors` re-exports the same class, so code catching it under either name catches every raise.
"""

from __future__ import annotations

from zkcoord.errors import ErrorCode, ZkcoordError


class MalformedRecord(ZkcoordError, ValueError):
    """A `__consumer_offsets` key or value does not decode; says which part and why."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, what: str, reason: str, data: bytes | None = None) -> None:
        shown = "" if data is None else f" (bytes {data[:64].hex()}{'...' if len(data) > 64 else ''})"
        super().__init__(f"malformed {what}: {reason}{shown}")
        self.what = what
        self.reason = reason
        self.data = data
