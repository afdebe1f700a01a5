"""One comparison-run group member in its own process: consumes with one protocol and appends every consume,
ownership change, rebalance, offset commit and (legacy) ZooKeeper request as a JSON line to its trace file (flushed per line, so a SIGKILL loses
at most the line being written).

    python -m migration.compare.member_proc --protocol legacy-fast --group G --member m0 --topics t \
        --zk HOST:PORT/chroot --bootstrap HOST:PORT --trace-file m0.jsonl

Signals: SIGTERM/SIGINT = clean leave (commit, close); SIGUSR1 = expire the legacy ZooKeeper session on the
server (a duplicate-session close), as a long network partition would.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import IO, Any

from zkcoord.security.client_config import read_command_config
from zkcoord.zk.auth_flags import add_arguments as zk_security_arguments

CONSUME_POLL_S = 0.2
COOPERATIVE_STRATEGIES = frozenset({"cooperative-sticky"})  # KIP-429: revoke only what moves
COMMIT_EVERY_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


class Recorder:
    """Writes this member's events as JSON lines and tracks which partitions it believes it owns."""

    def __init__(self, out: IO[str], member: str) -> None:
        self.out = out
        self.member = member
        self.owned: set[tuple[str, int]] = set()
        self.rebalances = 0
        self.in_rebalance = False
        self.closing = (
            False  # set when the member starts shutting down: callbacks from close() are not rebalances
        )
        self._lock = threading.Lock()
        # Ownership changes come from the client's callback thread and, for legacy members, kazoo's connection
        # thread (fencing): one re-entrant lock keeps `owned` and the rows in step.
        self._state = threading.RLock()

    def row(
        self,
        kind: str,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        generation: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        rec = {"ts_ms": now_ms(), "kind": kind, "member": self.member, "topic": topic,
               "partition": partition, "offset": offset, "generation": generation,
               "detail": None if detail is None else dict(detail)}  # fmt: skip
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        with self._lock:
            self.out.write(line)
            self.out.flush()

    def rebalance_start(self, why: str) -> None:
        with self._state:
            self._rebalance_start(why)

    def _rebalance_start(self, why: str) -> None:
        if not self.in_rebalance and not self.closing:
            self.rebalances += 1
            self.in_rebalance = True
            self.row("rebalance_start", generation=self.rebalances, detail={"why": why})

    def shutdown(self) -> None:
        """The member stops handing out records: everything it owns is released now."""
        with self._state:
            self.closing = True
            self.release(set(self.owned))

    def fenced(self, why: str) -> None:
        """The member stopped handing out records without a rebalance (a legacy member fences the moment its
        ZooKeeper connection is suspended or its session lost): its ownership ends now, not at the rebalance
        that follows, when the server may long have given the partitions to peers."""
        with self._state:
            self.release(set(self.owned), reason=why)

    def release(self, tps: Iterable[tuple[str, int]], reason: str | None = None) -> None:
        with self._state:
            for tp in sorted(set(tps) & self.owned):
                self.owned.discard(tp)
                detail = None if reason is None else {"reason": reason}
                self.row("own_end", tp[0], tp[1], generation=self.rebalances, detail=detail)

    def install(self, tps: Iterable[tuple[str, int]], *, incremental: bool) -> None:
        """The member's ownership after a rebalance: the whole set, or (incremental) partitions added to it."""
        with self._state:
            self._install(tps, incremental=incremental)

    def _install(self, tps: Iterable[tuple[str, int]], *, incremental: bool) -> None:
        if self.closing:
            return
        new = set(tps)
        self._rebalance_start("assigned")  # no-op when a revoke already opened this rebalance
        if not incremental:
            self.release(self.owned - new)
        for tp in sorted(new - self.owned):
            self.owned.add(tp)
            self.row("own_start", tp[0], tp[1], generation=self.rebalances)
        full = sorted(self.owned)
        if not full:
            self.row("assignment", generation=self.rebalances)
        for t, p in full:
            self.row("assignment", t, p, generation=self.rebalances)
        self.row("rebalance_end", generation=self.rebalances, detail={"owned": len(full)})
        self.in_rebalance = False

    def settle(self) -> None:
        """End a rebalance still open (a revocation that added nothing) with the ownership as it stands."""
        with self._state:
            if self.in_rebalance:
                self._install((), incremental=True)

    def commits(self, positions: Mapping[tuple[str, int], int], how: str = "final") -> None:
        for (t, p), off in sorted(positions.items()):
            self.row("commit", t, p, offset=off, detail={"how": how})


def describe_zk_request(request: Any) -> dict[str, Any]:
    """`{"op", "path"}` of one kazoo request object (a multi-op also gets `ops`, its operation count)."""
    detail: dict[str, Any] = {"op": type(request).__name__, "path": getattr(request, "path", None)}
    operations = getattr(request, "operations", None)
    if operations is not None:
        detail["ops"] = len(operations)
        if detail["path"] is None and operations:
            detail["path"] = getattr(operations[0], "path", None)
    return detail


def trace_zk_requests(client: Any, rec: Recorder) -> None:
    """Record a `zk_op` row for every request `client` sends. Every public kazoo call, sync or async, goes
    through the client's `_call`; pings and the session close do not, so they are not counted."""
    send = client._call

    def traced(request: Any, async_object: Any) -> Any:
        rec.row("zk_op", detail=describe_zk_request(request))
        return send(request, async_object)

    client._call = traced


def fence_on(state: Any, rec: Recorder) -> None:
    """A kazoo state listener: the legacy member fences on SUSPENDED and LOST (zkcoord.zk.member, Session)."""
    if state in ("SUSPENDED", "LOST"):  # kazoo's KazooState values are these strings
        rec.fenced(f"connection {str(state).lower()}")


def trace_commits(storage: Any, rec: Recorder) -> None:
    """Record a `commit` row for every offset a legacy member's offset storage wrote to ZooKeeper."""
    commit = storage.commit

    def traced(*args: Any, **kwargs: Any) -> Any:
        outcome = commit(*args, **kwargs)
        rec.commits(
            {(tp.topic, tp.partition): off for tp, (off, _v) in outcome.zk_written.items()}, "zookeeper"
        )
        return outcome

    storage.commit = traced


# kafka-python's security argument -> librdkafka's property, for confluent-kafka members.
_LIBRDKAFKA = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanisms",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
}


