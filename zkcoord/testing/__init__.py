"""zkcoord's test kit: real ZooKeeper for pytest (the plugin) and real server-side fault injection.

    from zkcoord.testing import expire_session, drop_connection

    def test_member_survives_expiry(zk):          # `zk`: a kazoo client in a fresh chroot
        zk.create("/ids/me", ephemeral=True, makepath=True)
        expire_session(zk)                        # the server really deletes /ids/me
        assert zk.exists("/ids/me") is None

Ensemble faults go through the `zk_ensemble` fixture: `kill_node(i)`, `restart_node(i)`, `leader()`. Beyond
ZooKeeper: `spark_cluster` / `spark_connect` fixtures (SparkCluster, SparkConnectServer) and PrometheusServer.
Clients for migration tests, imported from their modules (they load the Kafka clients): a paced producer
(`zkcoord.testing.producers`), kafka-python, confluent-kafka and legacy members (`zkcoord.testing.members`).
"""

from zkcoord.local.zookeeper import ZooKeeper, free_port
from zkcoord.testing.plugin import ZooKeeperHandle, docker_available, start_zookeeper
from zkcoord.testing.prometheus import PrometheusServer
from zkcoord.testing.spark_cluster import SparkCluster, SparkConnectServer
from zkcoord.testing.waiting import wait_until
from zkcoord.zk.session import SessionFault, drop_connection, expire_session, wait_for

__all__ = [
    "PrometheusServer",
    "SessionFault",
    "SparkCluster",
    "SparkConnectServer",
    "ZooKeeper",
    "ZooKeeperHandle",
    "docker_available",
    "drop_connection",
    "expire_session",
    "free_port",
    "start_zookeeper",
    "wait_for",
    "wait_until",
]
