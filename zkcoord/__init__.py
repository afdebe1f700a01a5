"""zkcoord: ZooKeeper-era Kafka consumer groups, a broker-protocol group coordinator, and the bridge between them."""

__version__ = "0.1.0"
