"""A change counter for what serving a request reads about a tenant: the tenant itself,
its quota and allocation, the compute pools, its API keys.

Every save or delete of one of those rows increments a counter in Redis once its
transaction commits. A long-lived websocket keeps the key and tenant it loaded with the
counter's value at that moment, and each message's admission script checks that value
(`quotas.admit(if_current=...)`, no extra round trip): instead of re-reading four tables
per message, the key is read again only when a change was counted, and an operator's
change (a new allocation, a revoked key) still reaches the very next message. The
counter is global rather than per tenant because a pool change concerns every tenant
allocated to it, and changes are rare.

Writes that bypass the ORM's signals (`QuerySet.update()`, raw SQL) do not count; that
is what the readers' maximum age (settings.TANDEM_TENANT_REFRESH_S) is for."""

from __future__ import annotations

import functools
import logging

import redis
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save

KEY = "tandem:tenants:version"

log = logging.getLogger(__name__)


_factory = None


def use_client(factory) -> None:
    """Take the process's shared client from `factory` instead of a pool of this module's
    own (the web process keeps its Redis connections to a small constant)."""
    global _factory
    _factory = factory
    _client.cache_clear()


@functools.cache
def _client() -> redis.Redis:
    return _factory() if _factory is not None else redis.Redis.from_url(settings.REDIS_URL)


def version(client: redis.Redis | None = None) -> int:
    return int((client or _client()).get(KEY) or 0)


async def aversion(client) -> int:
    """`version` over an asyncio Redis client (the websocket consumer's own)."""
    return int(await client.get(KEY) or 0)


def bump() -> None:
    """Count a change once the current transaction commits (at once outside one)."""

    def incr():
        try:
            _client().incr(KEY)
        except redis.RedisError:
            # The change is saved; readers fall back to their maximum age.
            log.exception("could not count a tenant change in Redis")

    transaction.on_commit(incr)


def _on_change(sender, **kwargs):
    bump()


def connect_signals() -> None:
    from .models import Allocation, ApiKey, ComputePool, Quota, Tenant

    for model in (Tenant, Quota, Allocation, ComputePool, ApiKey):
        uid = f"tenants.changes:{model.__name__}"
        post_save.connect(_on_change, sender=model, dispatch_uid=uid + ":save")
        post_delete.connect(_on_change, sender=model, dispatch_uid=uid + ":delete")
