"""A member-by-member migration driven only by what `zkcoord migrate` prints (issue 25): real ZooKeeper, a real
`zkcoord serve --bridge-zk-groups --bridge-zk-offsets` node, two `zkcoord legacy consume` processes as the group's
ZooKeeper members. The test starts at `migrate plan` and then only does what the last output's "next" block says:
runs every `$ ` command as printed (`zkcoord ...` as `python -m zkcoord ...`, `kcat ...` as is), stops the
ZooKeeper member it names (the process that printed that consumer id), and at the point of no return restarts
the node without the bridge flags, until the tool says `done`. Required: every produced record consumed, the
bridge's znodes gone after the clean-up, and `status` showing a stopped broker-protocol member as GONE."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkcoord.cli import main
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.zk import registry

pytestmark = pytest.mark.e2e

GROUP = "orders"
TOPIC = "orders-t"
PARTITIONS = 4
BRIDGE_FLAGS = ("--bridge-zk-offsets", "--bridge-zk-groups", GROUP)
MAX_COMMANDS = 60  # a bound on the walk: a loop in the advice fails the test instead of hanging it


class Proc:
    """A child process whose stdout and stderr lines are collected by pump threads."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        self.out: list[str] = []
        self.err: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self.pumps:
            t.start()

    @staticmethod
    def _pump(stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line.rstrip("\n"))

    def terminate(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        rc = self.proc.wait(30)
        for t in self.pumps:
            t.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def zkcoord(argv: list[str]) -> list[str]:
    """A printed `zkcoord ...` command as this test runs it (the same program, this interpreter)."""
    assert argv[0] == "zkcoord", argv
    return [sys.executable, "-m", "zkcoord", *argv[1:]]


def run(argv: list[str]) -> tuple[int, str]:
    """A printed `zkcoord ...` command, run in this process (the same entry point as the installed `zkcoord`,
    without a second's interpreter start per command): its exit status and everything it printed."""
    assert argv[0] == "zkcoord", argv
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv[1:])
    return code, out.getvalue() + err.getvalue()


