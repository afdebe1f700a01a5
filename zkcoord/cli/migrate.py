"""`zkcoord migrate`: not built yet (placeholder so the command table is stable while it is)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("migrate", help="(not available yet)")
    parser.set_defaults(func=lambda args: print("zkcoord migrate: not available yet") or 1)
