"""Protocol-independent requests and responses of the group APIs: the contract between wire server and coordinator.

Every request carries the `api_version` it arrived with, because several rules depend on it (MEMBER_ID_REQUIRED
from JoinGroup v4, SkipAssignment from v9, `protocol_name` null vs "" from v7, LeaveGroup batches from v3, ...).
Fields that a given version does not have are given their schema defaults by the wire adapter:

* JoinGroup v0 has no rebalance timeout: pass -1, the coordinator substitutes the session timeout (as Kafka's
  `JoinGroupRequest` does). `group_instance_id` is None before v5, `reason` None before v8.
* LeaveGroup v0-2 (single `member_id`) is expressed as `members=(LeaveGroupMember(member_id, None),)`; for those
  versions the coordinator copies the single member's error into the response's top-level `error_code`.
* OffsetCommit: `generation_id=-1`, `member_id=""` before v1; `retention_time_ms=-1` unless v2-4 set it;
  per-partition `commit_timestamp=-1` unless v1 set it; `committed_leader_epoch=-1` before v6.
* OffsetFetch v8+ (batched groups) is expressed as one `OffsetFetchRequest` per group; `topics=None` means "all
  committed partitions of the group" (v2+).

Responses carry Kafka's error numbers as plain ints (values of `ErrorCode`). Everything is immutable and ordered
(tuples), so a response never depends on dict or set iteration order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""

# ---------------------------------------------------------------------------------------------------- JoinGroup (11)


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    api_version: int
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # -1 (v0) => session timeout
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    reason: str | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None  # None for "no protocol" from v7; "" before (the coordinator normalises)
    leader: str
    skip_assignment: bool
    member_id: str
    members: tuple[JoinGroupMember, ...]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------------------------------- SyncGroup (14)


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    api_version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+; None = not given
    protocol_name: str | None  # v5+; None = not given
    assignments: tuple[tuple[str, bytes], ...]  # (member_id, assignment); only the leader sends any


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------------------------------- Heartbeat (12)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    api_version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: int
    throttle_time_ms: int = 0


# --------------------------------------------------------------------------------------------------- LeaveGroup (13)


@dataclass(frozen=True, slots=True)
class LeaveGroupMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    api_version: int
    group_id: str
    members: tuple[LeaveGroupMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error_code: int
    members: tuple[LeaveGroupMemberResponse, ...]  # v3+; for v0-2 the top-level error_code is the one to send
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------------------------------- OffsetCommit (8)


# A NamedTuple rather than a frozen dataclass, like the offset records it becomes: equally immutable, a third of
# the cost to build, and a 100-partition commit builds one per partition (the wire's fast path, issue 17).
class OffsetCommitRequestPartition(NamedTuple):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""
    commit_timestamp: int = -1  # v1 only; -1 = "now"


@dataclass(frozen=True, slots=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    api_version: int
    group_id: str
    generation_id: int
    member_id: str
    topics: tuple[OffsetCommitRequestTopic, ...]
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-4; -1 = broker default


@dataclass(frozen=True, slots=True)
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: int


@dataclass(frozen=True, slots=True)
class OffsetCommitResponseTopic:
    name: str
    partitions: tuple[OffsetCommitResponsePartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[OffsetCommitResponseTopic, ...]
    throttle_time_ms: int = 0


# -------------------------------------------------------------------------------------------------- OffsetFetch (9)


@dataclass(frozen=True, slots=True)
class OffsetFetchRequestTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    api_version: int
    group_id: str
    topics: tuple[OffsetFetchRequestTopic, ...] | None  # None = every committed partition of the group
    require_stable: bool = False
    member_id: str | None = None  # v9+ (KIP-848 groups only; ignored by the classic coordinator)
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int  # -1 = nothing committed
    committed_leader_epoch: int  # -1 = none
    metadata: str
    error_code: int


@dataclass(frozen=True, slots=True)
class OffsetFetchResponseTopic:
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error_code: int  # top level (v2+); before v2 the adapter copies it into each partition
    topics: tuple[OffsetFetchResponseTopic, ...]
    throttle_time_ms: int = 0


# ----------------------------------------------------------------------------------------------- DescribeGroups (15)


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    api_version: int
    groups: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True, slots=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedGroupMember, ...]
    authorized_operations: int = -(2**31)


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0


# --------------------------------------------------------------------------------------------------- ListGroups (16)


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    api_version: int
    states_filter: tuple[str, ...] = ()  # v4+, case-insensitive; empty = all
    types_filter: tuple[str, ...] = ()  # v5+, case-insensitive; empty = all


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"  # v5+: "classic" or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...]
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------------------------------- DeleteGroups (42)


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    api_version: int
    groups_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletableGroupResult:
    group_id: str
    error_code: int


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...]
    throttle_time_ms: int = 0


GroupRequest = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
)
GroupResponse = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | DescribeGroupsResponse
    | ListGroupsResponse
    | DeleteGroupsResponse
)
