"""Scheduled rounds without Celery beat (webhook retries, the outcomes rollup, the
retention purge): every CPU worker runs a small thread, and a Redis lock lets one of them
do each round. The lock is named for the round and for the database, since the rounds
are about that database: workers of another database on the same Redis (a second
deployment, a benchmark) would otherwise win rounds in step with ours and starve them."""

from __future__ import annotations

import os


def round_key(name: str) -> str:
    from django.db import connection

    db = connection.settings_dict
    return f"tandem:round:{name}:{db.get('HOST') or ''}:{db.get('PORT') or ''}:{db['NAME']}"


def round_claim(name: str, *, ttl_ms: int) -> bool:
    """True if this worker does round `name` now (nobody else has for `ttl_ms`)."""
    from inference.wire.connections import get_redis

    return bool(get_redis().set(round_key(name), os.getpid(), nx=True, px=max(int(ttl_ms), 1)))
