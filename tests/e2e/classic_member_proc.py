"""A kafka-python consumer (classic protocol, eager range assignor) in its own process, the classic counterpart of
`consumer_protocol_member_proc.py` with the same output: `A ns p,p,...` when partitions are assigned, `R ns p,...`
when revoked (eager: all of them, before every JoinGroup), `M ns partition offset` per record, flushed at once, with
CLOCK_MONOTONIC nanoseconds. Auto-commit runs inside poll(), after the previous poll's records were printed:
at-least-once, never ahead. SIGTERM closes the consumer (revocation printed, LeaveGroup) and exits.

Usage: python classic_member_proc.py BOOTSTRAP GROUP TOPIC CLIENT_ID
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor


def _say(kind: str, parts: Any) -> None:
    print(f"{kind} {time.monotonic_ns()} " + ",".join(str(p.partition) for p in parts), flush=True)


class _Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked: Any) -> None:
        _say("R", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        _say("A", assigned)


def main(argv: list[str]) -> None:
    bootstrap, group, topic, name = argv
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=200,
        session_timeout_ms=6000,
        heartbeat_interval_ms=250,
        fetch_max_wait_ms=100,
        partition_assignment_strategy=[RangePartitionAssignor],
    )
    consumer.subscribe([topic], listener=_Listener())
    consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost join: docs/cluster.md)
    while not stopping:
        for tp, records in consumer.poll(timeout_ms=100).items():
            for r in records:
                print(f"M {time.monotonic_ns()} {tp.partition} {r.offset}", flush=True)
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1:])
