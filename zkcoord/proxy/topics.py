"""The cluster's topics as the proxy's coordinator needs them, asked of the cluster's brokers (Metadata): for
consumer-protocol (KIP-848) members each subscribed topic's id and partition count, since the assignments a
ConsumerGroupHeartbeat carries name topics by the ids the members' own Metadata requests (forwarded to the brokers)
show them; for OffsetCommit each committed topic's partition count, since a partition the cluster lacks is
answered UNKNOWN_TOPIC_OR_PARTITION and not stored, as Kafka's own coordinator answers it.

`lookup(name)` (id and count) and `partitions(name)` (count) are the group service's synchronous lookups: they
answer from a cache and ask the cluster in the background for a name it has not seen or has not refreshed for
REFRESH_S (so a partition increase reaches the group within about that); `fetch(names)` awaits an answer (bounded
by the request timeout) before a heartbeat naming new topics, or a commit naming partitions the cache does not
have (`unsure`), is dispatched: so a member's first heartbeat already gets its partitions, and a topic created a
moment ago is committed to, not refused. A broker without topic ids (Metadata below v10: Kafka before 2.8) yields
counts but no ids: consumer-protocol members then get no assignment and the proxy logs why; one below Metadata v4
(Kafka before 0.11, where a Metadata request naming a topic creates it under auto.create.topics.enable) is asked
for every topic instead. Bounded: at most MAX_TOPICS names cached, at most one request in flight, a name its cache
refuses a commit for asked again at most every RECHECK_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from zkcoord.errors import ZkcoordError
from zkcoord.proxy.upstream import PLAINTEXT, UpstreamSecurity
from zkcoord.ratelog import RateLimitedLog
from zkcoord.server import kafka_protocol as kp

log = logging.getLogger(__name__)
_say = RateLimitedLog(log, burst=5, window_s=60.0)

REFRESH_S = 5.0  # a cached topic older than this is asked again at its next lookup
RECHECK_S = (
    1.0  # a commit naming partitions the cache lacks waits for the cluster's answer unless this recent
)
MAX_TOPICS = 10_000  # names cached; the oldest are dropped beyond it
MAX_FRAME = 64 * 1024 * 1024  # the largest Metadata answer taken
METADATA_VERSION = 12  # the highest asked (topic ids from v10)
CLIENT_ID = "zkcoord-proxy"

Entry = tuple[str, int] | None  # (topic id hex, partitions), None: the cluster has no such topic (or no id)
Known = (
    tuple[str | None, int] | None
)  # (topic id hex or None: the broker gives none, partitions); None: no topic


class ClusterTopics:
    """Topic ids and partition counts of the cluster behind the proxy; `broker()` gives a live broker's address
    (None: none is known). Use `lookup` from any thread, `fetch` on the loop, `close` when done."""

    def __init__(
        self,
        broker: Callable[[], tuple[str, int] | None],
        security: UpstreamSecurity = PLAINTEXT,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._broker, self._security, self._timeout_s, self._clock = broker, security, timeout_s, clock
        self._cache: dict[
            str, tuple[float, Known]
        ] = {}  # name -> (when asked, answer), insertion = age order
        self._wanted: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    def lookup(self, name: str) -> Entry:
        """(topic id, partitions) of a topic with an id; None: no such topic, or the broker gives no ids."""
        found = self._look(name)
        if found is None or found[0] is None or not found[1]:
            return None
        return found[0], found[1]

    def partitions(self, name: str) -> int | None:
        """The topic's partition count (Kafka's metadata cache); None: no such topic, or not asked yet."""
        found = self._look(name)
        return found[1] if found is not None else None

    def _look(self, name: str) -> Known:
        found = self._cache.get(name)
        if found is None or self._clock() - found[0] > REFRESH_S:
            loop = self._loop
            if loop is not None and not loop.is_closed() and not self._closed:
                loop.call_soon_threadsafe(self._want, (name,))
        return found[1] if found is not None else None

    def known(self, name: str) -> bool:
        return name in self._cache

    def unsure(self, highest: dict[str, int]) -> list[str]:
        """Of `highest` (topic -> the highest partition a commit names), the topics whose cached answer would refuse
        it (never asked, no such topic, too few partitions) and is older than RECHECK_S: ask before answering."""
        now = self._clock()
        out = []
        for name, top in highest.items():
            found = self._cache.get(name)
            refused = found is not None and (found[1] is None or top >= found[1][1])
            if found is None or (refused and now - found[0] > RECHECK_S):
                out.append(name)
        return out

    def names(self) -> tuple[str, ...]:
        """The cluster topics looked up so far that exist with an id (what a regex subscription resolves against)."""
        return tuple(
            name for name, (_, entry) in self._cache.items() if entry is not None and entry[0] is not None
        )

    async def fetch(self, names: Iterable[str]) -> None:
        """Ask the cluster about `names` (with whatever else is wanted) and wait for the answer; a failure is
        logged, not raised (the group service then sees the topics as absent until a later lookup succeeds)."""
        self._want(names)
        task = self._task
        if task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(task)

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()

    # -- the loop's side --------------------------------------------------------------------------------------

    def _want(self, names: Iterable[str]) -> None:
        self._wanted.update(names)
        if self._task is None and self._wanted and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._wanted and not self._closed:
                names, self._wanted = sorted(self._wanted), set()
                try:
                    found = await asyncio.wait_for(self._ask(names), self._timeout_s)
                except (OSError, EOFError, TimeoutError, ZkcoordError, kp.ProtocolError) as exc:
                    _say.log(logging.WARNING, "metadata", "proxy: asking the cluster for topics %s failed: %r",
                             names[:5], exc)  # fmt: skip
                    return  # asked again at the next lookup
                now = self._clock()
                for name in names:
                    self._cache.pop(name, None)
                    self._cache[name] = (now, found.get(name))
                while len(self._cache) > MAX_TOPICS:
                    del self._cache[next(iter(self._cache))]
        finally:
            self._task = None

    async def _ask(self, names: list[str]) -> dict[str, tuple[str | None, int]]:
        address = self._broker()
        if address is None:
            raise ZkcoordError("no live broker in /brokers/ids")
        reader, writer = await self._security.connect(*address)
        try:
            writer.write(kp.encode_request(kp.API_VERSIONS, 0, 1, CLIENT_ID))
            corr, top = kp.metadata_max_version(await _answer(reader))
            _expect(corr, 1)
            if top < 0:
                raise ZkcoordError(f"broker {address[0]}:{address[1]} lists no Metadata version")
            version = min(top, METADATA_VERSION)
            if version < 10:
                _say.log(logging.WARNING, "no_ids", "proxy: broker %s:%d answers Metadata up to v%d, without topic "
                         "ids: consumer-protocol (KIP-848) members get no partitions (Kafka 2.8+ brokers give ids)",
                         *address, top)  # fmt: skip
            # Below v4 a request naming a topic may create it: ask for every topic.
            writer.write(kp.topic_metadata_request(version, 2, CLIENT_ID, names if version >= 4 else None))
            corr, found = kp.topic_partitions(version, await _answer(reader))
            _expect(corr, 2)
            return found
        finally:
            writer.close()


async def _answer(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if not 4 <= size <= MAX_FRAME:
        raise kp.MalformedFrame(f"broker answered a frame of {size} bytes, expected 4..{MAX_FRAME}")
    return await reader.readexactly(size)


def _expect(answered: int, asked: int) -> None:
    if answered != asked:
        raise kp.MalformedFrame(f"broker answered correlation id {answered}, expected {asked}")
