"""Synthetic store snapshots with a known mix of agreement, lag and missing entries, for trying and
benchmarking the divergence report (deterministic for a seed)."""

from __future__ import annotations

import os
from pathlib import Path

# Per-partition case shares (out of 100): agree, broker ahead, zookeeper ahead, missing in broker,
# missing in zookeeper — roughly what a group half way through a migration looks like.
CASES = (
    (80, "agree"),
    (8, "broker-ahead"),
    (5, "zookeeper-ahead"),
    (4, "missing-in-broker"),
    (3, "missing-in-zookeeper"),
)


def write_synthetic(
    out: str | os.PathLike[str],
    *,
    groups: int = 10_000,
    partitions: int = 100,
    seed: int = 1,
    topics_per_group: int = 4,
) -> dict[str, int]:
    """zookeeper.parquet and broker.parquet under `out`; group i has `partitions` partitions spread over
    `topics_per_group` topics."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if groups < 1 or partitions < 1:
        raise ValueError("groups and partitions must be >= 1")
    rng = np.random.default_rng(seed)
    n = groups * partitions
    group_idx = np.repeat(np.arange(groups, dtype=np.int64), partitions)
    slot = np.tile(np.arange(partitions, dtype=np.int64), groups)
    per_topic = max(1, -(-partitions // topics_per_group))
    topic_idx = slot // per_topic
    partition = (slot % per_topic).astype(np.int32)
    zk = rng.integers(0, 10_000_000, n, dtype=np.int64)
    roll = rng.integers(0, 100, n)
    bounds = np.cumsum([share for share, _ in CASES])
    case = np.searchsorted(bounds, roll, side="right")
    delta = rng.integers(1, 5_000, n, dtype=np.int64)
    broker = zk.copy()
    broker[case == 1] += delta[case == 1]
    broker[case == 2] = np.maximum(zk[case == 2] - delta[case == 2], 0)
    zk[case == 2] = broker[case == 2] + delta[case == 2]
    has_broker = case != 3
    has_zk = case != 4
    group_names = np.array([f"group-{i:06d}" for i in range(groups)], dtype=object)[group_idx]
    topic_names = np.array([f"topic-{t}" for t in range(topics_per_group)], dtype=object)[topic_idx]
    Path(out).mkdir(parents=True, exist_ok=True)

    def table(mask: np.ndarray, offsets: np.ndarray) -> pa.Table:
        return pa.table(
            {
                "group": pa.array(group_names[mask], pa.string()),
                "topic": pa.array(topic_names[mask], pa.string()),
                "partition": pa.array(partition[mask], pa.int32()),
                "offset": pa.array(offsets[mask], pa.int64()),
            }
        )

    pq.write_table(table(has_zk, zk), Path(out) / "zookeeper.parquet")
    pq.write_table(table(has_broker, broker), Path(out) / "broker.parquet")
    return {"zookeeper": int(has_zk.sum()), "broker": int(has_broker.sum())}
