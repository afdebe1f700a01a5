"""`--command-config FILE`, as Kafka's tools take it: the client security properties of every command that
reaches a broker, read once into kafka-python's arguments (zkcoord.security.client_config)."""

from __future__ import annotations

import argparse
from typing import Any

from zkcoord.errors import ConfigError
from zkcoord.security.client_config import kafka_python_security, parse_properties


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client security properties for the broker connection (security.protocol, sasl.mechanism, "
        "sasl.jaas.config, ssl.truststore.location as PEM, ...), as kafka-consumer-groups.sh --command-config",
    )


def command_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python's security arguments from --command-config (none without it)."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"--command-config {path}: {exc.strerror}") from None
    return kafka_python_security(parse_properties(text, path), f"--command-config {path}")
