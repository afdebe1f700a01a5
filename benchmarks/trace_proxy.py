"""Where a `zkcoord proxy` process spends the latency it adds: the proxy run with probes, their figures written as JSON.

    ZKCOORD_PROXY_TRACE=/tmp/trace.json python -m benchmarks.trace_proxy proxy --zk ... (the `zkcoord` arguments)

`bench_proxy --trace FILE` starts its proxy this way. Measured, from start-up to SIGTERM:
- event-loop lag: a 1 ms timer's lateness (how long a ready socket can wait for the loop);
- the time each read callback takes, on the wall clock and on the thread's CPU clock (receive into the buffer ->
  the frames written on; wall minus CPU is the time the thread was preempted meanwhile), and how many frames a
  callback hands on;
- writes the socket did not take at once (bytes left in asyncio's buffer), and flow-control pauses;
- cyclic GC pauses (gc.callbacks);
- the process's CPU time and its time runnable but not running (/proc/self/schedstat: run-queue delay, the share
  of the tail no code in the proxy can remove);
- TCP_NODELAY of every socket written on.
With ZKCOORD_PROXY_TRACE_UVLOOP=1 the proxy runs on uvloop's loop instead (a trial: uvloop must be installed); with
ZKCOORD_PROXY_TRACE_NICE=N at niceness N (a trial of CPU priority: -10 needs root).
Probes only: the proxy's code is the one `zkcoord proxy` runs (wrapped methods, same arguments).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import os
import socket
import sys
import time
from typing import Any

from zkcoord.cli import main as zkcoord_main
from zkcoord.cli import proxy as cli_proxy
from zkcoord.proxy import forward

_ns = time.perf_counter_ns
stats: dict[str, Any] = {"lag_us": [], "callback_us": [], "callback_cpu_us": [], "frames_per_callback": [], "gc_us": [],
                         "gc_full": 0, "unsent_writes": 0, "writes": 0, "peer_holds": 0,
                         "nodelay": {"on": 0, "off": 0}}  # fmt: skip
_checked: set[int] = set()


def _schedstat() -> tuple[int, int, int]:
    """(ns on CPU, ns runnable waiting, timeslices) of this process's threads summed."""
    cpu = wait = slices = 0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            a, b, c = (int(x) for x in f.read().split())
        cpu, wait, slices = cpu + a, wait + b, slices + c
    return cpu, wait, slices


def _pct(xs: list[int], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return float(xs[int(q * (len(xs) - 1))])


def _summary() -> dict[str, Any]:
    cpu, wait, slices = _schedstat()
    c0, w0, s0 = stats["sched_start"]
    out: dict[str, Any] = {}
    for key in ("lag_us", "callback_us", "callback_cpu_us", "frames_per_callback", "gc_us"):
        xs = stats[key]
        out[key] = {"n": len(xs), "p50": _pct(xs, 0.5), "p99": _pct(xs, 0.99), "p999": _pct(xs, 0.999),
                    "max": max(xs, default=0), "sum": sum(xs)}  # fmt: skip
    for key in ("gc_full", "unsent_writes", "writes", "peer_holds", "nodelay"):
        out[key] = stats[key]
    dslices = max(1, slices - s0)
    out["sched"] = {"cpu_s": (cpu - c0) / 1e9, "runqueue_wait_s": (wait - w0) / 1e9, "slices": slices - s0,
                    "wait_per_slice_us": (wait - w0) / 1e3 / dslices}  # fmt: skip
    return out


def _dump() -> None:
    path = os.environ.get("ZKCOORD_PROXY_TRACE")
    if path:
        with open(path, "w") as f:
            json.dump(_summary(), f, indent=1)


def _gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        stats["_gc_t"] = _ns()
    else:
        stats["gc_us"].append((_ns() - stats.pop("_gc_t", _ns())) // 1000)
        if info.get("generation") == 2:
            stats["gc_full"] += 1


async def _lag_probe() -> None:
    period = 0.001
    while True:
        t = _ns()
        await asyncio.sleep(period)
        stats["lag_us"].append(max(0, (_ns() - t) // 1000 - 1000))


_frames = [0]
_orig_updated = forward._Frames.buffer_updated


def _buffer_updated(self: forward._Frames, nbytes: int) -> None:
    t, c = _ns(), time.thread_time_ns()
    _frames[0] = 0
    _orig_updated(self, nbytes)
    stats["callback_us"].append((_ns() - t) // 1000)
    stats["callback_cpu_us"].append((time.thread_time_ns() - c) // 1000)
    stats["frames_per_callback"].append(_frames[0])


_orig_frames_init = forward._Frames.__init__


def _frames_init(self: forward._Frames, on_frame: Any, *args: Any) -> None:
    def counted(buf: memoryview, s: int, e: int) -> bool:
        _frames[0] += 1
        return bool(on_frame(buf, s, e))

    _orig_frames_init(self, counted, *args)


def _check_write(transport: Any) -> None:
    stats["writes"] += 1
    if transport.get_write_buffer_size():
        stats["unsent_writes"] += 1
    sock = transport.get_extra_info("socket")
    if sock is not None and id(transport) not in _checked:
        _checked.add(id(transport))
        on = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        stats["nodelay"]["on" if on else "off"] += 1


_orig_write_up, _orig_write_down = forward.Link._write_up, forward.Link._write_down


def _write_up(self: forward.Link) -> None:
    run = self._up_run
    _orig_write_up(self)
    if run is not None and self.broker is not None and self.broker.transport is not None:
        _check_write(self.broker.transport)


def _write_down(self: forward.Link) -> None:
    run = self._down_run
    _orig_write_down(self)
    if run is not None and self.client.transport is not None:
        _check_write(self.client.transport)


_orig_hold = forward._Frames.hold


def _hold(self: forward._Frames, reason: str) -> None:
    if reason == "peer":
        stats["peer_holds"] += 1
    _orig_hold(self, reason)


_orig_run = cli_proxy._run


async def _run(node: Any) -> int:
    probe = asyncio.get_running_loop().create_task(_lag_probe())
    try:
        return await _orig_run(node)
    finally:
        probe.cancel()


def install() -> None:
    stats["sched_start"] = _schedstat()
    forward._Frames.buffer_updated = _buffer_updated  # type: ignore[method-assign]
    forward.Link._write_up = _write_up  # type: ignore[method-assign]
    forward.Link._write_down = _write_down  # type: ignore[method-assign]
    forward._Frames.hold = _hold  # type: ignore[method-assign]
    forward._Frames.__init__ = _frames_init  # type: ignore[method-assign]
    cli_proxy._run = _run
    gc.callbacks.append(_gc)
    atexit.register(_dump)


if __name__ == "__main__":
    if os.environ.get("ZKCOORD_PROXY_TRACE_UVLOOP"):  # a trial of uvloop's loop under the same probes
        import uvloop

        uvloop.install()
    if os.environ.get("ZKCOORD_PROXY_TRACE_NICE"):  # a trial of CPU priority (a negative value needs root)
        os.nice(int(os.environ["ZKCOORD_PROXY_TRACE_NICE"]))
    install()
    sys.exit(zkcoord_main(sys.argv[1:]))
