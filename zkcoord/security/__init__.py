"""Kafka's security model without I/O: SCRAM (RFC 5802/7677) and PLAIN server exchanges, SCRAM credentials in
Kafka's stored format, listener names and security protocols, and the ACL authorizer's decisions."""
