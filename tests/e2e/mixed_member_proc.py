"""A kafka-python group member in its own process, for crash tests (kill -9 leaves no LeaveGroup, no commit):
prints `A p,p,...` on assignment, `R` on revocation and `M partition offset` per record, flushed at once.

Usage: python mixed_member_proc.py BOOTSTRAP GROUP TOPIC CLIENT_ID STRATEGY SESSION_MS HEARTBEAT_MS COMMIT_MS
"""

from __future__ import annotations

import sys
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener


class _Report(ConsumerRebalanceListener):  # type: ignore[misc]
    def on_partitions_revoked(self, revoked: Any) -> None:
        print("R", flush=True)

    def on_partitions_lost(self, lost: Any) -> None:
        print("R", flush=True)

    def on_partitions_assigned(self, assigned: Any) -> None:
        print("A " + ",".join(str(tp.partition) for tp in assigned), flush=True)


def main(argv: list[str]) -> None:
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    bootstrap, group, topic, name, strategy, session_ms, heartbeat_ms, commit_ms = argv
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=int(commit_ms),
        session_timeout_ms=int(session_ms),
        heartbeat_interval_ms=int(heartbeat_ms),
        max_poll_interval_ms=20000,
        fetch_max_wait_ms=100,
        reconnect_backoff_max_ms=500,
        partition_assignment_strategy=[
            {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]
        ],
    )
    consumer.subscribe([topic], listener=_Report())
    consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost join: docs/cluster.md)
    while True:
        for records in consumer.poll(timeout_ms=1000).values():
            for r in records:
                print(f"M {r.partition} {r.offset}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
