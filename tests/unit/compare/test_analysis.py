"""Pure trace analysis (migration.compare.analysis): which member rows enter a trace, and how a member that never
reported its release is closed."""

from __future__ import annotations

from typing import Any

from migration.compare.analysis import member_trace_rows


def row(ts: int, kind: str, partition: int | None = None) -> dict[str, Any]:
    return {"ts_ms": ts, "kind": kind, "member": "m0", "topic": "t" if partition is not None else None,
            "partition": partition, "offset": None, "generation": 1, "detail": None}  # fmt: skip


def test_only_trace_kinds_enter_and_what_is_still_owned_ends_when_the_member_stopped() -> None:
    rows = [row(1, "started"), row(2, "own_start", 0), row(2, "own_start", 1), row(3, "joined"),
            row(4, "own_end", 0), row(5, "consume", 1)]  # fmt: skip
    out = member_trace_rows("m0", rows, end_ms=9, reason="crash")
    assert [r["kind"] for r in out] == ["own_start", "own_start", "own_end", "consume", "own_end"]
    assert out[-1] == {"ts_ms": 9, "kind": "own_end", "member": "m0", "topic": "t", "partition": 1,
                       "offset": None, "generation": None, "detail": {"reason": "crash"}}  # fmt: skip


def test_a_member_that_released_everything_gets_no_closing_row() -> None:
    rows = [row(2, "own_start", 0), row(4, "own_end", 0)]
    assert member_trace_rows("m0", rows, end_ms=9, reason="leave") == rows
