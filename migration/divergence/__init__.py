"""Offset divergence across many groups: store snapshots to Parquet, pure Spark transforms, the job."""
