"""`zkcoord legacy consume`: not built yet (placeholder; registered by zkcoord.cli.legacy)."""

from __future__ import annotations

import argparse


def register(legacy_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = legacy_sub.add_parser("consume", help="(not available yet)")
    parser.set_defaults(func=lambda args: print("zkcoord legacy consume: not available yet") or 1)
