"""One stream reader per event loop: the web tier's way to follow Redis Streams.

Every socket and SSE response of a web process follows streams (a reply's tokens, a
conversation's live events) through one `StreamReader`, which runs a single blocking
`XREAD` over every key anyone follows and fans the entries out to bounded per-follower
buffers. A web process therefore holds a constant number of Redis connections (this
reader's one, plus the short-command pool), whatever the number of sockets: the design of
Centrifugo, Phoenix PubSub and AnyCable (one subscriber per node, fan-out in memory).

Following, unfollowing and resuming are in-memory registrations. When a follower is added
the blocked `XREAD` is woken through a per-reader wake stream (an entry there ends the
block at once, and an entry written before the block began still ends it, so a follow is
never missed). Keys are read from the oldest cursor of their followers; each follower
keeps its own cursor, so a resume from an early index and a live follower share one key.

Backpressure without loss: a follower whose buffer is full is dropped from the shared
read ("lagging"); it then reads its key itself with `XRANGE` from its own cursor as its
consumer drains it, and rejoins the shared read once caught up. A stalled consumer costs
the others nothing, and memory stays bounded by the buffer size.

Listener leases (the model workers cancel a request nobody listens to) are renewed for
all followers of the process in one pipeline, not one round trip per follower.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections import deque

import redis
import redis.asyncio as aioredis

log = logging.getLogger(__name__)

Entry = tuple[str, dict]  # (stream entry id, fields) with bytes decoded by the caller

BLOCK_MS = 15_000  # one XREAD's block; woken early by a follow
BUFFER = 512  # entries a follower may have unread before it reads for itself
XREAD_COUNT = 256  # entries per key per read
# The listener lease (the model workers cancel a request whose lease lapsed): set at
# submit, renewed every LISTENER_TTL_S / 3 while someone follows the reply.
LISTENER_TTL_S = 30
LEASE_EVERY_S = LISTENER_TTL_S / 3
RETRY_MAX_S = 2.0
WAKE_MAXLEN = 16
WAKE_TTL_S = 24 * 3600


def _sid(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Follower:
    """One follower of one stream key. `next()` returns the entries after its cursor,
    oldest first, or [] when `timeout` passed without any (callers use it to check
    their deadlines)."""

    def __init__(self, reader: StreamReader, key: str, after: str, lease: str | None):
        self.reader, self.key, self.lease = reader, key, lease
        self.cursor = _sid(after)
        self.buffer: deque[Entry] = deque()
        self.lagging = False  # dropped from the shared read: reads with XRANGE itself
        self.closed = False
        self._ready = asyncio.Event()

    def offer(self, entries: list[Entry]) -> None:
        """The reader's delivery: what is newer than the cursor, or lag when full."""
        if self.lagging:
            # Off the shared read: what comes now may start past entries it has not read
            # (the read went from the others' cursors). Its own XRANGE reads them in order.
            self._ready.set()
            return
        fresh = [e for e in entries if _sid(e[0]) > self.cursor]
        if not fresh:
            return
        if len(self.buffer) + len(fresh) > BUFFER:
            self.lagging = True  # the rest is read from Redis when the consumer catches up
        else:
            self.buffer.extend(fresh)
            self.cursor = _sid(fresh[-1][0])
        self._ready.set()

    async def next(self, timeout: float) -> list[Entry]:
        if not self.buffer and self.lagging:
            await self._catch_up()
        if not self.buffer:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
            if not self.buffer and self.lagging:
                await self._catch_up()
        out = list(self.buffer)
        self.buffer.clear()
        return out

    async def _catch_up(self) -> None:
        """Read what the shared read skipped for this follower, from its own cursor."""
        start = "({}-{}".format(*self.cursor)
        rows = await self.reader.commands.xrange(self.key, min=start, max="+", count=BUFFER)
        entries = [(_text(i), f) for i, f in rows]
        if entries:
            self.buffer.extend(entries)
            self.cursor = _sid(entries[-1][0])
        if len(entries) < BUFFER:
            self.lagging = False
            self.reader.rejoin(self)

    def close(self) -> None:
        self.reader.unfollow(self)


