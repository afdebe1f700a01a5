"""Kafka client security properties mapped to kafka-python's arguments."""

from __future__ import annotations

import pytest

from zkcoord.errors import ConfigError
from zkcoord.security.client_config import kafka_python_security, parse_properties

KAFKA_FILE = """# as for kafka-consumer-groups.sh --command-config
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3 cr=t";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/ca.pem
ssl.endpoint.identification.algorithm=
"""


def test_kafka_names_map_to_kafka_python() -> None:
    assert kafka_python_security(parse_properties(KAFKA_FILE, "f")) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3 cr=t",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }


def test_librdkafka_spellings() -> None:
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "a",
             "sasl.password": "b"}  # fmt: skip
    assert kafka_python_security(props)["sasl_plain_username"] == "a"


@pytest.mark.parametrize(
    ("props", "reason"),
    [
        ({"security.protocoll": "SSL"}, "security.protocoll"),
        ({"security.protocol": "TLS"}, "TLS"),
        ({"security.protocol": "SASL_SSL"}, "needs sasl.jaas.config"),
        ({"ssl.truststore.type": "JKS"}, "only PEM"),
        ({"sasl.jaas.config": 'x required username="a";'}, "password"),
    ],
)
def test_refused_by_name(props: dict[str, str], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        kafka_python_security(props)


def test_properties_syntax() -> None:
    assert parse_properties("a = 1\n! c\nb: x=y\n", "f") == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="f:2"):
        parse_properties("a=1\njunk\n", "f")
