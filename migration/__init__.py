"""Migration from ZooKeeper offsets to the broker: bridge, export/import, workflow, comparison, Spark."""
