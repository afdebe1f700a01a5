"""Benchmark: `zkcoord proxy` in front of a real broker against the same clients straight to that broker.

The broker is Tansu (memory storage, registered in a local ZooKeeper as a ZooKeeper-era broker, as the tests do);
the proxy is a `zkcoord proxy` process. The same confluent-kafka (librdkafka) clients, one run, alternating
targets: produce throughput (records/s, 100-byte values, acks=1), fetch throughput (a consumer reading them all
back by assignment, with librdkafka's 1 MiB and with 16 MiB per partition per Fetch), then latency: a paced
producer and a consumer, each in its own process, whose per-record cost is small (about 2,000 records a second
carry a timestamp and get a delivery callback; the consumer looks at one byte of the others), at half load (half
the rate this set-up sustains straight to the broker, measured at the start) and at 10,000 records/s; a run whose
producer fell more than 5% short of its rate is not reported. Latency set-ups: pinned (the broker and both clients
on one CPU, the proxy on another, as on its own host) and unpinned. Per sampled record: produce p50/p99
(produce() to the delivery report) and fetch p50/p99 (produce() to the consumer holding it: the record crosses the
proxy twice, in a Produce and in a Fetch). Goal (issue 26): >= 0.9x the direct throughput and <= 1 ms added p99 at
half load.

    .venv/bin/python -m benchmarks.bench_proxy      # writes the "proxy" section of docs/benchmarks.md
    .venv/bin/python -m benchmarks.bench_proxy --pinning pinned --rounds 2
        # the pinned latency set-up only (both: pinned and unpinned rows; unpinned: the scheduler's placement)
    .venv/bin/python -m benchmarks.bench_proxy --proxy-nice -10
        # a trial: the proxy's threads at niceness -10 (needs root), its core its own as far as the scheduler goes
    .venv/bin/python -m benchmarks.bench_proxy --before /tmp/old-checkout
        # adds a third target in the same run: a proxy started from another checkout of zkcoord (e.g. `git worktree
        # add --detach /tmp/old-checkout main`), to compare two versions of the proxy on one machine at one time
    .venv/bin/python -m benchmarks.bench_proxy --rounds 1 --trace /tmp/trace.json
        # the proxy under benchmarks/trace_proxy.py's probes (event-loop lag, CPU and wall time per read callback,
        # GC pauses, run-queue delay, TCP_NODELAY): printed, and the docs are not written from that run
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.report import LOAD_AT_START, write_section
from zkcoord.local.zookeeper import ZooKeeper, free_port
from zkcoord.testing.tansu import Tansu, register_in_zookeeper
from zkcoord.zk.session import connect

TOPIC = "bench-proxy"
PARTITIONS = 4
RECORDS = 200_000
ROUNDS = 3
VALUE = b"x" * 100
PRODUCER = {"linger.ms": 5, "acks": 1, "batch.num.messages": 10000}
# The fetch throughput read twice per target and round: with librdkafka's default of at most 1 MiB per partition in
# a Fetch answer, and with 16 MiB per partition (answers of up to 64 MiB: does the proxy have a ceiling on large
# answers? It receives a frame of 64 KiB or more into a buffer of its own, up to the frame's end).
FETCH_DEFAULT = {"fetch.max.bytes": 16 << 20}
FETCH_LARGE = {"fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20}


# What "frames pass without decoding or copying more than once" comes to, checked by
# tests/unit/proxy/test_proxy_passthrough.py and read from CPython 3.11's asyncio (selector_events.py, sslproto.py).
FRAMES_CHECK = (
    "Frames: the proxy neither decodes nor copies a forwarded Produce or Fetch frame or its answer: both sockets "
    "are read by an asyncio `BufferedProtocol`, so the kernel receives into the proxy's own buffer (256 KiB, or one "
    "frame's size), the proxy reads the 4-byte size and the 8-byte header there (and Produce's acks), and writes on "
    "a memoryview of that same buffer, consecutive frames in one write. `tests/unit/proxy/test_proxy_passthrough.py` "
    "fails on any decoder call, on any write that is not a view of a buffer the kernel received into, and when more "
    "than 1% of the bytes move between the proxy's buffers (a frame split across two: at most 4 KiB of it; 0.13% "
    "there). What asyncio still copies: the rest of a write the socket does not take at once (appended to the "
    "transport's buffer; then the other side is not read past 1 MiB unsent), and TLS's encryption and decryption."
)

# Where the added tail goes: `python -m benchmarks.bench_proxy --rounds 1 --pinning pinned --trace FILE`, 2026-11-27,
# load 2.53 -> 2.70, and the CPU-priority trial `--rounds 2 --pinning pinned --proxy-nice -10`, load 1.51 -> 1.30
# (issue 26).
TAIL_CHECK = (
    "Tail: what the proxy adds at p99 here is time waiting for its CPU, not its code. Probed in a pinned run of "
    "this benchmark (`--rounds 1 --pinning pinned --trace FILE`: benchmarks/trace_proxy.py; load 2.53 -> 2.70; "
    "half load 210,922 records/s: produce p99 9.7 ms direct, 31.1 ms through the proxy, fetch 31.8 / 60.9 ms): a "
    "read callback (bytes received into the proxy's buffer, frames cut, written on) took 15 us of the thread's CPU "
    "at the median and 65 us at p99 (18,906 callbacks, 1 frame at the median, 2 at p99); the cyclic GC ran 10 "
    "times, none full, 1.26 ms at most. But the proxy's threads were runnable and not running for 2.6 s against "
    "1.9 s on a CPU (/proc schedstat), a callback's wall time was 167 us at p99 and 1.97 ms at p999, and a 1 ms "
    "timer was late by 1.7 ms at p99, 6.3 ms at p999, 30 ms at most: the CPU the proxy was pinned to was shared "
    "with the other engineers' processes. A stall of the proxy holds every record in flight and every one produced "
    "meanwhile (a timer samples a stall once, the records by its length), and a record needs the proxy scheduled "
    "for its request and for its answer (a fetched record four times), so a few stalls of tens of ms make the "
    "record p99. Given the CPU: the same pinned set-up with the proxy's threads at niceness -10 (`--rounds 2 "
    "--pinning pinned --proxy-nice -10`, a trial; load 1.51 -> 1.30; Tansu and the clients at 0) added +0.35 / "
    "+0.41 ms to the produce p50 / p99 at half load (220,490 records/s: 4.79 / 13.39 ms direct, 5.14 / 13.80 ms "
    "through the proxy) and -0.51 / -0.19 ms to the fetch p50 / p99 (9.80 / 40.62, 9.29 / 40.42 ms); at 10,000 "
    "records/s +0.14 / +0.46 ms produce, -0.88 / -1.84 ms fetch; throughput 1.01x produce, 0.94x fetch. Ruled out "
    "as before: Nagle and delayed ACKs (TCP_NODELAY on all 23 sockets written on: asyncio sets it), write "
    "coalescing (the frames of one receive leave in one write at the end of its callback), flow control (7 "
    "pauses, in the throughput phases), the group coordinator and ZooKeeper (nothing on the loop here: kazoo runs "
    "in its own thread); uvloop 0.23 (`ZKCOORD_PROXY_TRACE_UVLOOP=1`, last session) left the callbacks' CPU where "
    "it was (13 / 190 us p50 / p99), so it is not a dependency. Cutting the proxy's Python per frame would save "
    "tens of microseconds of a callback, not the milliseconds of a stall: forward.py is unchanged."
)

# The method before (issue 26), kept as history.
HISTORY = (
    "Before this method (the run of 18:12 the same day, load 0.44 -> 1.72): produce 1,194,088 direct / 1,073,120 "
    "through the proxy (0.90x), fetch 181,445 / 174,457 records/s (0.96x; both reads stalled in librdkafka's 1 s "
    "fetch.queue.backoff.ms); its half-load producer (Python per record: a lambda, struct.pack and a delivery "
    "callback each) reached 267k of a 597k records/s target and its consumer waited for 10,000-record batches, so "
    "its p99s (81-156 ms; +13.9 ms produce, -35.5 ms fetch through the proxy) measured the clients."
)


@dataclass
class Figures:
    produce_rps: float
    fetch_rps: float
    fetch_large_rps: float


def produce_throughput(bootstrap: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    producer.list_topics(TOPIC, timeout=10)  # connections and metadata outside the timed part
    start = time.perf_counter()
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(TOPIC, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered through {bootstrap}")
    return RECORDS / elapsed


def fetch_throughput(bootstrap: str, expected: int, settings: dict[str, int]) -> float:
    # fetch.queue.backoff.ms: librdkafka postpones a partition's next Fetch by this much (1 s by default) once its
    # local queue holds queued.min.messages; the reading then stalls for most of that second (~0.9 s seen), so a
    # read of 200,000 records measured the timer: ~160k records/s instead of ~1M, direct or not.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "queued.max.messages.kbytes": 262144, "fetch.queue.backoff.ms": 10,
                         **settings})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    deadline = start + 120
    while got < expected and time.perf_counter() < deadline:
        # at most the records still missing: consume() returns once it has as many as asked or its timeout is up,
        # so asking 10,000 when fewer are left waited out the 0.5 s (1.04M records/s direct became ~160k)
        got += sum(1 for m in consumer.consume(min(10000, expected - got), 0.5) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < expected:
        raise RuntimeError(f"read {got} of {expected} records through {bootstrap}")
    return got / elapsed


# --- latency: a paced producer and a consumer, each in its own process, timestamping a sample of the records ---

# Each latency run has a topic of its own, made before the run: Tansu's memory storage costs more CPU per record the
# longer a partition is (its CPU over a 5 s run at 10,000 records/s went from 1.2 s to 3.2 s as one topic grew to 2M
# records), so a shared topic would make later runs measure Tansu; and the throughput phase reads bench-proxy whole.
LATENCY_TOPIC = "bench-proxy-latency"
LATENCY_SECONDS = 5.0
LOW_RATE = 10_000.0  # records/s: nothing is CPU-bound at this rate
CALIBRATE_RECORDS = 400_000  # produced as fast as the latency set-up takes them, to find its maximum rate
SAMPLES_PER_SECOND = 2_000  # timestamped records per second, whatever the rate (1 in rate/2000)
SHORT = 0.95  # a run whose producer reached less than this share of its target rate is not reported
MARK = ord("S")  # the first byte of a timestamped record's value (the others start with "x")
_STAMP = struct.Struct(
    ">q"
)  # after MARK: time.perf_counter_ns() at produce() (CLOCK_MONOTONIC: one per machine)
_acked: list[
    int
] = []  # the producer process's produce() -> delivery report times (ns) of timestamped records


def _delivered(err: object, msg: Any) -> None:
    """The producer's on_delivery, given to the timestamped records only (one module-level function, no closure)."""
    if err is None:
        _acked.append(time.perf_counter_ns() - _STAMP.unpack_from(msg.value(), 1)[0])


