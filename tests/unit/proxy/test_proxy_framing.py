"""The proxy's frame cutter (`forward._Frames`), fed by hypothesis: whatever the frame sizes and however the kernel
splits the bytes (any receive may end anywhere inside the view the proxy offers), the frames handed on are the
frames sent, whole and in order; at most TAIL bytes of a frame are moved between buffers; a receive never reaches
past a large frame's end; buffers are reused only when nothing of them waits to be written."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.proxy import forward


class _Transport(asyncio.Transport):
    """The part of an asyncio transport a `_Frames` calls (reading paused or not, and whether it is closing)."""

    def __init__(self) -> None:
        self.paused = False

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False


class _Link:
    """What a `_Frames` asks of its link: whether its buffer may be received into again."""

    def __init__(self, released: bool) -> None:
        self._released = released

    def released(self, side: Any) -> bool:
        return self._released

    def flush(self) -> None:
        pass


sizes = st.one_of(
    st.integers(0, 300),
    st.integers(forward.TAIL - 20, forward.TAIL + 20),
    st.integers(forward.BIG_FRAME - 10, forward.BIG_FRAME + 10),
    st.integers(forward.CHUNK - 10, forward.CHUNK + 10),
    st.integers(4 * forward.CHUNK, 4 * forward.CHUNK + 8),
)


@settings(max_examples=100, deadline=None)
@given(
    bodies=st.lists(sizes, min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 1 << 20), min_size=1, max_size=40),
    released=st.booleans(),
)
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(
    bodies: list[int], cuts: list[int], released: bool
) -> None:
    frames = [struct.pack(">i", n) + bytes([i % 251]) * n for i, n in enumerate(bodies)]
    stream = b"".join(frames)
    got: list[bytes] = []
    views: list[
        memoryview
    ] = []  # what was handed on (as the link would write it); checked unchanged at the end

    def on_frame(buf: memoryview, s: int, e: int) -> bool:
        got.append(bytes(buf[s:e]))
        views.append(buf[s:e])
        return True

    side = forward._Frames(on_frame, lambda size: None, _Link(released))  # type: ignore[arg-type]
    side.connection_made(_Transport())  # type: ignore[arg-type]
    pos, turn = 0, 0
    while pos < len(stream):
        view = side.get_buffer(-1)
        assert len(view) > 0
        frame_end = side.start + side.need
        if side.need >= forward.BIG_FRAME:
            assert side.end + len(view) <= frame_end  # a large frame is received up to its end, no further
        n = min(len(view), max(cuts[turn % len(cuts)], len(stream) // 400), len(stream) - pos)
        turn += 1
        view[:n] = stream[pos : pos + n]
        pos += n
        side.buffer_updated(n)
    assert got == frames
    if not released:  # nothing handed on was overwritten while it (would have) waited to be written
        assert [bytes(v) for v in views] == frames
    assert side.carried <= len(frames) * (forward.TAIL + 4)
