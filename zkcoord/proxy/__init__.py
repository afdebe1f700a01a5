"""zkcoord in front of a cluster it did not start: a Kafka proxy over the brokers registered in ZooKeeper (docs/proxy.md)."""