def _pin_self(cpu: int | None) -> None:
    """Pin this process to `cpu` (None: leave it) before its client starts its threads (they inherit the mask)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def pin(pid: int, cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of process `pid` (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


def _paced_producer(
    bootstrap: str, topic: str, rate: float | None, total: int, every: int, cpu: int | None, out: Any
) -> None:
    """Child process: produce `total` records at `rate` records/s (None: as fast as the producer takes them), in
    slices: each time it wakes (a delivery report or 1 ms) it produces every record due by then. Record i goes to
    partition i % PARTITIONS; every `every`-th carries MARK and its produce() time and is the only one given a
    delivery callback. Sends back (start, end of the last produce(), acked times in ns, the largest backlog: the
    records due but not produced when a slice began)."""
    _pin_self(cpu)
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    producer.list_topics(topic, timeout=10)  # connected, metadata known, outside the timed part
    produce, poll, now_ns = producer.produce, producer.poll, time.perf_counter_ns
    pad, parts = VALUE[1 + _STAMP.size :], PARTITIONS
    mark = bytes([MARK])
    sent = backlog = 0
    start = time.perf_counter()
    while sent < total:
        due = total if rate is None else min(total, int((time.perf_counter() - start) * rate) + 1)
        backlog = max(backlog, due - sent)
        while sent < due:
            try:
                if sent % every:
                    produce(topic, VALUE, None, sent % parts)
                else:
                    produce(topic, mark + _STAMP.pack(now_ns()) + pad, None, sent % parts, _delivered)
            except BufferError:  # the broker does not keep up: wait for room (the wait counts in the rate)
                poll(0.001)
                continue
            sent += 1
        poll(0.001)  # returns at the first delivery report (its time taken there), or after 1 ms
    end = time.perf_counter()
    remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered through {bootstrap}")
    out.send((start, end, _acked, backlog))


def _sampled_consumer(bootstrap: str, topic: str, total: int, cpu: int | None, ready: Any, out: Any) -> None:
    """Child process: read every partition of `topic` from its end until `total` records came; send back
    (the time the last one came, records read, produce() -> in the consumer's hands in ns of each timestamped
    one). It waits in poll() (it returns at the first record, so no batch-filling wait is measured), then takes
    what else is queued with consume(timeout 0); per record only the value's first byte is looked at."""
    _pin_self(cpu)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})  # fmt: skip
    ends = [
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)
    ]
    consumer.assign([TopicPartition(topic, p, end) for p, end in enumerate(ends)])  # ours come after
    consumer.poll(0.5)  # connected and fetching (nothing is there yet) before the producer starts
    ready.set()
    poll, consume, now_ns, unpack = consumer.poll, consumer.consume, time.perf_counter_ns, _STAMP.unpack_from
    fetched: list[int] = []
    got, last = 0, 0.0
    deadline = time.perf_counter() + LATENCY_SECONDS * 4 + 60
    while got < total and time.perf_counter() < deadline:
        first = poll(0.1)
        if first is None:
            continue
        at = now_ns()
        for m in (first, *consume(10000, 0)):
            v = m.value()
            if not v:  # an error event, not a record
                continue
            got += 1
            if v[0] == MARK:
                fetched.append(at - unpack(v, 1)[0])
        last = time.perf_counter()
    consumer.close()
    out.send((last, got, fetched))


