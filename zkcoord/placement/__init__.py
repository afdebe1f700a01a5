"""Where things live in a ZooKeeper-era cluster, decided without I/O: which live node leads each partition
(`leadership`) and which offsets partition, so which node, coordinates a group (`coordinator`)."""
