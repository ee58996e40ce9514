"""Worker liveness, as the heartbeats in Redis say it: each model worker writes its state
under `tandem:worker:<name>` every few seconds (inference.worker.heartbeats), expiring
after a few missed beats. The web tier and the console read it here to show the workers
and to tell whether a pool has anyone serving it."""

from __future__ import annotations

import json
import time

import redis

from . import keys

INTERVAL_S = 2.0
TTL_S = 3 * INTERVAL_S + 1


def heartbeat_write(client: redis.Redis, name: str, state: dict) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.set(keys.WORKER_HASH_PREFIX + name, json.dumps({**state, "ts": time.time()}), ex=int(TTL_S))
    pipe.zadd(keys.WORKERS_SET, {name: time.time()})
    pipe.execute()


def heartbeat_clear(client: redis.Redis, name: str) -> None:
    client.delete(keys.WORKER_HASH_PREFIX + name)
    client.zrem(keys.WORKERS_SET, name)


def live_workers(client: redis.Redis, *, role: str | None = None, pool: str | None = None) -> list[dict]:
    names = [n.decode() for n in client.zrange(keys.WORKERS_SET, 0, -1)]
    if not names:
        return []
    raws = client.mget([keys.WORKER_HASH_PREFIX + n for n in names])
    stale = [n for n, raw in zip(names, raws, strict=False) if raw is None]
    if stale:
        client.zrem(keys.WORKERS_SET, *stale)
    workers = [json.loads(raw) for raw in raws if raw is not None]
    return [w for w in workers
            if (role is None or w["role"] == role) and (pool is None or w["pool"] == pool)]
