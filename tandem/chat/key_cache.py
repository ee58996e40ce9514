"""The widget keys this web process authenticated lately, so that a burst of visitors
opening the widget costs one key read per key rather than one per socket.

A copy is used only while tenants.changes' counter still has the value read before the
copy was made (a revoked key, a deactivated tenant or a rotated identity secret bumps it)
and for at most TANDEM_TENANT_REFRESH_S, the age a socket's own copy may reach. Sockets
that connect while the read is in flight wait for that same read. Failures are not kept:
a wrong key is read again each time, as without the cache, and cannot fill the memory."""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass

from django.conf import settings

from tenants import keys
from tenants.models import ApiKey
from tenants.services import api_key_authenticate

from .sockets import UNKNOWN_VERSION

MAX_ENTRIES = 1024  # distinct live keys a process keeps; past it the cache starts over


@dataclass
class _Entry:
    version: int
    read_at: float
    read: asyncio.Future


_caches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], _Entry]] = (
    weakref.WeakKeyDictionary())


async def key_authenticate(*, plaintext: str, kind: str, version: int, in_db) -> ApiKey:
    """api_key_authenticate(plaintext, kind), from this process's copy when it is still
    current for `version` (tenants.changes' counter, read before this call); `in_db` runs
    the read off the event loop. Raises AuthenticationFailed as the read does."""
    read = in_db(api_key_authenticate)
    if version == UNKNOWN_VERSION or not isinstance(plaintext, str) or not plaintext or len(plaintext) > 200:
        return await read(plaintext=plaintext, kind=kind)
    loop = asyncio.get_running_loop()
    cache = _caches.setdefault(loop, {})
    now = time.monotonic()
    slot = (keys.hash_key(plaintext), kind)
    entry = cache.get(slot)
    fresh = (entry is not None and entry.version == version
             and now - entry.read_at < settings.TANDEM_TENANT_REFRESH_S
             and not (entry.read.done() and entry.read.exception() is not None))
    if not fresh:
        if len(cache) >= MAX_ENTRIES:
            cache.clear()
        entry = cache[slot] = _Entry(version, now, loop.create_task(read(plaintext=plaintext, kind=kind)))
        entry.read.add_done_callback(lambda done: _forget_failure(cache, slot, done))
    return await asyncio.shield(entry.read)


def _forget_failure(cache: dict, slot: tuple[str, str], done: asyncio.Future) -> None:
    if done.cancelled() or done.exception() is not None:
        entry = cache.get(slot)
        if entry is not None and entry.read is done:
            del cache[slot]
