"""Local processes zkcoord starts for users, demos and tests: ZooKeeper servers and ensembles."""

from zkcoord.local.zookeeper import ZooKeeper, ZooKeeperNode, ZooKeeperUnavailable, free_port, server_mode

__all__ = ["ZooKeeper", "ZooKeeperNode", "ZooKeeperUnavailable", "free_port", "server_mode"]
