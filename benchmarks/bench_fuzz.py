"""Benchmark: a bounded long fuzz run against `zkcoord serve` — at least 1,000,000 frames of every API and version.

A `zkcoord serve` subprocess is sent windows of pipelined frames on fresh connections, several connections at
once: valid-but-extreme requests of every accepted (api, version) from `zkcoord.testing.wire_fuzz`, and in most
windows one hostile mutation of one of them. Each window's connection is half-closed after its last frame, so a
frame whose size lies ends at EOF. Checked throughout: every answer carries a correlation id that was sent, and
no window goes silent (30 s without an answer or a close); checked at the end: the server is alive, the
protected topic's records and high watermark and the protected group's committed offset are unchanged.
Reported: frames/s, answers and closes, server CPU and peak RSS, and how many log lines the server wrote.

Run: `python -m benchmarks.bench_fuzz [--frames N] [--quick] [--no-write]` or `bash scripts/bench.sh fuzz`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_wire import HOST, CpuMeter, Server
from benchmarks.report import write_section
from zkcoord.records.batch import build_batch
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing import wire_fuzz as wf

WINDOW = 64
CONNECTIONS = 4
POOL_PER_VERSION = 120
SILENCE_S = 30.0
# What the early closes were when this was written (6,000 requests replayed in-process with tracebacks on):
# valid requests whose handler fails where the response has no top-level error code, so the connection is
# closed with a log line instead of answered. Both are outside the wire layer.
NOTE = """\
Early closes are valid requests whose handler fails where the response has no top-level error code to carry
UNKNOWN_SERVER_ERROR, so the connection is closed with a log line (never left silent). In a 6,000-request
in-process replay with tracebacks the only two causes were OffsetFetch v8 with `groups=[]` (IndexError in
`kafka_protocol.group_response`) and OffsetCommit v2-4 with `retention_time_ms` 2^63-1 (the expiry overflows
when stored); both are open bugs in the group adapter and store, not in the wire layer."""
PROTECTED_OFFSET = 424242


@dataclass
class Tally:
    sent: int = 0
    processed: int = 0  # answered frames, plus the one frame each early close was a reaction to
    answers: int = 0
    closes_early: int = 0
    mutated: int = 0
    windows: int = 0
    silent_windows: int = 0
    foreign_answers: int = 0
    errors: list[str] = field(default_factory=list)


async def _roundtrip(port: int, frames: list[bytes], answers_wanted: int | None = None) -> list[Any]:
    """One connection: send the frames, read `answers_wanted` answers (all frames when None), then half-close and
    read until the server closes (a trailing mutated frame whose size lies ends at that EOF). The answers as
    (correlation id, body); raises TimeoutError after SILENCE_S without an answer or a close."""
    want = len(frames) if answers_wanted is None else answers_wanted
    reader, writer = await asyncio.open_connection(HOST, port)
    got: list[Any] = []
    try:
        writer.write(b"".join(frames))
        eof_sent = False
        while True:
            if len(got) >= want and not eof_sent:
                writer.write_eof()
                eof_sent = True
            try:
                head = await asyncio.wait_for(reader.readexactly(4), SILENCE_S)
                body = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), SILENCE_S)
            except asyncio.IncompleteReadError:
                return got
            got.append((struct.unpack_from(">i", body, 0)[0], body))
    finally:
        writer.close()


def _pool(rng: random.Random) -> list[tuple[bytes, bool]]:
    """(framed request, expects an answer) for every accepted (api, version); correlation ids rewritten later."""
    out = []
    for key, version in wf.accepted_versions():
        for _ in range(POOL_PER_VERSION):
            pin = {"max_wait_ms": rng.choice((0, 5))} if key == kp.FETCH else {}
            frame, body = wf.random_request(rng, key, version, 0, **pin)
            out.append((frame, not (key == kp.PRODUCE and body.acks == 0)))
    return out


def _with_correlation(frame: bytes, corr: int) -> bytes:
    return frame[:8] + struct.pack(">i", corr) + frame[12:]


async def _worker(port: int, pool: list[tuple[bytes, bool]], rng: random.Random, goal: int, t: Tally) -> None:
    while t.processed < goal:
        frames: list[bytes] = []
        expects: dict[int, bool] = {}
        base = rng.randrange(1, 2**30)
        for i in range(WINDOW - 1):
            frame, answered = pool[rng.randrange(len(pool))]
            frames.append(_with_correlation(frame, base + i))
            expects[base + i] = answered
        if rng.random() < 0.8:
            bad = wf.mutate(rng, pool[rng.randrange(len(pool))][0])
            frames.append(bad)
            t.mutated += 1
            if len(bad) >= 12:
                expects.setdefault(struct.unpack_from(">i", bad, 8)[0], True)
        t.sent += len(frames)
        t.windows += 1
        wanted = sum(1 for i in range(WINDOW - 1) if expects[base + i])
        try:
            got = await _roundtrip(port, frames, wanted)
        except TimeoutError:
            t.silent_windows += 1
            t.errors.append(f"window at correlation {base}: no answer and no close in {SILENCE_S:.0f} s")
            continue
        t.answers += len(got)
        t.foreign_answers += sum(1 for corr, _ in got if corr not in expects)
        answered_valid = sum(1 for corr, _ in got if base <= corr < base + WINDOW - 1)
        if answered_valid < wanted:
            t.closes_early += 1
            t.processed += len(got) + 1
        else:
            t.processed += len(frames)


async def _protected_state(port: int) -> tuple[int, bytes, int]:
    """(high watermark, records bytes) of the protected topic and the protected group's committed offset."""
    F = kp._CLASSES[kp.FETCH][0]
    fetch = kp.encode_request(
        kp.FETCH,
        4,
        1,
        "bench",
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[
            F.FetchTopic(
                topic=wf.PROTECTED_TOPIC,
                partitions=[
                    F.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    OF = kp._CLASSES[kp.OFFSET_FETCH][0]
    offsets = kp.encode_request(
        kp.OFFSET_FETCH,
        1,
        2,
        "bench",
        group_id=wf.PROTECTED_GROUP,
        topics=[OF.OffsetFetchRequestTopic(name=wf.PROTECTED_TOPIC, partition_indexes=[0])],
    )
    (c1, b1), (c2, b2) = await _roundtrip(port, [fetch, offsets], 2)
    assert (c1, c2) == (1, 2)
    part = kp.decode_response(kp.FETCH, 4, b1)[1].responses[0].partitions[0]
    committed = kp.decode_response(kp.OFFSET_FETCH, 1, b2)[1].topics[0].partitions[0].committed_offset
    return part.high_watermark, bytes(part.records or b""), committed


async def _seed(port: int) -> None:
    C = kp._CLASSES[kp.CREATE_TOPICS][0]
    create = kp.encode_request(
        kp.CREATE_TOPICS,
        4,
        1,
        "bench",
        topics=[
            C.CreatableTopic(
                name=wf.PROTECTED_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=1000,
        validate_only=False,
    )
    P = kp._CLASSES[kp.PRODUCE][0]
    data = P.TopicProduceData.PartitionProduceData(
        index=0, records=build_batch([(b"k", b"keep")] * 3, base_timestamp=int(time.time() * 1000))
    )
    produce = kp.encode_request(
        kp.PRODUCE,
        7,
        2,
        "bench",
        transactional_id=None,
        acks=1,
        timeout_ms=1000,
        topic_data=[P.TopicProduceData(name=wf.PROTECTED_TOPIC, partition_data=[data])],
    )
    OC = kp._CLASSES[kp.OFFSET_COMMIT][0]
    commit = kp.encode_request(
        kp.OFFSET_COMMIT,
        2,
        3,
        "bench",
        group_id=wf.PROTECTED_GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[
            OC.OffsetCommitRequestTopic(
                name=wf.PROTECTED_TOPIC,
                partitions=[
                    OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=PROTECTED_OFFSET, committed_metadata=""
                    )
                ],
            )
        ],
    )
    got = await _roundtrip(port, [create, produce, commit], 3)
    assert [c for c, _ in got] == [1, 2, 3], got


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(goal: int, seed: int, data_dir: Path) -> tuple[Tally, dict[str, Any]]:
    server = Server(data_dir, None, ("--group.initial.rebalance.delay.ms=0",))
    try:
        port = server.port
        await _seed(port)
        before = await _protected_state(port)
        rng = random.Random(seed)
        t0 = time.perf_counter()
        pool = _pool(rng)
        pool_s = time.perf_counter() - t0
        print(
            f"  pool: {len(pool):,} requests over {len(wf.accepted_versions())} (api, version) in {pool_s:.1f} s",
            flush=True,
        )
        tally = Tally()
        meter = CpuMeter(server.proc.pid)
        t0 = time.perf_counter()
        workers = [
            _worker(port, pool, random.Random(rng.getrandbits(64)), goal, tally) for _ in range(CONNECTIONS)
        ]
        await asyncio.gather(*workers)
        wall = time.perf_counter() - t0
        server_cores, cpu_note = meter.read()
        after = await _protected_state(port)
        facts = {
            "wall_s": wall,
            "cpu_note": cpu_note,
            "server_cores": server_cores,
            "peak_rss_mib": _peak_rss_mib(server.proc.pid),
            "unchanged": before == after,
            "protected": before[0],
            "load": os.getloadavg(),
            "alive": server.proc.poll() is None,
        }
        return tally, facts
    finally:
        server.stop()
        facts_lines = len(server.output)
        if "facts" in locals():
            facts["log_lines"] = facts_lines


def _report(tally: Tally, facts: dict[str, Any], goal: int) -> str:
    la = facts["load"]
    rows = [
        ("frames sent", f"{tally.sent:,}", f"{tally.windows:,} connections of {WINDOW} pipelined frames"),
        ("frames processed", f"{tally.processed:,}", "answered, or the frame an early close reacted to"),
        (
            "hostile mutations",
            f"{tally.mutated:,}",
            "flipped bytes, cuts, lying lengths, huge counts, bad versions",
        ),
        ("answers", f"{tally.answers:,}", f"{tally.foreign_answers} with a correlation id never sent"),
        ("connections closed before every valid frame was answered", f"{tally.closes_early:,}", ""),
        ("silent windows (no answer, no close in 30 s)", f"{tally.silent_windows}", "must be 0"),
        ("frames/s", f"{tally.processed / facts['wall_s']:,.0f}", facts["cpu_note"]),
        ("server peak RSS", f"{facts['peak_rss_mib']:.0f} MiB", ""),
        ("server log lines for the whole run", f"{facts.get('log_lines', 0):,}", "rate-limited per kind"),
        ("protected topic and group offset unchanged", "yes" if facts["unchanged"] else "NO", ""),
        ("server alive at the end", "yes" if facts["alive"] else "NO", ""),
        (
            "load average (1/5/15 min) at the end",
            f"{la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f}",
            "nothing else ran",
        ),
    ]
    table = "| what | value | note |\n|---|---:|---|\n" + "\n".join(
        f"| {a} | {b} | {c} |" for a, b, c in rows
    )
    return (
        f"`python -m benchmarks.bench_fuzz` with a goal of {goal:,} frames, {CONNECTIONS} concurrent connections,"
        f" every one of the {len(wf.accepted_versions())} accepted (api, version) pairs. frames/s"
        " follows the CPU share the server gets: anything else running on the cores lowers it (load average"
        " below).\n\n" + table + "\n\n" + NOTE
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="20,000 frames, nothing written")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    goal = 20_000 if args.quick else args.frames
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as tmp:
        tally, facts = asyncio.run(run(goal, args.seed, Path(tmp)))
    body = _report(tally, facts, goal)
    print(body)
    ok = tally.silent_windows == 0 and tally.foreign_answers == 0 and facts["unchanged"] and facts["alive"]
    if not (args.quick or args.no_write):
        write_section("fuzz", body)
    for err in tally.errors[:10]:
        print("  !", err, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
