"""The `zkcoord` command: one sub-command module per area, each with `register(subparsers)`."""

from __future__ import annotations

import argparse
import errno
import io
import logging
import os
import sys
from collections.abc import Sequence

from zkcoord import __version__
from zkcoord.cli import cluster, compare, demo, legacy, migrate, proxy, replay, security, serve, zk
from zkcoord.cli.options import ZkParser, apply_config, examples
from zkcoord.errors import ZkcoordError

# Each module defines `register(subparsers)`; the parser it adds sets `func(args) -> int`. In help order.
COMMAND_MODULES = (demo, zk, legacy, serve, proxy, replay, cluster, migrate, compare, security)


def build_parser() -> argparse.ArgumentParser:
    parser = ZkParser(
        prog="zkcoord",
        description="ZooKeeper-era Kafka consumer groups, the broker protocol, and the migration between them.",
        epilog=examples(
            "zkcoord demo                      # both protocols side by side, report in reports/demo-<date>-<time>/",
            "zkcoord serve --data-dir /tmp/n1  # a Kafka wire-protocol node on 127.0.0.1:9092",
        )
        + "\n\n'zkcoord COMMAND --help' shows each command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"zkcoord {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`zkcoord migrate plan ... | head`): not an error of the command. stdout is pointed
        # at /dev/null so the interpreter's last flush does not fail again (the recipe of Python's signal docs).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):  # a stdout without a file descriptor
            pass
        return 1


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        apply_config(parser, argv)
    except ZkcoordError as exc:
        print(f"zkcoord: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except ZkcoordError as exc:
        print(f"zkcoord: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"zkcoord: error: {exc}: another process listens there; give a free port", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