@dataclass
class Latency:
    target_rps: float
    achieved_rps: float
    produce_p50_ms: float
    produce_p99_ms: float
    fetch_p50_ms: float
    fetch_p99_ms: float
    backlog: int  # the producer's largest backlog of due records
    samples: int

    @property
    def reached(self) -> bool:
        return self.achieved_rps >= SHORT * self.target_rps


def _pct(xs: list[int], q: float) -> float:
    return xs[int(q * (len(xs) - 1))] / 1e6 if xs else float("nan")


def _run_clients(
    bootstrap: str, topic: str, rate: float | None, total: int, every: int, cpu: int | None
) -> tuple[tuple[float, float, list[int], int], tuple[float, int, list[int]]]:
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Event()
    (from_consumer, to_main_c), (from_producer, to_main_p) = spawn.Pipe(False), spawn.Pipe(False)
    reader = spawn.Process(target=_sampled_consumer, args=(bootstrap, topic, total, cpu, ready, to_main_c))
    reader.start()
    writer = None
    try:
        if not ready.wait(60):
            raise RuntimeError(f"the consumer through {bootstrap} did not start")
        writer = spawn.Process(
            target=_paced_producer, args=(bootstrap, topic, rate, total, every, cpu, to_main_p)
        )
        writer.start()
        budget = (total / rate if rate else 30.0) + 90
        if not from_producer.poll(budget):
            raise RuntimeError(f"the producer through {bootstrap} did not finish in {budget:.0f} s")
        produced = from_producer.recv()
        if not from_consumer.poll(budget):
            raise RuntimeError(f"the consumer through {bootstrap} did not finish in {budget:.0f} s")
        consumed = from_consumer.recv()
    finally:
        for child in (writer, reader):
            if child is not None:
                child.join(30)
                if child.exitcode is None:
                    child.kill()
                    child.join(10)
    if consumed[1] < total:
        raise RuntimeError(f"the consumer through {bootstrap} read {consumed[1]} of {total} records")
    return produced, consumed


