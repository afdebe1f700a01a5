"""A standalone node's identity on disk: `DATA_DIR/meta.properties` (Kafka's file and keys: `version=0`,
`broker.id`, `cluster.id`), created once with a new cluster id and read on every later start.

The cluster id is what Metadata v2+ answers; tools use it to tell clusters apart, so it must survive restarts and
differ between deployments. A cluster node (`--zk`) takes `/cluster/id` instead (zkcoord.zk.registry).
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from zkcoord.errors import ConfigError

META_FILE = "meta.properties"
_MAX_BYTES = 64 * 1024


def new_cluster_id() -> str:
    """A random id as Kafka makes one (`Uuid.randomUuid().toString()`): 16 bytes, url-safe base64, 22 chars."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def parse_properties(text: str) -> dict[str, str]:
    """`key=value` lines of a Java properties file (comments `#`/`!`, blank lines; `:` also separates)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def read_or_create_cluster_id(data_dir: Path, node_id: int) -> str:
    """The cluster id in `data_dir/meta.properties`, creating the file (atomically, fsync'd) when absent;
    ConfigError naming the file when it exists but cannot be read or has no cluster.id."""
    path = data_dir / META_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        cluster_id = new_cluster_id()
        text = f"#zkcoord node identity (Kafka's meta.properties)\nversion=0\nbroker.id={node_id}\ncluster.id={cluster_id}\n"
        tmp = path.with_name(META_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return cluster_id
    if len(raw) > _MAX_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes, not a meta.properties file")
    try:
        props = parse_properties(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not text ({exc})") from None
    cluster_id = props.get("cluster.id", "")
    if not cluster_id:
        raise ConfigError(f"{path} has no cluster.id: restore it, or remove the file to get a new id")
    return cluster_id
