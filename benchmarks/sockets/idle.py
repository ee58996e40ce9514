"""Idle widget sockets, thousands of them: opened in a burst from one asyncio loop on a
thread of its own (so the chat clients on other threads run beside them), each as a
visitor of its own address (X-Forwarded-For, believed from 127.0.0.1 with
TANDEM_TRUSTED_PROXIES), then held without a frame until closed."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from ..stack.tenancy import ORIGIN


def address(n: int) -> str:
    """The n-th simulated visitor's address: 10.0.0.1, 10.0.0.2, ... (16 M of them)."""
    n += 1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


@dataclass
class Burst:
    """What one burst of connects did."""

    asked: int
    connected: int = 0  # the handshake succeeded and the server's first frame came
    refused: dict[str, int] = field(default_factory=dict)  # why the others did not: close code or error
    span_s: float = 0.0  # first connect started -> last one settled
    connect_ms: list[float] = field(default_factory=list)


class IdleSockets:
    """Sockets held open on a private event loop. `open(n, urls)` adds n more, spread over
    the web processes' URLs in turn; `still_open()` counts those the server has not closed
    since; `close()` closes them all."""

    def __init__(self, key: str, *, first_address: int = 0, open_timeout: float = 60):
        self.key, self.open_timeout = key, open_timeout
        self.next_address = first_address
        self.conns: list = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="idle-sockets", daemon=True)
        self.thread.start()

    def _run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def open(self, n: int, ws_urls: list[str], *, burst_s: float) -> Burst:
        """n more sockets, their connects started evenly over `burst_s` seconds."""
        first, self.next_address = self.next_address, self.next_address + n
        return self._run(self._open(n, ws_urls, burst_s, first))

    async def _open(self, n: int, ws_urls: list[str], burst_s: float, first: int) -> Burst:
        burst = Burst(asked=n)
        t0 = time.monotonic()

        async def one(i: int) -> None:
            await asyncio.sleep(burst_s * i / n)  # the burst's schedule, not a synchronisation
            started = time.monotonic()
            reason = await self._connect(ws_urls[i % len(ws_urls)], address(first + i))
            if reason is None:
                burst.connected += 1
                burst.connect_ms.append((time.monotonic() - started) * 1e3)
            else:
                burst.refused[reason] = burst.refused.get(reason, 0) + 1

        await asyncio.gather(*(one(i) for i in range(n)))
        burst.span_s = time.monotonic() - t0
        return burst

    async def _connect(self, ws_url: str, addr: str) -> str | None:
        """None when connected; otherwise why not."""
        from websockets.asyncio.client import connect

        try:
            conn = await connect(f"{ws_url}/ws/chat/?key={self.key}", origin=ORIGIN,
                                 additional_headers={"X-Forwarded-For": addr}, open_timeout=self.open_timeout,
                                 ping_interval=None, max_queue=4, compression=None)
        except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
            status = getattr(getattr(exc, "response", None), "status_code", None)
            # HTTP 403 here is daphne's WSREJECT: the consumer did not accept within its
            # handshake timeout (--websocket_connect_timeout: 5 s by default, 30 s as the
            # platform starts daphne).
            return f"HTTP {status}" if status else type(exc).__name__
        try:
            # A new visitor's first frame is its `visitor` token: the consumer's connect
            # ran to its end. A refusal is an error frame and a close instead.
            first = await asyncio.wait_for(conn.recv(), timeout=self.open_timeout)
        except Exception:  # noqa: BLE001
            await conn.close()
            return f"close {conn.close_code}" if conn.close_code is not None else "no_first_frame"
        if '"visitor"' not in first:
            await conn.close()
            return "refused"
        self.conns.append(conn)
        return None

    def still_open(self) -> int:
        """Sockets the server has not closed since they connected."""
        return sum(1 for c in self.conns if c.close_code is None)

    def closed_codes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.conns:
            if c.close_code is not None:
                out[str(c.close_code)] = out.get(str(c.close_code), 0) + 1
        return out

    def close(self) -> None:
        async def close_all():
            await asyncio.gather(*(c.close() for c in self.conns), return_exceptions=True)

        if self.conns:
            self._run(close_all(), timeout=300)
        self.conns = []

    def shutdown(self) -> None:
        try:
            self.close()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
