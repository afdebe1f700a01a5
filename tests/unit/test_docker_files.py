"""The Docker files stay valid without a Docker engine: structure, build context, and zkcoord commands that parse."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_has_three_zookeepers_and_two_zkcoord_nodes() -> None:
    services = compose()["services"]
    zks = sorted(name for name, s in services.items() if s.get("image", "").startswith("zookeeper:"))
    nodes = sorted(name for name, s in services.items() if "build" in s)
    assert zks == ["zk1", "zk2", "zk3"]
    assert nodes == ["zkcoord1", "zkcoord2"]
    assert sorted(str(services[z]["environment"]["ZOO_MY_ID"]) for z in zks) == ["1", "2", "3"]
    for z in zks:
        assert services[z]["environment"]["ZOO_SERVERS"].count("server.") == 3


def test_zkcoord_nodes_have_distinct_ids_and_build_from_the_repository() -> None:
    services = compose()["services"]
    ids = []
    for name in ("zkcoord1", "zkcoord2"):
        svc = services[name]
        assert (COMPOSE.parent / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
        cmd = svc["command"]
        assert cmd[0] == "serve"
        ids.append(cmd[cmd.index("--node-id") + 1])
        assert cmd[cmd.index("--zk") + 1] == "zk1:2181,zk2:2181,zk3:2181"
    assert ids == ["1", "2"]


def test_dockerfile_copies_only_what_exists() -> None:
    for src in re.findall(r"^COPY\s+(.+?)\s+\S+$", DOCKERFILE.read_text(), re.M):
        for part in src.split():
            assert (ROOT / part).exists(), f"Dockerfile copies {part}, which is not in the repository"
