"""`--command-config FILE`, as Kafka's tools take it: the client security properties of every command that
reaches a broker, read once into kafka-python's arguments (zkcoord.security.client_config)."""

from __future__ import annotations

import argparse
from typing import Any

from zkcoord.security.client_config import read_command_config


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client security properties for the broker connection (security.protocol, sasl.mechanism, "
        "sasl.jaas.config, ssl.truststore.location as PEM, ...), as kafka-consumer-groups.sh --command-config "
        "(default: none, PLAINTEXT without a login)",
    )


def command_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python's security arguments from --command-config (none without it)."""
    return read_command_config(getattr(args, "command_config", None))
