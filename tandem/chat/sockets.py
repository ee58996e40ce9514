"""What one chat websocket may cost the web process (issue 19, finding 4 and 8):

- no Redis connection of its own: short commands share the process's bounded pool and
  replies and live events are read by the process's one stream reader
  (inference.wire.connections, inference.wire.reader);
- at most TANDEM_WS_MAX_PER_KEY open sockets per widget key and TANDEM_WS_MAX_PER_IP
  per client IP, in this process (a deployment with N web processes allows N times as
  many; its proxy can cap connections per address too);
- an idle timeout: a socket with no frame for TANDEM_WS_IDLE_TIMEOUT_S and no reply
  being followed is closed (the widget reconnects when its visitor acts again);
- a token bucket per socket: TANDEM_WS_FRAME_RATE frames a second, bursts of
  TANDEM_WS_FRAME_BURST; a frame beyond it gets a `rate_limited` error and no work."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import Counter

from django.conf import settings
from redis.exceptions import RedisError

from tenants import changes

CLOSE_TOO_MANY = 4429
CLOSE_IDLE = 4408

UNKNOWN_VERSION = -1
_version: dict[asyncio.AbstractEventLoop, asyncio.Future] = weakref.WeakKeyDictionary()


async def change_version(aredis) -> int:
    """tenants.changes' counter, from a read that started no earlier than this call, or
    that was still under way when it came: the sockets of the event loop that connect
    while one read is in flight share it (a burst of connects costs a read per round
    trip, not one each), and a change committed before the call is always seen."""
    loop = asyncio.get_running_loop()
    read = _version.get(loop)
    if read is None or read.done():
        read = _version[loop] = loop.create_task(changes.aversion(aredis))
    try:
        return await asyncio.shield(read)
    except (TimeoutError, RedisError, OSError):
        # Redis did not answer in time (a loop busy with a burst of handshakes): the socket
        # is served all the same, with a version no counter holds, so that its key is read
        # from the database and its first message reads it again.
        return UNKNOWN_VERSION


class SocketCounts:
    """Open sockets per key and per client IP in this process."""

    def __init__(self):
        self.per_key: Counter = Counter()
        self.per_ip: Counter = Counter()

    def open_ip(self, ip: str) -> bool:
        """Count one more socket from `ip`, or False (counting nothing) at its cap. An
        unknown address (no client in the scope) is not capped."""
        if ip and self.per_ip[ip] >= settings.TANDEM_WS_MAX_PER_IP:
            return False
        if ip:
            self.per_ip[ip] += 1
        return True

    def open_key(self, key_id: int) -> bool:
        """Count one more socket of widget key `key_id`, or False at its cap."""
        if self.per_key[key_id] >= settings.TANDEM_WS_MAX_PER_KEY:
            return False
        self.per_key[key_id] += 1
        return True

    def close(self, *, key_id: int | None, ip: str | None) -> None:
        """Release what `open_ip`/`open_key` counted (None: that one was not counted)."""
        for counter, name in ((self.per_key, key_id), (self.per_ip, ip)):
            if name is not None and name in counter:
                counter[name] -= 1
                if counter[name] <= 0:
                    del counter[name]


sockets = SocketCounts()


class FrameBucket:
    """A token bucket of frames for one socket."""

    def __init__(self):
        self.tokens = float(settings.TANDEM_WS_FRAME_BURST)
        self.at = time.monotonic()

    def take(self) -> float | None:
        """None when the frame may go; else the seconds until one may."""
        rate, burst = settings.TANDEM_WS_FRAME_RATE, settings.TANDEM_WS_FRAME_BURST
        now = time.monotonic()
        self.tokens = min(burst, self.tokens + (now - self.at) * rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return (1 - self.tokens) / rate if rate > 0 else 60.0


async def close_when_idle(consumer) -> None:
    """Close `consumer` once it has had no frame for the idle timeout while following no
    reply. Runs as the socket's own task; cancelled at disconnect."""
    timeout = settings.TANDEM_WS_IDLE_TIMEOUT_S
    while True:
        wait = consumer.last_frame_at + timeout - time.monotonic()
        if wait <= 0 and not consumer.followers:
            await consumer.send_error("idle_timeout", f"Closed after {timeout:g} s without activity.")
            await consumer.close(code=CLOSE_IDLE)
            return
        await asyncio.sleep(max(wait, 1.0) if wait > 0 else min(timeout, 5.0))
