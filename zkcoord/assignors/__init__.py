"""Pure broker-protocol assignors: range, roundrobin, sticky, cooperative-sticky."""