def librdkafka_security(security: Mapping[str, Any]) -> dict[str, Any]:
    """The same settings as librdkafka properties."""
    out = {_LIBRDKAFKA[k]: v for k, v in security.items() if k in _LIBRDKAFKA}
    if "ssl_check_hostname" in security:
        out["ssl.endpoint.identification.algorithm"] = "https" if security["ssl_check_hostname"] else "none"
    return out


class Flags:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.expire = threading.Event()


def _install_signals(flags: Flags) -> None:
    signal.signal(signal.SIGTERM, lambda *_: flags.stop.set())
    signal.signal(signal.SIGINT, lambda *_: flags.stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: flags.expire.set())


# ----------------------------------------------------------------------------------------------------------------
# legacy (ZooKeeper) members


def run_legacy(args: argparse.Namespace, rec: Recorder, flags: Flags) -> None:
    from zkcoord.bridge.member import member_offsets
    from zkcoord.legacy.config import LegacyConsumerConfig
    from zkcoord.legacy.rebalance import TopicPartition
    from zkcoord.zk.auth_flags import ZkSecurityFlags
    from zkcoord.zk.member import LegacyConsumer
    from zkcoord.zk.session import connect, expire_session

    class Listener:
        def before_release(self, consumer_id: str, partitions: Mapping[str, frozenset[int]]) -> None:
            rec.rebalance_start("release")
            rec.release((t, p) for t, ps in partitions.items() for p in ps)

        def after_claim(self, consumer_id: str, assignment: Mapping[TopicPartition, str]) -> None:
            # As the original's listener, `assignment` is the whole group's: keep my threads' partitions.
            mine = (tp for tp, thread in assignment.items() if thread.rpartition("-")[0] == consumer_id)
            rec.install(((tp.topic, tp.partition) for tp in mine), incremental=False)

    mode = "faithful" if args.protocol == "legacy-faithful" else "fast"
    config = LegacyConsumerConfig(
        group_id=args.group,
        zookeeper_connect=args.zk,
        consumer_id=args.member,
        auto_offset_reset="smallest",
        auto_commit_enable=True,
        auto_commit_interval_ms=int(COMMIT_EVERY_S * 1000),
        zookeeper_session_timeout_ms=args.session_timeout_ms,
        partition_assignment_strategy=args.strategy,
        rebalance_backoff_ms=2000 if mode == "faithful" else 200,
        rebalance_max_retries=10,
        mode=mode,  # type: ignore[arg-type]
    )
    # The member gets a client made here, so every request it sends can be traced from its first one.
    auth = ZkSecurityFlags.from_args(args).load()  # the runner's own flags: the member logs in as it does
    client = connect(args.zk, session_timeout_s=args.session_timeout_ms / 1000.0, auth=auth)
    trace_zk_requests(client, rec)
    client.add_listener(lambda state: fence_on(state, rec))
    consumer = LegacyConsumer(
        config, {t: 1 for t in args.topics}, listener=Listener(), client=client, offsets=member_offsets,
        kafka_security=read_command_config(args.command_config),  # its data path reaches the same brokers
    )  # fmt: skip
    consumer.start()
    assert consumer.offset_storage is not None
    trace_commits(consumer.offset_storage, rec)
    rec.row("joined", detail={"consumer_id": consumer.consumer_id, "mode": mode})
    try:
        while not flags.stop.is_set():
            if flags.expire.is_set():
                flags.expire.clear()
                rec.row("session_expiry", detail={"session": consumer.session})
                assert consumer.client is not None
                expire_session(consumer.client)
            msg = consumer.next_message(timeout=CONSUME_POLL_S)
            if msg is not None:
                rec.row("consume", msg.topic, msg.partition, offset=msg.offset)
    finally:
        # Ownership ends here, when the member stops handing out records, not after close(): close() deletes
        # the owner znodes first, and a peer may claim them before close() returns (a recorded overlap that
        # never happened in ZooKeeper). The final commit is traced through the offset storage.
        rec.shutdown()
        consumer.close(commit=True)
        client.stop()
        client.close()


