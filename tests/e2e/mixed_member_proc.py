"""A kafka-python group member in its own process, for crash tests (kill -9 leaves no LeaveGroup, no commit):
prints `A p,p,...` when it holds partitions after a rebalance callback, `R` when it holds none, and
`M partition offset` per record, flushed at once. The member is the test kit's, as in the tests' own process.

Usage: python mixed_member_proc.py BOOTSTRAP GROUP TOPIC CLIENT_ID STRATEGY SESSION_MS HEARTBEAT_MS COMMIT_MS
"""

from __future__ import annotations

import sys

from zkcoord.testing.members import KafkaPythonMember


def report(_name: str, held: frozenset[int]) -> None:
    print("A " + ",".join(str(p) for p in sorted(held)) if held else "R", flush=True)


def main(argv: list[str]) -> None:
    bootstrap, group, topic, name, strategy, session_ms, heartbeat_ms, commit_ms = argv
    member = KafkaPythonMember(
        bootstrap,
        group,
        topic,
        name,
        assignor=strategy,
        session_timeout_ms=int(session_ms),
        heartbeat_interval_ms=int(heartbeat_ms),
        auto_commit_interval_ms=int(commit_ms),
        config={"max_poll_interval_ms": 20000, "reconnect_backoff_max_ms": 500},
        sink=lambda p, o: print(f"M {p} {o}", flush=True),
        on_change=report,
        poll_timeout_s=1.0,
    )
    while True:
        member.poll()


if __name__ == "__main__":
    main(sys.argv[1:])
