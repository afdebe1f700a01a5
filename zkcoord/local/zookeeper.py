"""Local ZooKeeper processes: a standalone server or an N-node ensemble on loopback, started from the
installed jars (optionally requiring SASL DIGEST-MD5 logins from a user list), ready only when the server says
it serves, and always stopped (even on interpreter exit).

Used by `zkcoord zk start`, `zkcoord demo`, comparison runs and the pytest plugin alike.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.errors import ErrorCode, ZkcoordError

log = logging.getLogger(__name__)

DEBIAN_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
READY_MODES = ("standalone", "leader", "follower")
# A server that requires SASL: ZooKeeper 3.7+'s enforce.auth refuses every request of a session that has not
# logged in with one of these schemes (it still accepts the TCP connection).
SASL_SERVER_CONFIG = (
    "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    "enforce.auth.enabled=true",
    "enforce.auth.schemes=sasl",
)
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


class ZooKeeperUnavailable(ZkcoordError):
    """No ZooKeeper can be started here (no jars, no java) or it did not come up in time."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable = False


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (ZooKeeper rejects clientPort=0, so we must pick one)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def zookeeper_classpath() -> str:
    """The server classpath: $ZKCOORD_ZK_CLASSPATH, the Debian package, or the jars inside pyspark."""
    override = os.environ.get("ZKCOORD_ZK_CLASSPATH")
    if override:
        return override
    if os.path.exists(DEBIAN_JARS[0]):
        return ":".join(p for p in DEBIAN_JARS if os.path.exists(p))
    with contextlib.suppress(ImportError):
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        zk = sorted(glob.glob(str(jars / "zookeeper-3*.jar")))
        if zk:
            return f"{jars}/*"
    raise ZooKeeperUnavailable(
        "no ZooKeeper jars found: install the Debian package 'zookeeper' (bash scripts/setup.sh does), "
        "or set ZKCOORD_ZK_CLASSPATH"
    )


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a four-letter command and return the whole reply ('' when the port does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def server_mode(host: str, port: int) -> str | None:
    """'standalone', 'leader' or 'follower' when the server serves requests; None otherwise."""
    for line in four_letter_word(host, port).splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def server_jaas(users: Mapping[str, str]) -> str:
    """The JAAS `Server` section that lets each user log in with SASL DIGEST-MD5 (`user_NAME="PASSWORD"`)."""
    for name in users:
        if not name or not all(c.isalnum() or c in "_-." for c in name):
            raise ValueError(f"a SASL user name is letters, digits, '_', '-' or '.', got {name!r}")
    options = "".join(f"\n  user_{name}={_jaas_quote(pw)}" for name, pw in sorted(users.items()))
    return f"Server {{\n  {DIGEST_LOGIN_MODULE} required{options};\n}};\n"


def read_sasl_users(path: str | os.PathLike[str]) -> dict[str, str]:
    """A user list for a SASL ZooKeeper: one `name=password` a line; blank lines and '#' comments skipped."""
    users: dict[str, str] = {}
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{path} line {n}: expected name=password, got {line!r}")
        if name.strip() in users:
            raise ValueError(f"{path} line {n}: user {name.strip()!r} given twice")
        users[name.strip()] = password
    if not users:
        raise ValueError(f"{path}: no users (one name=password a line)")
    return users


_live: set[ZooKeeperNode] = set()
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _live_lock:
        nodes = list(_live)
    for node in nodes:
        node.stop()


atexit.register(_stop_all_at_exit)


@dataclass(eq=False)
class ZooKeeperNode:
    """One ZooKeeper JVM: its config, data directory, log file and process."""

    myid: int
    client_port: int
    data_dir: Path
    quorum_port: int = 0
    election_port: int = 0
    host: str = "127.0.0.1"
    tick_time_ms: int = 2000
    heap: str = "128m"
    peers: list[ZooKeeperNode] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    sasl_users: Mapping[str, str] | None = None  # set: the server requires a SASL DIGEST-MD5 login

    @property
    def jaas_path(self) -> Path:
        return self.data_dir / "jaas-server.conf"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def cfg_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={self.data_dir.resolve()}",
            f"clientPort={self.client_port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,cons,dump",
            "maxClientCnxns=0",
        ]
        if self.sasl_users:
            lines += SASL_SERVER_CONFIG
            self.jaas_path.write_text(server_jaas(self.sasl_users))
            self.jaas_path.chmod(0o600)
        if self.peers:
            lines += [f"server.{p.myid}={p.host}:{p.quorum_port}:{p.election_port}" for p in self.peers]
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        self.cfg_path.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        if self.running:
            return
        self.write_config()
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperUnavailable("java is not on PATH: ZooKeeper needs a JRE (17)")
        cmd = [
            java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            *([f"-Djava.security.auth.login.config={self.jaas_path.resolve()}"] if self.sasl_users else []),
            "-cp", zookeeper_classpath(), MAIN_CLASS, str(self.cfg_path.resolve()),
        ]  # fmt: skip
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed after Popen
        try:
            self.process = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        finally:
            logf.close()
        with _live_lock:
            _live.add(self)
        log.info("zookeeper myid=%d pid=%d port=%d started", self.myid, self.process.pid, self.client_port)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def mode(self) -> str | None:
        return server_mode(self.host, self.client_port) if self.running else None

    def kill(self) -> None:
        """SIGKILL, as a crash would: no clean shutdown, sessions stay until they time out."""
        self._signal_and_reap(signal.SIGKILL, grace=0.0)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (ZooKeeper stops in about 0.4 s), SIGKILL after `timeout`."""
        self._signal_and_reap(signal.SIGTERM, grace=timeout)

    def _signal_and_reap(self, sig: signal.Signals, grace: float) -> None:
        proc = self.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace if grace > 0 else 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.process = None
        with _live_lock:
            _live.discard(self)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ZooKeeper:
    """A standalone server (size 1) or an ensemble on loopback: `with ZooKeeper.start(3) as zk: zk.hosts`."""

    def __init__(self, nodes: list[ZooKeeperNode], base_dir: Path, owns_dir: bool) -> None:
        self.nodes = nodes
        self.base_dir = base_dir
        self._owns_dir = owns_dir

    @classmethod
    def start(
        cls,
        size: int = 1,
        *,
        base_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        tick_time_ms: int = 2000,
        timeout: float = 60.0,
        sasl_users: Mapping[str, str] | None = None,
        heap: str = ZooKeeperNode.heap,
    ) -> ZooKeeper:
        """Start `size` nodes; with `sasl_users` ({name: password}) every node requires a SASL DIGEST-MD5 login
        as one of them (clients log in with a JAAS `Client` section). `heap` is each JVM's -Xmx: the default
        suits tests; a run that writes megabytes a second (the coordinator's records in cluster mode) needs more,
        as ZooKeeper holds every znode and its recent transactions in memory."""
        if size < 1:
            raise ValueError(f"ensemble size must be at least 1, got {size}")
        owns_dir = base_dir is None
        base = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="zkcoord-zk-"))
        nodes: list[ZooKeeperNode] = []
        for i in range(1, size + 1):
            client_port = port + i - 1 if port is not None else free_port()
            node = ZooKeeperNode(
                myid=i,
                client_port=client_port,
                data_dir=base / (f"node{i}" if size > 1 else "standalone"),
                tick_time_ms=tick_time_ms,
                heap=heap,
                sasl_users=dict(sasl_users) if sasl_users else None,
            )
            if size > 1:
                node.quorum_port, node.election_port = free_port(), free_port()
            nodes.append(node)
        if size > 1:
            for node in nodes:
                node.peers = nodes
        zk = cls(nodes, base, owns_dir)
        try:
            for node in nodes:
                node.start()
            zk.wait_ready(timeout)
        except BaseException:
            zk.stop()
            raise
        return zk

    @property
    def hosts(self) -> str:
        """The connect string of every node, e.g. '127.0.0.1:40001,127.0.0.1:40002'."""
        return ",".join(n.address for n in self.nodes)

    def wait_ready(self, timeout: float = 60.0, nodes: list[ZooKeeperNode] | None = None) -> None:
        """Until every (given) node answers srvr with a serving Mode and, for an ensemble, one is leader."""
        targets = nodes if nodes is not None else [n for n in self.nodes if n.running]
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n in targets if not n.running]
            if dead:
                raise ZooKeeperUnavailable(
                    f"zookeeper myid={dead[0].myid} exited with code {dead[0].process and dead[0].process.returncode}"
                    f"; log tail:\n{dead[0].log_tail()}"
                )
            modes = [n.mode() for n in targets]
            if all(m in READY_MODES for m in modes) and (
                len(self.nodes) == 1 or "leader" in self._all_modes()
            ):
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {n.myid}\n{n.log_tail(20)}" for n in targets)
                raise ZooKeeperUnavailable(
                    f"zookeeper not serving after {timeout:.0f}s (modes {modes})\n{tails}"
                )
            time.sleep(0.05)

    def _all_modes(self) -> list[str | None]:
        return [n.mode() for n in self.nodes if n.running]

    def leader(self) -> int:
        """Index (0-based) of the node that serves as leader (or the standalone server)."""
        for i, node in enumerate(self.nodes):
            if node.mode() in ("leader", "standalone"):
                return i
        raise ZooKeeperUnavailable("no node reports Mode: leader")

    def kill_node(self, i: int) -> None:
        self.nodes[i].kill()

    def restart_node(self, i: int, timeout: float = 60.0) -> None:
        self.nodes[i].start()
        self.wait_ready(timeout, nodes=[self.nodes[i]])

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tails(self, lines: int = 60) -> str:
        return "\n".join(
            f"--- zookeeper node {n.myid} ({n.log_path})\n{n.log_tail(lines)}" for n in self.nodes
        )

    def __enter__(self) -> ZooKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
