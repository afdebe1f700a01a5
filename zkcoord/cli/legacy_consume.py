"""`zkcoord legacy consume`: one LegacyConsumer group member printing each record's value on its own line (as
the old console consumer did), committing its offsets and leaving the group cleanly on SIGTERM/SIGINT,
`--max-messages` or `--timeout-ms` (consumer.timeout.ms: no record for that long). On stderr it says who it is
(`consumer id ...`, the name `zkcoord migrate` uses for it) and, at each rebalance, which partitions it owns."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import BinaryIO, TextIO

from zkcoord.bridge.member import member_offsets
from zkcoord.cli.client_security import add_command_config, command_config
from zkcoord.cli.options import add_config_option, examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.ids import consumer_of_thread
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.session import ZkUnreachable

log = logging.getLogger(__name__)

# How often the record loop looks at the stop flag while no record arrives.
POLL_STEP_S = 0.2
# Set by the options themselves; a --property giving them too would be ambiguous.
_OWN_PROPERTIES = ("group.id", "zookeeper.connect", "zkcoord.mode")


class ZooKeeperUnreachable(ZkcoordError):
    """The member could not connect to ZooKeeper (or register in it) at start."""


def register(legacy_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = legacy_sub.add_parser(
        "consume",
        help="run one legacy ZooKeeper group member and print record values (the old console consumer)",
        description=(
            "Joins group G as a ZooKeeper-era high-level consumer, prints each record value on one line, "
            "commits offsets to /consumers/G/offsets and leaves the group on SIGTERM/SIGINT, "
            "--max-messages or --timeout-ms. With --config, names that are not flags are legacy consumer "
            "properties (as --property)."
        ),
        epilog=examples(
            "zkcoord legacy consume --zk 127.0.0.1:2181 --group g --topic t --from-beginning --max-messages 9",
            "zkcoord legacy consume --config consumer.properties --topic t   # zk=..., group=..., "
            "auto.commit.interval.ms=...",
        ),
    )
    add_config_option(p)
    p.add_argument("--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)")
    add_zk_security(p)
    add_command_config(p)  # the data path: the member fetches from the leaders with these settings
    p.add_argument("--group", required=True, metavar="G", help="consumer group id (group.id)")
    p.add_argument("--topic", required=True, help="topic to consume")
    p.add_argument(
        "--streams", type=int, default=1, metavar="N", help="streams (consumer threads) registered"
    )
    p.add_argument(
        "--mode", choices=("fast", "faithful"), default="fast", help="rebalance mode (zkcoord.mode)"
    )
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="without a committed offset start at the earliest record (auto.offset.reset=smallest)",
    )
    p.add_argument(
        "--max-messages", type=int, default=None, metavar="N", help="exit after N records (default: no limit)"
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="exit when no record arrives for MS milliseconds (consumer.timeout.ms; default: wait forever)",
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a legacy consumer property, e.g. auto.commit.interval.ms=200 (repeatable)",
    )
    p.add_argument(
        "--metrics-listen",
        type=_listen,
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0 = any free; default: off)",
    )
    p.set_defaults(func=cmd_consume)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"wants HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def parse_properties(items: Sequence[str]) -> dict[str, str]:
    """`key=value` strings to a dict; a missing `=`, an empty key or a repeated key is refused, naming it."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--property {item!r}: expected KEY=VALUE, e.g. auto.commit.interval.ms=1000")
        if key in props:
            raise ConfigError(f"--property {key} given twice ({props[key]!r} and {value!r})")
        props[key] = value
    return props


def build_config(args: argparse.Namespace) -> LegacyConsumerConfig:
    """The member's config from the options; every value is validated before anything touches ZooKeeper."""
    props = parse_properties(args.property)
    for own in _OWN_PROPERTIES:
        if own in props:
            option = {"group.id": "--group", "zookeeper.connect": "--zk", "zkcoord.mode": "--mode"}[own]
            raise ConfigError(f"--property {own}: set it with {option}")
    reset = props.get("auto.offset.reset")
    if args.from_beginning and reset is not None and reset.strip() != "smallest":
        # The old console consumer refused this combination too.
        raise ConfigError(f"--from-beginning conflicts with --property auto.offset.reset={reset}")
    if args.timeout_ms is not None:
        if args.timeout_ms < 0:
            raise ConfigError(f"--timeout-ms={args.timeout_ms}: must be 0 or more")
        if "consumer.timeout.ms" in props:
            raise ConfigError("--timeout-ms conflicts with --property consumer.timeout.ms")
        props["consumer.timeout.ms"] = str(args.timeout_ms)
    if args.streams < 1:
        raise ConfigError(f"--streams={args.streams}: must be at least 1")
    if args.max_messages is not None and args.max_messages < 1:
        raise ConfigError(f"--max-messages={args.max_messages}: must be at least 1")
    paths.validate_topic(args.topic, max_length=paths.TOPIC_MAX_LENGTH_0_8_2)
    props.setdefault("auto.offset.reset", "smallest" if args.from_beginning else "largest")
    props.update({"group.id": args.group, "zookeeper.connect": args.zk, "zkcoord.mode": args.mode})
    return LegacyConsumerConfig.from_properties(props)


