"""Logging choices shared by the sub-commands."""

from __future__ import annotations

import argparse
import logging


def quiet_client_logs(args: argparse.Namespace) -> None:
    """Commands that break connections on purpose (comparison churn) hide the client libraries' expected
    connection warnings unless -v was given."""
    if not getattr(args, "verbose", 0):
        for name in ("kafka", "kazoo"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
