"""A confluent-kafka consumer with `group.protocol=consumer` (KIP-848) in its own process, for crash tests (kill -9
leaves no leave heartbeat and no commit). Prints, flushed at once, with CLOCK_MONOTONIC nanoseconds (one clock for
every process of the machine, so the observer can order events of different members):
`A ns p,p,...` when partitions are added, `R ns p,p,...` when revoked or lost, `M ns partition offset` per record.
A record's offset is stored for the next auto-commit only after its line is out: at-least-once, never ahead.
SIGTERM closes the consumer (a graceful leave, revocation printed) and exits.

Usage: python consumer_protocol_member_proc.py BOOTSTRAP GROUP TOPIC CLIENT_ID [INSTANCE_ID]
(INSTANCE_ID: `group.instance.id`, a static member; its close is a temporary leave, epoch -2)
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer


def _say(kind: str, parts: list[Any]) -> None:
    print(f"{kind} {time.monotonic_ns()} " + ",".join(str(p.partition) for p in parts), flush=True)


def main(argv: list[str]) -> None:
    bootstrap, group, topic, name, *instance = argv
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = Consumer(
        {
            **({"group.instance.id": instance[0]} if instance else {}),
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": 200,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, parts: _say("A", parts),
        on_revoke=lambda c, parts: _say("R", parts),
        on_lost=lambda c, parts: _say("R", parts),
    )
    while not stopping:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        print(f"M {time.monotonic_ns()} {msg.partition()} {msg.offset()}", flush=True)
        consumer.store_offsets(msg)
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1:])
