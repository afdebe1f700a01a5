"""The ZooKeeper-era cluster: broker registry, controller, coordinator lookup and failover."""