def max_rate(bootstrap: str, topic: str, cpu: int | None) -> float:
    """The rate the latency set-up sustains at most: CALIBRATE_RECORDS produced as fast as the producer takes them
    while the consumer reads them, over the time from the first produce() to the consumer holding the last."""
    every = max(1, CALIBRATE_RECORDS // 10_000)
    (start, _end, _acked_ns, _backlog), (last, _got, _fetched) = _run_clients(
        bootstrap, topic, None, CALIBRATE_RECORDS, every, cpu
    )
    return CALIBRATE_RECORDS / (last - start)


def latency(bootstrap: str, topic: str, rate: float, cpu: int | None) -> Latency:
    """Produce and fetch latency at `rate` records/s for LATENCY_SECONDS: produce() to the delivery report, and
    produce() to the consumer holding the record (it crosses the proxy twice: in a Produce and in a Fetch)."""
    total = int(rate * LATENCY_SECONDS)
    every = max(1, round(rate / SAMPLES_PER_SECOND))
    (start, end, acked, backlog), (_last, _got, fetched) = _run_clients(
        bootstrap, topic, rate, total, every, cpu
    )
    acked.sort()
    fetched.sort()
    return Latency(rate, total / max(end - start, 1e-9), _pct(acked, 0.5), _pct(acked, 0.99),
                   _pct(fetched, 0.5), _pct(fetched, 0.99), backlog, len(fetched))  # fmt: skip


def median_figures(found: list[Figures]) -> Figures:
    return Figures(*(statistics.median(getattr(f, k) for f in found) for k in ("produce_rps", "fetch_rps",
                                                                             "fetch_large_rps")))  # fmt: skip


def median_latency(found: list[Latency]) -> Latency | None:
    """The medians of the runs that reached their rate (None: none did)."""
    ok = [x for x in found if x.reached]
    if not ok:
        return None

    def med(key: str) -> float:
        return float(statistics.median(getattr(x, key) for x in ok))

    return Latency(med("target_rps"), med("achieved_rps"), med("produce_p50_ms"), med("produce_p99_ms"),
                   med("fetch_p50_ms"), med("fetch_p99_ms"), max(x.backlog for x in ok),
                   sum(x.samples for x in ok))  # fmt: skip


def start_proxy(
    zk_hosts: str, data_dir: Path, node_id: int, checkout: Path | None, trace: Path | None = None
) -> tuple[Any, int]:
    """A `zkcoord proxy` process (from `checkout` if given: run there, importing its zkcoord; under the probes of
    benchmarks.trace_proxy, writing their figures to `trace`, if given) and its port, once it listens for broker
    111."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(checkout)} if checkout is not None else None
    module = "zkcoord"
    if trace is not None:
        env, module = {**(env or os.environ), "ZKCOORD_PROXY_TRACE": str(trace)}, "benchmarks.trace_proxy"
    proxy = subprocess.Popen(
        [sys.executable, "-m", module, "proxy", "--zk", zk_hosts, "--listen", f"127.0.0.1:{port}",
         "--node-id", str(node_id), "--data-dir", str(data_dir), "--broker-port", f"111={free_port()}"],
        stdout=subprocess.PIPE, stderr=open(data_dir.with_suffix(".log"), "w"), text=True,  # noqa: SIM115
        cwd=checkout, env=env,
    )  # fmt: skip
    assert proxy.stdout is not None
    for line in proxy.stdout:
        if (
            "zkcoord proxy: broker 111 behind" in line
        ):  # printed once start() is done (the log line comes earlier)
            break
    return proxy, port


@dataclass
class Setup:
    """Where the processes of a latency run may run: `client_cpu` for Tansu and both clients, `proxy_cpu` for the
    proxy (None: anywhere, as the scheduler likes)."""

    name: str
    client_cpu: int | None = None
    proxy_cpu: int | None = None


def setups(choice: str) -> tuple[list[Setup], str]:
    """The set-ups asked for that this machine has, and what was left out and why."""
    cpus = sorted(os.sched_getaffinity(0))
    out: list[Setup] = []
    note = ""
    if choice in ("pinned", "both"):
        if len(cpus) >= 2:
            out.append(Setup("pinned", cpus[0], cpus[1]))
        else:
            note = f"Pinning not available ({len(cpus)} CPU usable by this process): the latency ran unpinned only."
            print(note)
            choice = "unpinned"
    if choice in ("unpinned", "both"):
        out.append(Setup("unpinned"))
    return out, note


def apply(setup: Setup, tansu_pid: int, proxy_pids: list[int]) -> None:
    everywhere = os.sched_getaffinity(0)
    pin(tansu_pid, everywhere if setup.client_cpu is None else {setup.client_cpu})
    for pid in proxy_pids:
        pin(pid, everywhere if setup.proxy_cpu is None else {setup.proxy_cpu})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, metavar="CHECKOUT", default=None,
                        help="also measure a proxy run from this checkout of zkcoord (a third target in the same "
                             "run, its figures written below the table; default: none)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds of the targets alternating, medians reported (default: {ROUNDS})")  # fmt: skip
    parser.add_argument("--pinning", choices=("pinned", "unpinned", "both"), default="both",
                        help="latency set-ups: 'pinned' (Tansu and both clients on one CPU, the proxy on another), "
                             "'unpinned' (the scheduler's choice), or both (default: both)")  # fmt: skip
    parser.add_argument("--proxy-nice", type=int, default=0, metavar="N",
                        help="run the proxy's threads at niceness N, a trial of CPU priority (a negative N needs "
                             "root; the docs say so when it is not 0; default: 0)")  # fmt: skip
    parser.add_argument("--trace", type=Path, metavar="FILE", default=None,
                        help="run the measured proxy under benchmarks.trace_proxy's probes (event-loop lag, "
                             "callback times, GC pauses, run-queue delay) and write their figures to FILE as JSON "
                             "(default: no probes)")  # fmt: skip
    args = parser.parse_args(argv)
    chosen, pin_note = setups(args.pinning)
    with ZooKeeper.start(1) as zk, Tansu.start() as tansu:
        tansu.create_topic(TOPIC, PARTITIONS)
        runs_needed = len(chosen) * 3 + args.rounds * len(chosen) * 2 * (3 if args.before is not None else 2)
        for i in range(runs_needed):  # registered in ZooKeeper with the others, as the proxy expects
            tansu.create_topic(f"{LATENCY_TOPIC}-{i}", PARTITIONS)
        fresh = iter(f"{LATENCY_TOPIC}-{i}" for i in range(runs_needed))
        client = connect(zk.hosts)
        with register_in_zookeeper(client, tansu):
            proxies = [start_proxy(zk.hosts, Path(zk.base_dir) / "proxy", 9000, None, args.trace)]
            if args.before is not None:
                proxies.append(
                    start_proxy(zk.hosts, Path(zk.base_dir) / "proxy-before", 9001, args.before.resolve())
                )
            pids = [proxy.pid for proxy, _ in proxies]
            if args.proxy_nice:
                for pid in pids:
                    for tid in os.listdir(f"/proc/{pid}/task"):
                        os.setpriority(os.PRIO_PROCESS, int(tid), args.proxy_nice)
            try:
                targets = {"direct": tansu.bootstrap, "proxy": f"127.0.0.1:{proxies[0][1]}"}
                if args.before is not None:
                    targets["before"] = f"127.0.0.1:{proxies[1][1]}"
                # Half load: half the rate the latency set-up sustains straight to Tansu, found here per set-up
                # (the median of three tries), before the rounds.
                maxima: dict[str, list[float]] = {}
                for setup in chosen:
                    apply(setup, tansu.proc.pid, pids)
                    maxima[setup.name] = [
                        max_rate(tansu.bootstrap, next(fresh), setup.client_cpu) for _ in range(3)
                    ]
                    print(f"{setup.name}: the latency set-up sustains at most "
                          f"{', '.join(f'{m:,.0f}' for m in maxima[setup.name])} records/s straight to Tansu")  # fmt: skip
                rates = {
                    setup.name: {"half": statistics.median(maxima[setup.name]) / 2, "low": LOW_RATE}
                    for setup in chosen
                }
                apply(Setup("unpinned"), tansu.proc.pid, pids)
                samples: dict[str, list[Figures]] = {name: [] for name in targets}
                runs: dict[tuple[str, str, str], list[Latency]] = {}
                written = 0
                for round_no in range(args.rounds):  # targets alternate, the first one changing every round
                    order = list(targets) if round_no % 2 == 0 else list(reversed(targets))
                    for name in order:
                        rps = produce_throughput(targets[name])
                        written += RECORDS
                        samples[name].append(Figures(rps, fetch_throughput(targets[name], written, FETCH_DEFAULT),
                                                     fetch_throughput(targets[name], written, FETCH_LARGE)))  # fmt: skip
                        print(f"round {round_no + 1} {name}: {samples[name][-1]}")
                    for setup in chosen:
                        apply(setup, tansu.proc.pid, pids)
                        for load, rate in rates[setup.name].items():
                            for name in order:
                                found = latency(targets[name], next(fresh), rate, setup.client_cpu)
                                runs.setdefault((setup.name, load, name), []).append(found)
                                print(f"round {round_no + 1} {setup.name} {load} {name}: "
                                      f"{found.achieved_rps:,.0f}/{rate:,.0f} records/s "
                                      f"({'reached' if found.reached else 'SHORT: not reported'}): {found}")  # fmt: skip
                        apply(Setup("unpinned"), tansu.proc.pid, pids)
                figures = {name: median_figures(found) for name, found in samples.items()}
                lat = {key: median_latency(found) for key, found in runs.items()}
            finally:
                for proxy, _ in proxies:
                    proxy.terminate()
                    proxy.wait(15)
        client.stop()
        client.close()
    d, p = figures["direct"], figures["proxy"]
    rows = [
        f"| produce (records/s) | {d.produce_rps:,.0f} | {p.produce_rps:,.0f} | {p.produce_rps / d.produce_rps:.2f}x |",
        f"| fetch (records/s) | {d.fetch_rps:,.0f} | {p.fetch_rps:,.0f} | {p.fetch_rps / d.fetch_rps:.2f}x |",
        f"| fetch, 16 MiB per partition per answer (records/s) | {d.fetch_large_rps:,.0f} | "
        f"{p.fetch_large_rps:,.0f} | {p.fetch_large_rps / d.fetch_large_rps:.2f}x |",
    ]
    verdict: list[tuple[str, str, float]] = []  # (set-up, produce or fetch, added p99 ms) at half load
    for setup in chosen:
        for load, rate in rates[setup.name].items():
            dl, pl = lat[(setup.name, load, "direct")], lat[(setup.name, load, "proxy")]
            what = f"{'half load' if load == 'half' else 'low rate'}, {rate:,.0f} records/s, {setup.name}"
            if dl is None or pl is None:
                short = [x for n in ("direct", "proxy") for x in runs[(setup.name, load, n)] if not x.reached]
                reached = ", ".join(f"{x.achieved_rps:,.0f}" for x in short)
                rows.append(f"| {what}: not reported, the producer fell short by more than "
                            f"{1 - SHORT:.0%} ({reached} of {rate:,.0f} records/s) | | | |")  # fmt: skip
                continue
            for kind in ("produce", "fetch"):
                d50, d99 = getattr(dl, f"{kind}_p50_ms"), getattr(dl, f"{kind}_p99_ms")
                p50, p99 = getattr(pl, f"{kind}_p50_ms"), getattr(pl, f"{kind}_p99_ms")
                rows.append(f"| {kind} p50 / p99 (ms), {what} | {d50:.2f} / {d99:.2f} | {p50:.2f} / {p99:.2f} | "
                            f"{p50 - d50:+.2f} / {p99 - d99:+.2f} ms |")  # fmt: skip
                if load == "half":
                    verdict.append((setup.name, kind, p99 - d99))
            n_runs = sum(x.reached for n in ("direct", "proxy") for x in runs[(setup.name, load, n)])
            rows.append(f"| rate reached, {what} (records/s; runs reported) | {dl.achieved_rps:,.0f} | "
                        f"{pl.achieved_rps:,.0f} | {n_runs} of {2 * args.rounds} runs |")  # fmt: skip
    maxima_text = "; ".join(
        f"{name}: {', '.join(f'{m:,.0f}' for m in found)} records/s" for name, found in maxima.items()
    )
    body = (
        "`.venv/bin/python -m benchmarks.bench_proxy`: "
        "confluent-kafka (librdkafka) straight to Tansu 0.6.0 (memory storage) and through `zkcoord proxy` in front "
        f"of it, one run of {args.rounds} rounds (targets alternating, medians shown), same clients. Throughput: "
        f"{RECORDS:,} records of {len(VALUE)} bytes over {PARTITIONS} partitions (acks=1, linger.ms=5), read back by "
        "assignment; each fetch reads the whole topic (every record written so far by both targets), reported per "
        "second, once with librdkafka's 1 MiB per partition per Fetch and once with 16 MiB (fetch.queue.backoff.ms "
        "10: at its default, 1 s, the read stalled about 0.9 s once the consumer's queue filled, and the fetch rows "
        "measured that timer, ~160k records/s direct or not).\n\n"
        "Latency: a producer and a consumer, each in its own process, on a topic of its own per run (Tansu's memory "
        "storage spends more CPU per record the longer a partition is: its CPU over one 10,000 records/s run went from "
        "1.2 to 3.2 s as a shared topic grew to 2M records). The producer is paced in "
        "slices (each time it wakes, at a delivery report or after 1 ms, it produces every record due by then); "
        f"about {SAMPLES_PER_SECOND:,} records a second carry a mark and their produce() time (CLOCK_MONOTONIC) in "
        "their value, and only those get a delivery callback; the consumer waits in poll() (returning at the first "
        "record: no batch-filling wait), drains what else is queued, and looks at each record's first byte only. "
        "produce = produce() to the delivery report; fetch = produce() to the consumer holding the record (it "
        "crosses the proxy twice). The consumer's fetch.wait.max.ms is 10: Tansu answers a Fetch that found nothing "
        "when that time is up, not when records arrive (at 100 ms the direct fetch p50 at 10,000 records/s went from "
        "9.9 to 34 ms in a trial), so up to 10 ms of each fetch latency is that wait, for both targets. "
        "A run whose producer reached less than "
        f"{SHORT:.0%} of its rate is not reported (said so in the row). Half load = half the rate the same set-up "
        "sustains straight to Tansu (producer unpaced, consumer reading; first produce() to the last record read), "
        f"measured three times at the start of the run ({maxima_text}; the median halved), so it is reachable on "
        f"the machine at hand; low rate = {LOW_RATE:,.0f} records/s, where nothing is CPU-bound. "
        f"{LATENCY_SECONDS:.0f} s per run. Pinned: Tansu and both clients on one CPU, the proxy alone on the other "
        "(as on its own host or cores; direct: the same pinning without a proxy), set with sched_setaffinity on "
        "every thread; unpinned: wherever the scheduler puts them. The other engineers' processes were not pinned "
        "away from either CPU. Goal (issue 26): >= 0.9x throughput, <= 1 ms added p99 at half load.\n\n"
        "| measure | direct | through the proxy | proxy - direct (or / direct) |\n|---|---:|---:|---:|\n"
        + "\n".join(rows)
    )
    if pin_note:
        body += "\n\n" + pin_note
    if args.proxy_nice:
        body += (
            f"\n\nA trial (`--proxy-nice {args.proxy_nice}`): the proxy's threads ran at niceness "
            f"{args.proxy_nice}, Tansu and the clients at 0."
        )
    judged = [v for v in verdict if v[0] == "pinned"] or verdict  # the deployment-like set-up, where measured
    met = bool(judged) and all(added <= 1.0 for _, _, added in judged)
    added_text = (
        "; ".join(f"{kind} {added:+.2f} ms {name}" for name, kind, added in verdict) or "not measured"
    )
    body += (
        f"\n\nGoal: throughput {p.produce_rps / d.produce_rps:.2f}x produce, {p.fetch_rps / d.fetch_rps:.2f}x fetch "
        f"(>= 0.9x: {'met' if min(p.produce_rps / d.produce_rps, p.fetch_rps / d.fetch_rps) >= 0.9 else 'not met'}); "
        f"added p99 at half load {added_text} (<= 1 ms, judged on the {judged[0][0] if judged else ''} rows: "
        f"{'met' if met else 'not met'})."
    )
    body += "\n\n" + FRAMES_CHECK + "\n\n" + TAIL_CHECK + "\n\n" + HISTORY
    if LOAD_AT_START >= 1.0:
        body += (
            f"\n\nThe machine was busy (load {LOAD_AT_START:.2f} on {os.cpu_count()} cores at the start): the "
            "clients, Tansu and the proxy competed with other processes for both CPUs, pinned or not."
        )
    if args.before is not None:
        b = figures["before"]
        commit = subprocess.run(["git", "-C", str(args.before), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip() or "?"  # fmt: skip
        body += (
            f"\n\nIn the same run, alternating with the two above, the proxy of commit {commit} (`--before`): "
            f"produce {b.produce_rps:,.0f} records/s ({b.produce_rps / d.produce_rps:.2f}x direct), fetch "
            f"{b.fetch_rps:,.0f} records/s ({b.fetch_rps / d.fetch_rps:.2f}x)"
        )
        for setup in chosen:
            bl = lat[(setup.name, "half", "before")]
            if bl is not None:
                body += (f", {setup.name} half load produce p50/p99 {bl.produce_p50_ms:.2f}/{bl.produce_p99_ms:.2f} "
                         f"ms, fetch {bl.fetch_p50_ms:.2f}/{bl.fetch_p99_ms:.2f} ms")  # fmt: skip
        body += "."
    print(body)
    print("added p99 at half load: " + added_text)
    if args.trace is None:  # probed figures are not the proxy's own: not written to the docs
        write_section("proxy", body)
    else:
        print(Path(args.trace).read_text())


if __name__ == "__main__":
    main()
