"""Pure 0.8-era ZooKeeper consumer protocol: znode paths, payload codecs, assignors, topic filters."""
