"""The ZooKeeper edge: kazoo sessions, the legacy member runtime, retries, registry reads and writes."""