def next_block(output: str) -> list[str]:
    """The lines of the last "next" block of a command's output."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("next")]
    assert starts, output
    block = [lines[starts[-1]]]
    for line in lines[starts[-1] + 1 :]:
        if not line.startswith("    ") and not re.match(r"^\s+\d+\. ", line):
            break
        block.append(line)
    return block


def command_of(line: str) -> list[str]:
    return shlex.split(line.split("$ ", 1)[1])


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node",
        ("--zk", zk_connect, "--node-id", "1", f"--num.partitions={PARTITIONS}", *FAST_GROUP_FLAGS,
         "--zookeeper.session.timeout.ms=4000", *BRIDGE_FLAGS),
    )  # fmt: skip
    proc.start()
    try:
        yield proc
    finally:
        proc.kill9()


def test_member_by_member_migration_as_the_tool_prints_it(
    zk_connect: str, zk: Any, node: NodeProcess, tmp_path: Path
) -> None:
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=5)
    produced: list[str] = []

    def produce(n: int) -> None:
        values = [f"r{len(produced) + i}" for i in range(n)]
        futures = [producer.send(TOPIC, value=v.encode()) for v in values]
        producer.flush(30)
        for f in futures:
            f.get(10)
        produced.extend(values)

    produce(200)
    legacy: dict[str, Proc] = {}
    brokers: dict[str, Proc] = {}
    stopped: list[Proc] = []  # what they printed still counts
    try:
        for _ in range(2):  # the operator's ZooKeeper members, each saying who it is
            p = Proc(zkcoord(["zkcoord", "legacy", "consume", "--zk", zk_connect, "--group", GROUP,
                              "--topic", TOPIC, "--from-beginning", "--property", "auto.commit.interval.ms=200",
                              "--property", "zookeeper.session.timeout.ms=6000"]))  # fmt: skip
            wait_for(lambda p=p: any(" (group " in line for line in p.err), 30, "the member to say its id")
            cid = next(line for line in p.err if " (group " in line).split()[2]
            legacy[cid] = p

        def owns_all() -> bool:  # what each member printed at its last rebalance
            held: list[str] = []
            for cid, p in legacy.items():
                last = [line for line in list(p.err) if line.startswith(f"consumer id {cid} owns ")]
                if last and not last[-1].endswith("owns nothing"):
                    held += last[-1].split(" owns ", 1)[1].split(", ")
            return sorted(held) == sorted(f"{TOPIC}-{i}" for i in range(PARTITIONS))

        wait_for(owns_all, 60, "the two ZooKeeper members to say they own every partition", interval=0.1)

        state_dir = str(tmp_path / "state")
        cmd = ["zkcoord", "migrate", "plan", "--zk", zk_connect, "--bootstrap", node.bootstrap,
               "--group", GROUP, "--state-dir", state_dir]  # fmt: skip
        transcript: list[str] = []
        started: str | None = None  # client id of the last broker-protocol member started
        restarted = False
        gone_seen = False
        for _ in range(MAX_COMMANDS):
            rc, out = run(cmd)
            transcript.append(f"$ {shlex.join(cmd)} -> {rc}\n{out}")
            assert rc == 0, "\n".join(transcript[-3:])
            produce(20)  # the group keeps consuming new records throughout
            block = next_block(out)
            if block[0].strip().startswith("next: done"):
                break
            if cmd[2] == "status" and (
                block[0].strip().startswith("next: wait")
                or (started is not None and f"{started} (" not in out)
            ):
                # The tool says to wait (the group is settling, or the member just started has not joined yet):
                # re-run its command until it says something else, within a deadline, then act on that.
                joined = started

                def settled(cmd: list[str] = cmd, joined: str | None = joined) -> bool:
                    again = run(cmd)[1]
                    waiting = next_block(again)[0].strip().startswith("next: wait")
                    return not waiting and (joined is None or f"{joined} (" in again)

                wait_for(settled, 60, "status to stop saying wait", interval=0.5)
                continue
            started = None
            nxt: list[str] | None = None
            for line in block:
                if m := re.search(r"stop ZooKeeper member (\S+) ", line):
                    assert legacy[m.group(1)].terminate() == 0  # a clean shutdown: commits, then leaves
                    stopped.append(legacy.pop(m.group(1)))
                elif "$ kcat " in line:
                    argv = command_of(line)
                    started = next(a.split("=", 1)[1] for a in argv if a.startswith("client.id="))
                    brokers[started] = Proc(argv)
                elif (
                    "point of no return" in line
                    and "without --bridge-zk-groups and --bridge-zk-offsets" in line
                ):
                    node.stop()
                    # kcat exits once every broker it knows is down ("All broker connections are down:
                    # terminating"); an application's consumer would reconnect. So the kcat members are started
                    # again, with the command printed for them, once the node is back.
                    for name, p in brokers.items():
                        wait_for(lambda p=p: p.proc.poll() is not None, 30, f"kcat {name} to exit")
                    node.extra = tuple(f for f in node.extra if f not in BRIDGE_FLAGS)
                    node.start()
                    restarted = True
                    stopped.extend(brokers.values())
                    brokers = {name: Proc(p.argv) for name, p in brokers.items()}
                    # Their old member ids are gone from the coordinator's group: status shows them as gone.
                    status = [*cmd[:2], "status", *cmd[3:]]
                    gone = [f"GONE {name} (" for name in brokers]
                    wait_for(
                        lambda status=status, gone=gone: all(g in run(status)[1] for g in gone),
                        60,
                        "status to show them gone",
                    )
                    gone_seen = True
                elif "$ zkcoord " in line:
                    nxt = command_of(line)
            assert nxt is not None, block
            cmd = nxt
        else:
            raise AssertionError("the advice did not reach 'done':\n" + "\n".join(transcript[-4:]))

        steps = [t.split(" --zk")[0] for t in transcript]
        assert any("migrate dual-commit" in s for s in steps) and any("migrate verify" in s for s in steps)
        assert (
            sum("migrate finalize" in s for s in steps) == 2
        )  # finalize, then the clean-up after the restart
        assert restarted and gone_seen and not legacy and brokers
        assert "cleaned up the coordinator bridge's znodes of 2 broker-protocol member(s)" in transcript[-1]
        # The bridge's znodes are gone: no broker-protocol registration, owner or fence left.
        assert registry.read_owners(zk, GROUP) == {}
        assert zk.get_children(f"/consumers/{GROUP}/ids") == []
        assert not zk.exists(f"/zkcoord/mixed-groups/{GROUP}")
        # Every record produced, before and during the walk, was consumed by some member.
        wanted = set(produced)

        def consumed() -> set[str]:
            return {value for p in [*stopped, *brokers.values()] for value in list(p.out)}

        try:
            wait_for(lambda: wanted <= consumed(), 60, "every produced record consumed", interval=0.2)
        except Exception as exc:
            missing = sorted(wanted - consumed(), key=lambda v: int(v[1:]))
            raise AssertionError(
                f"{len(missing)} of {len(wanted)} never consumed: {missing[:20]}; "
                + "\n".join(transcript[-3:])
                + "\n".join(brokers[sorted(brokers)[0]].err[-30:])
            ) from exc
    finally:
        producer.close(5)
        for p in [*legacy.values(), *brokers.values()]:
            p.kill()
