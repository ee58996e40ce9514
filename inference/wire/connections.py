"""Redis connections, from settings.REDIS_URL: the one place a client is built (the KV
store, which may live elsewhere, builds its own from its own URL)."""

from __future__ import annotations

import asyncio
import functools
import os
import weakref

import redis
import redis.asyncio as aioredis
from django.conf import settings


def redis_url() -> str:
    return settings.REDIS_URL


def client_name() -> str:
    """The name this process's connections carry (`CLIENT LIST`), so an operator, a test
    or a benchmark can count a process's connections."""
    return f"tandem-{os.getpid()}"


_sync_limit: int | None = None


def limit_sync_connections(max_connections: int) -> None:
    """Bound the process's shared sync client to `max_connections`, waiting for a free
    one rather than opening more. The web process calls it at start: its sync code runs
    on a handful of executor threads, and its Redis connections must stay a small
    constant. (The model workers' many task threads keep an unbounded pool.)"""
    global _sync_limit
    _sync_limit = max_connections
    get_redis.cache_clear()


@functools.cache
def get_redis() -> redis.Redis:
    """The process's shared client (one connection pool, thread-safe)."""
    if _sync_limit:
        pool = redis.BlockingConnectionPool.from_url(
            settings.REDIS_URL, max_connections=_sync_limit, timeout=settings.TANDEM_WEB_REDIS_WAIT_S,
            health_check_interval=30, client_name=client_name())
        return redis.Redis(connection_pool=pool)
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30, client_name=client_name())


def new_redis() -> redis.Redis:
    """A client with a pool of its own, for a thread whose blocking calls (pub/sub, a
    publisher's pipelines) must not hold connections other threads wait for."""
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)


_async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()


def async_redis() -> aioredis.Redis:
    """The event loop's client for short commands (quota scripts, submits, catch-up
    reads, leases): a bounded pool that waits for a free connection rather than raising,
    so a burst of sockets queues for a few milliseconds instead of failing. Never used for
    blocking reads (those are the stream reader's, on its own connection). Never close it
    from a socket."""
    loop = asyncio.get_running_loop()
    client = _async.get(loop)
    if client is None:
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL, max_connections=settings.TANDEM_WEB_REDIS_CONNECTIONS,
            timeout=settings.TANDEM_WEB_REDIS_WAIT_S, health_check_interval=30, client_name=client_name())
        client = _async[loop] = aioredis.Redis(connection_pool=pool)
    return client