def consume(
    consumer: LegacyConsumer,
    out: BinaryIO,
    *,
    max_messages: int | None,
    stop: threading.Event,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[int, str]:
    """Print records until a stop reason; returns (records printed, reason). The member must be started."""
    timeout_ms = consumer.config.consumer_timeout_ms
    printed = 0
    # The original's createMessageStreams returns after the first rebalance, so consumer.timeout.ms counts
    # from there, not from the start of the process.
    while not consumer.wait_stable(POLL_STEP_S):
        if stop.is_set():
            return printed, "signal"
    last_record = monotonic()
    while True:
        if stop.is_set():
            return printed, "signal"
        step = POLL_STEP_S
        if timeout_ms >= 0:
            remaining = timeout_ms / 1000.0 - (monotonic() - last_record)
            if remaining <= 0:
                return printed, "timeout"
            step = min(step, remaining)
        asked = monotonic()
        try:
            msg = consumer.next_message(step)
        except ZkcoordError as exc:
            if not exc.retriable:
                raise
            # e.g. no leader registered yet for an owned partition: the old consumer kept retrying too.
            log.warning("no records yet: %s; retrying", exc)
            stop.wait(consumer.config.refresh_leader_backoff_ms / 1000.0)
            continue
        if msg is None:
            # next_message returns early only when the member stopped itself (e.g. a duplicate consumer id).
            if monotonic() - asked < step / 2 and not stop.is_set():
                return printed, "member stopped: " + (consumer.stats.last_error or "unknown reason")
            continue
        out.write((msg.value if msg.value is not None else b"null") + b"\n")
        out.flush()
        printed += 1
        last_record = monotonic()
        if max_messages is not None and printed >= max_messages:
            return printed, "max-messages"


class AnnounceRebalances:
    """A rebalance listener telling the operator, on stderr, what this member gives up and what it owns after each
    rebalance, by its consumer id (one line each, flushed: another process may be waiting for it)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def before_release(self, consumer_id: str, partitions: Mapping[str, frozenset[int]]) -> None:
        held = [f"{t}-{p}" for t in sorted(partitions) for p in sorted(partitions[t])]
        if held:
            print(f"consumer id {consumer_id} releases {', '.join(held)}", file=self.out, flush=True)

    def after_claim(self, consumer_id: str, assignment: Mapping[TopicPartition, str]) -> None:
        # The assignment is the whole group's (partition -> thread id): this member's threads are its own.
        mine = sorted(tp for tp, thread in assignment.items() if consumer_of_thread(thread) == consumer_id)
        owned = ", ".join(f"{tp.topic}-{tp.partition}" for tp in mine)
        print(f"consumer id {consumer_id} owns {owned or 'nothing'}", file=self.out, flush=True)


def cmd_consume(args: argparse.Namespace) -> int:
    config = build_config(args)
    consumer = LegacyConsumer(
        config, {args.topic: args.streams}, offsets=member_offsets, zk_auth=zk_auth(args),
        kafka_security=command_config(args), listener=AnnounceRebalances(sys.stderr),
    )  # fmt: skip
    # Who this member is, before it joins: `zkcoord migrate` names members by this id.
    print(
        f"consumer id {consumer.consumer_id} (group {config.group_id}, topic {args.topic}, "
        f"{args.streams} stream(s))",
        file=sys.stderr,
        flush=True,
    )
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    printed = 0
    reason = "error"
    endpoint = None
    if args.metrics_listen is not None:
        from zkcoord.metrics import MemberMetrics

        endpoint = MemberMetrics(consumer).serve(*args.metrics_listen)
        print(f"metrics on http://{endpoint.host}:{endpoint.port}/metrics", file=sys.stderr, flush=True)
    try:
        try:
            consumer.start()
        except (
            ZkUnreachable
        ) as exc:  # nothing answered: say which group could not join, and the session's hint
            raise ZooKeeperUnreachable(
                f"cannot join group {config.group_id!r} through ZooKeeper {config.zookeeper_connect!r}: {exc}"
            ) from None
        except ZkcoordError:
            raise
        except Exception as exc:
            raise ZooKeeperUnreachable(
                f"cannot join group {config.group_id!r} through ZooKeeper {config.zookeeper_connect!r} within "
                f"zookeeper.connection.timeout.ms={config.connection_timeout_ms}: {type(exc).__name__}: {exc}"
            ) from None
        try:
            printed, reason = consume(consumer, sys.stdout.buffer, max_messages=args.max_messages, stop=stop)
        except BrokenPipeError:
            reason = "stdout closed"
    finally:
        # close() commits consumed offsets (auto.commit.enable), releases owner znodes and deregisters.
        consumer.close()
        if endpoint is not None:
            endpoint.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"Processed a total of {printed} messages ({reason})", file=sys.stderr)
    return 1 if reason.startswith("member stopped") else 0
