"""Soak: a standalone `zkcoord serve` under the commit and produce load of a week of a 1,000-member deployment,
scaled in time; group-records size, data size, RSS and restart time (kill -9 -> first OffsetFetch answer) sampled
along the way. Ends with one RESULT line. Run: python -m benchmarks.bench_soak [--rounds 1008] [--samples 6]
(or `bash scripts/bench.sh bench_soak`)

Model: 100 consumer groups x 10 members (1,000 members), each group reading all 100 partitions of one topic, so
the live set is 100 x 100 = 10,000 committed offsets (not scaled). Each member owns 10 partitions and commits
them; one round is one commit of every member (a group's 10 members' commits sent as one 100-partition
OffsetCommit: the same records) and one 1 KiB message produced to each partition. Scaled in time: a round
stands for 10 minutes of the week (1,008 rounds), where a real member would commit every 5 s (auto.commit.interval
.ms), so the run writes 1/120 of the week's commit records (10M instead of 1.2G) at the node's full rate; the
live set, the key count and the compaction thresholds are the real ones. Data retention is by size
(log.retention.bytes 256 KiB a partition, 64 KiB segments, checked each second), since time retention cannot be
scaled with a round whose wall time varies with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from benchmarks import loadgen as lg
from benchmarks.bench_load import cpu_s, rss_mib
from benchmarks.report import write_section
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.server import kafka_protocol as kp

TOPIC = "soak"
GROUPS = 100
PARTITIONS = 100
FLAGS = (
    *FAST_GROUP_FLAGS,
    f"--num.partitions={PARTITIONS}",
    "--log.segment.bytes=65536",
    "--log.retention.bytes=262144",
    "--log.retention.check.interval.ms=1000",
)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


async def commit_round(port: int, round_: int) -> None:
    conn = await lg.connect("127.0.0.1", port)
    try:
        frames = [
            lg.commit_frame(lg.Member(f"soak-{g:03d}", conn), TOPIC, [(p, round_) for p in range(PARTITIONS)])
            for g in range(GROUPS)
        ]
        result = await lg.stream(conn, frames, lg.commit_check(), 32, GROUPS, time.perf_counter() + 120)
        if result.errors:
            raise lg.LoadError(result.first_error)
    finally:
        conn.close()


async def fetch_until_answered(port: int, group: str, deadline: float) -> list[int]:
    """OffsetFetch until the answer carries offsets (the node answers COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
    OF: Any = kp._CLASSES[kp.OFFSET_FETCH][0]
    request = lg.frame(
        kp.OFFSET_FETCH,
        1,
        group_id=group,
        topics=[OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(PARTITIONS)))],
    )
    while time.monotonic() < deadline:
        try:
            conn = await lg.connect("127.0.0.1", port)
        except OSError:
            continue
        try:
            while time.monotonic() < deadline:
                resp = lg.decode(kp.OFFSET_FETCH, 1, await conn.request(request))
                parts = resp.topics[0].partitions if resp.topics else []
                if parts and all(p.error_code == 0 for p in parts):
                    return [p.committed_offset for p in parts]
        finally:
            conn.close()
    raise lg.LoadError(f"no answer with offsets for {group} before the deadline")


def restart(node: NodeProcess, round_: int) -> tuple[float, float]:
    """kill -9, restart; (seconds to the first answer with the last round's offsets, the node's CPU until then)."""
    killed = time.perf_counter()
    node.kill9()
    node.start(timeout=120)
    got = asyncio.run(fetch_until_answered(node.port, f"soak-{GROUPS - 1:03d}", time.monotonic() + 120))
    answered = time.perf_counter() - killed
    if got != [round_] * PARTITIONS:
        raise lg.LoadError(f"offsets {got[:5]}... after the restart, expected {round_}")
    return answered, cpu_s(node)


