"""SSE keep-alive: a streamed answer can be silent for minutes (a request waiting in the
queue for a worker, a REST conversation's action waiting for a person's approval), and
proxies and load balancers cut a connection that carries no byte for about a minute
(nginx's proxy_read_timeout, an AWS ALB's idle timeout), as do clients with a read
timeout. A comment line every TANDEM_API_SSE_KEEPALIVE_S of silence keeps the connection
alive; SSE readers, the official openai client's included, skip comment lines."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from django.conf import settings

COMMENT = ": keep-alive\n\n"


def interval_s() -> float | None:
    """The setting; None when it is 0 (no keep-alive: a stream waits for its first
    record before its status, however long, as it did before keep-alives)."""
    return settings.TANDEM_API_SSE_KEEPALIVE_S or None


async def with_keepalive(events: AsyncIterator[str], every_s: float | None = None) -> AsyncIterator[str]:
    """`events` unchanged and in order, with COMMENT after every `every_s` seconds (the
    setting by default; none when that is 0) in which none came. The next event is awaited as one pending task,
    never through a timeout on `__anext__`, which would cancel the generator mid-record.
    Closing this generator (the client went away) cancels that task or closes `events`, so
    the inner generator's own clean-up runs."""
    every_s = interval_s() if every_s is None else every_s
    if not every_s:
        async for event in events:
            yield event
        return
    pending: asyncio.Future | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=every_s)
            if not done:
                yield COMMENT
                continue
            finished, pending = pending, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await events.aclose()
