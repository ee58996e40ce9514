"""Redis connections, from settings.REDIS_URL: the one place a client is built (the KV
store, which may live elsewhere, builds its own from its own URL)."""

from __future__ import annotations

import functools

import redis
import redis.asyncio as aioredis
from django.conf import settings


@functools.cache
def get_redis() -> redis.Redis:
    """The process's shared client (one connection pool, thread-safe)."""
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)


def new_redis() -> redis.Redis:
    """A client with a pool of its own, for a thread whose blocking calls (pub/sub, a
    publisher's pipelines) must not hold connections other threads wait for."""
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)


def get_async_redis() -> aioredis.Redis:
    # Not cached: an asyncio client is bound to the event loop it was first used on, and
    # each websocket connection is cheap to give its own.
    return aioredis.Redis.from_url(settings.REDIS_URL)
