"""The coordinator's errors: Kafka's protocol error codes (the one enum, `zkcoord.errors.ErrorCode`, re-exported
under the name the coordinator has always used) and its invariant-break exceptions."""

from __future__ import annotations

from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.records.errors import MalformedRecord

# Re-exported: the codecs below the coordinator raise MalformedRecord, the enum lives at the root so every layer
# can name a code; coordinator code catches and names both under this module too.
__all__ = ["ErrorCode", "IllegalStateTransition", "MalformedRecord"]


class IllegalStateTransition(ZkcoordError):
    """A group was asked to move between two states the transition table does not connect (a coordinator bug)."""

    def __init__(self, group_id: str, from_state: object, to_state: object) -> None:
        super().__init__(f"group {group_id!r}: illegal state transition {from_state} -> {to_state}")
        self.group_id = group_id
        self.from_state = from_state
        self.to_state = to_state