# ----------------------------------------------------------------------------------------------------------------
# classic (broker-coordinated) members


def run_kafka_python(args: argparse.Namespace, rec: Recorder, flags: Flags) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    if args.strategy not in assignors:
        raise SystemExit(f"member_proc: kafka-python has no {args.strategy!r} assignor")
    # KIP-429: with a cooperative assignor kafka-python revokes only what moves and calls on_partitions_assigned
    # with the added partitions only (kafka/coordinator/consumer.py, _on_join_complete_async).
    incremental = args.strategy in COOPERATIVE_STRATEGIES
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.member,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=int(COMMIT_EVERY_S * 1000),
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=max(100, args.session_timeout_ms // 4),
        max_poll_interval_ms=max(args.session_timeout_ms, 10_000),
        # As topic.metadata.refresh.interval.ms for librdkafka below: a partition increase is seen within ~1 s
        # (the leader then asks for a rebalance), not after the 5-minute default.
        metadata_max_age_ms=1000,
        # The Java client's default (kafka-python's is 30 s): after a coordinator outage the member reconnects,
        # heartbeats and refreshes metadata within ~1 s instead of backing off past its session timeout.
        reconnect_backoff_max_ms=1000,
        partition_assignment_strategy=[assignors[args.strategy]],
        default_offset_commit_callback=lambda offsets, res: _kafka_python_committed(rec, offsets, res),
        **read_command_config(args.command_config),
    )
    _trace_sync_commits(consumer, rec)
    if incremental:
        _close_cooperative_rebalances(consumer, rec)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            rec.rebalance_start("revoke")
            rec.release((tp.topic, tp.partition) for tp in revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            rec.install(((tp.topic, tp.partition) for tp in assigned), incremental=incremental)

    consumer.subscribe(topics=list(args.topics), listener=Listener())
    # kafka-python 3.0.12 can lose a join for good when a rejoin asked for only by its metadata-snapshot check
    # outlives a poll() (docs/cluster.md, "The failover benchmark's first-join hang"), and the first metadata
    # update after subscribe() always asks for one: topics() makes that update before the first join.
    consumer.topics()
    rec.row("joined", detail={"client": "kafka-python"})
    try:
        while not flags.stop.is_set():
            batches = consumer.poll(timeout_ms=int(CONSUME_POLL_S * 1000))
            for records in batches.values():
                for r in records:
                    rec.row("consume", r.topic, r.partition, offset=r.offset)
    finally:
        rec.shutdown()  # before close(): its LeaveGroup lets peers take the partitions at once
        consumer.close(autocommit=True)  # the final commit is traced by the commit_offsets_sync wrapper


def _kafka_python_committed(rec: Recorder, offsets: Mapping[Any, Any], result: Any) -> None:
    if not isinstance(result, Exception):
        rec.commits({(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}, "auto")


def _trace_sync_commits(consumer: Any, rec: Recorder) -> None:
    """kafka-python's synchronous auto-commit before each rebalance has no callback: wrap the coordinator's
    commit_offsets_sync (an attribute of this process's own consumer) to record what it committed."""
    coordinator = consumer._coordinator
    commit_sync = coordinator.commit_offsets_sync

    def traced(offsets: Mapping[Any, Any], *args: Any, **kwargs: Any) -> Any:
        out = commit_sync(offsets, *args, **kwargs)
        rec.commits({(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}, "sync")
        return out

    coordinator.commit_offsets_sync = traced


def _close_cooperative_rebalances(consumer: Any, rec: Recorder) -> None:
    """A cooperative kafka-python member that only lost partitions gets no on_partitions_assigned (nothing was
    added): end the rebalance its revocation opened when the join completes (a wrapper of this process's own
    coordinator's join completion, as _trace_sync_commits wraps its commits)."""
    coordinator = consumer._coordinator
    complete = coordinator._on_join_complete_async

    async def traced(*args: Any, **kwargs: Any) -> Any:
        out = await complete(*args, **kwargs)
        rec.settle()
        return out

    coordinator._on_join_complete_async = traced


# Strategy -> librdkafka partition.assignment.strategy, per group protocol (the consumer protocol's are the
# coordinator's server-side assignors, group.remote.assignor).
_CONFLUENT_STRATEGIES = {
    "classic": {"range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky"},
    "consumer": {"uniform": "uniform", "range": "range"},
}


def confluent_config(args: argparse.Namespace, group_protocol: str) -> dict[str, Any]:
    """The librdkafka configuration of a member speaking `group_protocol`: "classic" (the client's assignor,
    its own session timeout and heartbeat) or "consumer" (KIP-848: the coordinator assigns with the server-side
    assignor `--strategy`, and the session timeout and heartbeat interval are the coordinator's, group.consumer.*).
    No callbacks; raises SystemExit for a strategy the protocol does not have."""
    strategies = _CONFLUENT_STRATEGIES[group_protocol]
    if args.strategy not in strategies:
        if group_protocol == "consumer":
            raise SystemExit(f"member_proc: the consumer protocol has no {args.strategy!r} server assignor")
        raise SystemExit(f"member_proc: librdkafka has no eager {args.strategy!r} assignor")
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.member,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": int(COMMIT_EVERY_S * 1000),
    }
    if group_protocol == "consumer":
        config |= {"group.protocol": "consumer", "group.remote.assignor": strategies[args.strategy]}
    else:
        config |= {
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 4),
            "partition.assignment.strategy": strategies[args.strategy],
        }
    # reconnect.backoff.max.ms stays at its default: unlike kafka-python, librdkafka kept reconnecting every
    # ~50 ms through an 11 s coordinator outage and connected within ~50 ms of the node listening (a run with
    # 1000 ms changed nothing). Its ~4 s to regain partitions after a restart is the reloaded group waiting for
    # the old member ids (dropped by librdkafka's own session timeout) to expire; a group.instance.id would
    # avoid that but also changes how a clean leave and a crash rebalance, so it is not set here
    # (docs/comparison.md, mixed).
    config["topic.metadata.refresh.interval.ms"] = 1000
    return config | librdkafka_security(read_command_config(args.command_config))


def run_confluent(args: argparse.Namespace, rec: Recorder, flags: Flags, *, group_protocol: str) -> None:
    """A librdkafka member of the classic protocol (eager, or cooperative with cooperative-sticky: KIP-429,
    revoking only what moves) or of the consumer protocol (KIP-848, always incremental)."""
    from confluent_kafka import Consumer

    config = confluent_config(args, group_protocol)
    incremental = group_protocol == "consumer" or args.strategy in COOPERATIVE_STRATEGIES
    consumer = Consumer(
        {**config, "on_commit": lambda err, partitions: _confluent_committed(rec, err, partitions)}
    )
    # A cooperative classic member hands over incrementally in its own callbacks (incremental_assign/unassign);
    # an eager member and a consumer-protocol member leave (un)assignment to the client, as before.
    explicit = incremental and group_protocol == "classic"

    def on_assign(c: Any, partitions: Any) -> None:
        if explicit:
            c.incremental_assign(partitions)
        rec.install(((tp.topic, tp.partition) for tp in partitions), incremental=incremental)

    def on_revoke(c: Any, partitions: Any) -> None:
        rec.rebalance_start("revoke")
        rec.release((tp.topic, tp.partition) for tp in partitions)
        if explicit:
            c.incremental_unassign(partitions)

    def on_lost(c: Any, partitions: Any) -> None:
        rec.rebalance_start("lost")
        rec.release((tp.topic, tp.partition) for tp in partitions)
        if explicit:
            c.incremental_unassign(partitions)

    consumer.subscribe(list(args.topics), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    joined = {"client": "confluent-kafka"} | (
        {"group.protocol": "consumer"} if group_protocol == "consumer" else {}
    )
    rec.row("joined", detail=joined)
    try:
        while not flags.stop.is_set():
            msg = consumer.poll(CONSUME_POLL_S)
            if msg is None or msg.error() is not None:
                continue
            rec.row("consume", msg.topic(), msg.partition(), offset=msg.offset())
    finally:
        rec.shutdown()  # before close(): its LeaveGroup (leave heartbeat) lets peers take the partitions at once
        consumer.close()  # the final auto-commit is reported through on_commit


def _confluent_committed(rec: Recorder, err: Any, partitions: Any) -> None:
    if err is None:
        rec.commits(
            {(tp.topic, tp.partition): tp.offset for tp in partitions if tp.error is None and tp.offset >= 0},
            "auto",
        )


Runner = Callable[[argparse.Namespace, Recorder, Flags], None]

# Protocol name (migration.compare.scenario.PROTOCOLS) -> the member that speaks it.
RUNNERS: dict[str, Runner] = {
    "legacy-faithful": run_legacy,
    "legacy-fast": run_legacy,
    "classic-kafka-python": run_kafka_python,
    "classic-kafka-python-cooperative": run_kafka_python,
    "classic-confluent": partial(run_confluent, group_protocol="classic"),
    "classic-confluent-cooperative": partial(run_confluent, group_protocol="classic"),
    "consumer-confluent": partial(run_confluent, group_protocol="consumer"),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m migration.compare.member_proc")
    p.add_argument("--protocol", required=True, choices=sorted(RUNNERS))
    p.add_argument("--group", required=True)
    p.add_argument("--member", required=True, help="member name in the trace (e.g. m0)")
    p.add_argument("--topics", required=True, type=lambda s: [t for t in s.split(",") if t])
    p.add_argument("--strategy", default="range")
    p.add_argument("--zk", default=None, help="ZooKeeper connect string (legacy protocols)")
    zk_security_arguments(p)
    p.add_argument("--bootstrap", default=None, help="bootstrap servers (classic and consumer protocols)")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="Kafka client security properties for --bootstrap (as kafka-consumer-groups.sh)")  # fmt: skip
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--trace-file", required=True)
    args = p.parse_args(argv)
    if args.protocol.startswith("legacy") and not args.zk:
        p.error("--zk is required for the legacy protocols")
    if not args.protocol.startswith("legacy") and not args.bootstrap:
        p.error("--bootstrap is required for the classic and consumer protocols")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    flags = Flags()
    _install_signals(flags)
    with open(args.trace_file, "a", encoding="utf-8") as out:
        rec = Recorder(out, args.member)
        rec.row("started", detail={"protocol": args.protocol, "pid": os.getpid()})
        RUNNERS[args.protocol](args, rec, flags)
        rec.row("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
