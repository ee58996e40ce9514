"""One Redis connection pool per process (sync and asyncio), from settings.REDIS_URL."""

from __future__ import annotations

import functools

import redis
import redis.asyncio as aioredis
from django.conf import settings


@functools.cache
def get_redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)


def get_async_redis() -> aioredis.Redis:
    # Not cached: an asyncio client is bound to the event loop it was first used on, and
    # each websocket connection is cheap to give its own.
    return aioredis.Redis.from_url(settings.REDIS_URL)