def run(rounds: int, samples: int) -> list[dict[str, float]]:
    every = max(1, rounds // samples)
    rows: list[dict[str, float]] = []
    payload = os.urandom(1024)
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        data = Path(tmp) / "data"
        node = NodeProcess(data, FLAGS)
        node.start()
        producer: KafkaProducer | None = None
        started = time.perf_counter()
        try:
            for r in range(1, rounds + 1):
                if producer is None:
                    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1, linger_ms=5)
                for p in range(PARTITIONS):
                    producer.send(TOPIC, payload, partition=p)
                producer.flush(30)
                asyncio.run(commit_round(node.port, r))
                if r % every == 0 or r == rounds:
                    producer.close(5)
                    producer = None
                    row = {
                        "round": r,
                        "elapsed_s": time.perf_counter() - started,
                        "records_mib": dir_bytes(data / "group-records") / 2**20,
                        "data_mib": dir_bytes(data / "logs") / 2**20,
                        "rss_mib": rss_mib(node),
                    }
                    row["restart_s"], row["cpu_s"] = restart(node, r)
                    row["rss_after_mib"] = rss_mib(node)
                    print(
                        f"round {r}/{rounds} ({row['elapsed_s']:.0f} s): group-records {row['records_mib']:.2f} "
                        f"MiB, data {row['data_mib']:.1f} MiB, RSS {row['rss_mib']:.0f} MiB; kill -9 -> first answer "
                        f"{row['restart_s']:.2f} s (node CPU {row['cpu_s']:.2f} s), RSS after {row['rss_after_mib']:.0f}"
                        " MiB",
                        flush=True,
                    )
                    rows.append(row)
        finally:
            if producer is not None:
                producer.close(5)
            node.stop()
            node.kill9()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rounds", type=int, default=1008, help="rounds of the model (1008: a week of 10 minutes)"
    )
    parser.add_argument("--samples", type=int, default=6, help="sample points (each restarts the node)")
    parser.add_argument("--no-report", action="store_true", help="print, do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    rows = run(args.rounds, args.samples)
    hours = 24 * 7 * args.rounds / 1008
    table = [
        "| round (model time) | wall s | group-records (MiB) | data (MiB) | RSS (MiB) | kill -9 → first answer (s) "
        "| node CPU (s) | RSS after restart (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['round']:.0f} ({r['round'] * 10 / 60 / 24:.1f} d) | {r['elapsed_s']:.0f} | {r['records_mib']:.2f} | "
            f"{r['data_mib']:.1f} | {r['rss_mib']:.0f} | {r['restart_s']:.2f} | {r['cpu_s']:.2f} | "
            f"{r['rss_after_mib']:.0f} |"
            for r in rows
        ),
    ]
    first, last = rows[0], rows[-1]
    written_records = args.rounds * GROUPS * PARTITIONS
    body = "\n".join(
        [
            (__doc__ or "").split("\n\n", 1)[1].strip(),
            "",
            f"{args.rounds} rounds ({hours:.0f} h of the model), {written_records:,} offset records and "
            f"{args.rounds * PARTITIONS:,} messages written; sampled every {max(1, args.rounds // args.samples)} "
            "rounds (each sample kills the node -9 and restarts it):",
            "",
            *table,
        ]
    )
    result = (
        f"RESULT soak: {args.rounds} rounds; group-records {first['records_mib']:.2f} -> {last['records_mib']:.2f} MiB, "
        f"data {first['data_mib']:.1f} -> {last['data_mib']:.1f} MiB, RSS {first['rss_mib']:.0f} -> "
        f"{last['rss_mib']:.0f} MiB, restart {first['restart_s']:.2f} -> {last['restart_s']:.2f} s (target at the "
        f"end <= 2 s: {'met' if last['restart_s'] <= 2.0 else 'NOT met'}); load average now {os.getloadavg()[0]:.1f}"
    )
    if not args.no_report:
        write_section("soak: a week of 1,000 members", body)
    print(body)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