class StreamReader:
    """Reads every followed key in one blocking XREAD on a connection of its own.

    `commands` is the short-command client (bounded, waiting pool) used for catch-up
    reads, wake-ups and leases."""

    def __init__(self, url: str, commands: aioredis.Redis, *, block_ms: int = BLOCK_MS, name: str | None = None):
        self.url, self.commands, self.block_ms, self.name = url, commands, block_ms, name
        self.followers: dict[str, set[Follower]] = {}
        self.wake_key = f"tandem:reader:{uuid.uuid4().hex}:wake"
        self._wake_cursor = "0-0"
        self._wake_sent = False
        self._task: asyncio.Task | None = None
        self._lease_task: asyncio.Task | None = None
        self._has_keys = asyncio.Event()
        self.reads = 0  # XREAD calls made, for tests and metrics

    # --- registrations (in memory) ---

    def follow(self, key: str, *, after: str = "0-0", lease: str | None = None) -> Follower:
        """Follow `key` from after entry id `after` ("0-0": from the start)."""
        f = Follower(self, key, after, lease)
        self.followers.setdefault(key, set()).add(f)
        self._start()
        self._wake()
        return f

    def unfollow(self, f: Follower) -> None:
        f.closed = True
        group = self.followers.get(f.key)
        if group is not None:
            group.discard(f)
            if not group:
                del self.followers[f.key]

    def rejoin(self, f: Follower) -> None:
        """A lagging follower caught up: read its key again from (at most) its cursor."""
        if not f.closed:
            self._wake()

    def leases(self) -> set[str]:
        return {f.lease for group in self.followers.values() for f in group if f.lease}

    # --- the read loop ---

    def _start(self) -> None:
        self._has_keys.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="stream-reader")
            self._lease_task = asyncio.get_running_loop().create_task(self._renew_leases(), name="lease-renewer")

    def _wake(self) -> None:
        if self._wake_sent:
            return  # one wake-up is on its way; the next XREAD is built after it lands
        self._wake_sent = True
        asyncio.get_running_loop().create_task(self._send_wake())

    async def _send_wake(self) -> None:
        try:
            pipe = self.commands.pipeline(transaction=False)
            pipe.xadd(self.wake_key, {"w": "1"}, maxlen=WAKE_MAXLEN, approximate=True)
            pipe.expire(self.wake_key, WAKE_TTL_S)
            await pipe.execute()
        except redis.RedisError:
            self._wake_sent = False  # the reader's own retry loop re-reads the keys
            log.warning("could not wake the stream reader", exc_info=True)

    def _cursors(self) -> dict[str, str]:
        out = {}
        for key, group in self.followers.items():
            active = [f.cursor for f in group if not f.lagging]
            if active:
                out[key] = "{}-{}".format(*min(active))
        return out

    async def _run(self) -> None:
        conn = None
        failures = 0
        while True:
            try:
                if conn is None:
                    # Its own connection: a block must never hold one another command waits
                    # for, and its read timeout must outlast the block.
                    conn = aioredis.Redis.from_url(
                        self.url, single_connection_client=True,
                        socket_timeout=self.block_ms / 1000 + 10, socket_keepalive=True, client_name=self.name)
                streams = self._cursors()
                if not streams:
                    self._has_keys.clear()
                    await self._has_keys.wait()
                    continue
                self._wake_sent = False
                streams[self.wake_key] = self._wake_cursor
                self.reads += 1
                response = await conn.xread(streams, count=XREAD_COUNT, block=self.block_ms)
                failures = 0
                for raw_key, rows in response or ():
                    key = _text(raw_key)
                    entries = [(_text(i), f) for i, f in rows]
                    if key == self.wake_key:
                        self._wake_cursor = entries[-1][0]
                        continue
                    for f in list(self.followers.get(key, ())):
                        f.offer(entries)
            except asyncio.CancelledError:
                if conn is not None:
                    await conn.aclose()
                raise
            except (redis.RedisError, OSError):
                # Redis restarted or the connection broke: reconnect with a backoff. The
                # followers keep their cursors and resume where they were.
                failures += 1
                log.warning("stream reader: Redis read failed (%d); retrying", failures, exc_info=failures == 1)
                if conn is not None:
                    try:
                        await conn.aclose()
                    except Exception:  # already broken
                        pass
                conn = None
                await asyncio.sleep(min(RETRY_MAX_S, 0.1 * 2 ** min(failures, 5)))  # backoff, not a sync wait

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(LEASE_EVERY_S)  # the lease period, not a synchronisation
            leases = self.leases()
            if not leases:
                continue
            try:
                pipe = self.commands.pipeline(transaction=False)
                for key in leases:
                    pipe.set(key, "1", ex=LISTENER_TTL_S)
                await pipe.execute()
            except redis.RedisError:
                log.warning("could not renew %d listener leases", len(leases), exc_info=True)

    async def aclose(self) -> None:
        for task in (self._task, self._lease_task):
            if task is not None:
                task.cancel()
        try:
            await self.commands.delete(self.wake_key)
        except redis.RedisError:
            pass


async def last_id(aredis, key: str) -> str:
    """The id of a stream's newest entry ("0-0" when it has none): where to follow from
    to see only what comes after a read the caller makes next."""
    rows = await aredis.xrevrange(key, count=1)
    return _text(rows[0][0]) if rows else "0-0"


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StreamReader] = weakref.WeakKeyDictionary()


def loop_reader() -> StreamReader:
    """The running event loop's reader (clients and tasks are bound to their loop)."""
    from .connections import async_redis, client_name, redis_url

    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = _readers[loop] = StreamReader(redis_url(), async_redis(), name=client_name())
    return reader

