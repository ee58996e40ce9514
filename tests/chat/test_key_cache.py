"""The web process's copy of the widget keys it authenticated (tandem.chat.key_cache), on
the test database and the session's real Redis: a burst of connects with one key costs one
read; a change counted by tenants.changes (a revoked key) is seen by the next connect; a
wrong key is never kept."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis.asyncio as aioredis
from channels.db import database_sync_to_async

from tandem.chat import sockets
from tandem.chat.key_cache import key_authenticate
from tenants.models import ApiKey
from tenants.services import AuthenticationFailed, api_key_revoke
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
WIDGET = ApiKey.Kind.WIDGET


class Reads:
    """database_sync_to_async as the consumer uses it, counting the reads it runs."""

    def __init__(self):
        self.count = 0

    def __call__(self, fn):
        def counted(**kwargs):
            self.count += 1
            return fn(**kwargs)

        return database_sync_to_async(counted, thread_sensitive=False)


async def _connects(plaintext: str, n: int, reads: Reads) -> list:
    aredis = aioredis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        async def one():
            version = await sockets.change_version(aredis)
            return await key_authenticate(plaintext=plaintext, kind=WIDGET, version=version, in_db=reads)

        return await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    finally:
        await aredis.aclose()


def test_a_burst_of_connects_with_one_key_reads_it_once_and_a_revocation_reaches_the_next_connect():
    created = make_tenant()
    plaintext = created.widget_key.plaintext
    reads = Reads()

    async def main():
        burst = await _connects(plaintext, 200, reads)
        after_burst = reads.count
        await database_sync_to_async(api_key_revoke, thread_sensitive=False)(api_key=created.widget_key.api_key)
        later = await _connects(plaintext, 1, reads)
        return burst, after_burst, later

    burst, after_burst, later = asyncio.run(main())
    assert all(isinstance(k, ApiKey) and k.pk == created.widget_key.api_key.pk for k in burst)
    assert after_burst == 1
    assert reads.count == 2  # the revocation bumped the counter: read again
    assert isinstance(later[0], AuthenticationFailed) and later[0].code == "revoked_api_key"


def test_a_wrong_key_is_read_each_time_and_never_kept():
    reads = Reads()

    async def main():
        first = await _connects("pk_not-a-key", 1, reads)
        second = await _connects("pk_not-a-key", 1, reads)
        return first + second

    results = asyncio.run(main())
    assert all(isinstance(r, AuthenticationFailed) for r in results)
    assert reads.count == 2
