"""Kafka client security settings as Kafka's tools take them (`--command-config FILE`, a properties file with
Kafka's client names) mapped, here and only here, to kafka-python's keyword arguments.

Guarantees: every key is known or refused by name (a typo never silently means "no security"); SASL
credentials come from `sasl.jaas.config` (PlainLoginModule / ScramLoginModule `username=... password=...`) or
librdkafka's `sasl.username`/`sasl.password`; TLS files must be PEM, as kafka-python reads only PEM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from zkcoord.errors import ConfigError

# Kafka's client property -> kafka-python's argument, for those that map one to one.
_DIRECT = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",  # librdkafka's spelling
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",  # librdkafka's spelling
    "ssl.keystore.location": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
}
_PEM_ONLY = ("ssl.truststore.type", "ssl.keystore.type")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_properties(text: str, source: str) -> dict[str, str]:
    """Java properties as Kafka's tools write them: `key=value` (or `key: value`), `#`/`!` comments."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if match is None:
            raise ConfigError(f"{source}:{number}: not key=value: {line!r}")
        out[match.group(1)] = match.group(2).strip()
    return out


def kafka_python_security(props: Mapping[str, str], source: str = "--command-config") -> dict[str, Any]:
    """kafka-python keyword arguments for Kafka client security properties."""
    out: dict[str, Any] = {}
    for key in sorted(props):
        value = props[key]
        if key in _DIRECT:
            out[_DIRECT[key]] = value
        elif key in _PEM_ONLY:
            if value.upper() != "PEM":
                raise ConfigError(f"{source}: {key}={value}: only PEM files can be used here")
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.lower() == "https"
        elif key == "sasl.jaas.config":
            options = dict(_JAAS_OPTION.findall(value))
            if "username" not in options or "password" not in options:
                raise ConfigError(f'{source}: sasl.jaas.config needs username="..." password="..."')
            out["sasl_plain_username"] = options["username"]
            out["sasl_plain_password"] = options["password"]
        else:
            raise ConfigError(f"{source}: unknown client security property {key!r}")
    protocol = out.get("security_protocol", "PLAINTEXT")
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"{source}: security.protocol {protocol!r} is not one of {', '.join(_PROTOCOLS)}")
    if protocol.startswith("SASL") and "sasl_plain_username" not in out:
        raise ConfigError(f"{source}: {protocol} needs sasl.jaas.config (or sasl.username and sasl.password)")
    return out


def read_command_config(path: str | None) -> dict[str, Any]:
    """kafka-python's security arguments from a `--command-config` properties file (none without one); a file
    that cannot be read or holds an unknown key is a ConfigError naming the file (and the key)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"--command-config {path}: {exc.strerror}") from None
    return kafka_python_security(parse_properties(text, path), f"--command-config {path}")
