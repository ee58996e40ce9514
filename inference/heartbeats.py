"""Worker heartbeats: every model worker writes its state to Redis every few seconds
(`tandem:worker:<name>`, expiring after a few missed beats); the console and the web
tier read them to show the workers and to tell whether a pool has anyone serving it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import redis

from . import keys

INTERVAL_S = 2.0
TTL_S = 3 * INTERVAL_S + 1


def worker_name(role: str, pool: str) -> str:
    import os

    return f"{role}.{pool}@{socket.gethostname()}:{os.getpid()}"


class HeartbeatThread(threading.Thread):
    def __init__(self, client: redis.Redis, *, name: str, role: str, pool: str,
                 static: dict, dynamic: Callable[[], dict]):
        super().__init__(name="heartbeat", daemon=True)
        self._client, self._name, self._stop = client, name, threading.Event()
        self._base = {"name": name, "host": socket.gethostname(), "role": role, "pool": pool, **static}
        self._dynamic = dynamic

    def beat(self) -> None:
        data = {**self._base, **self._dynamic(), "ts": time.time()}
        pipe = self._client.pipeline(transaction=False)
        pipe.set(keys.WORKER_HASH_PREFIX + self._name, json.dumps(data), ex=int(TTL_S))
        pipe.zadd(keys.WORKERS_SET, {self._name: time.time()})
        pipe.execute()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except redis.RedisError:
                pass  # Redis briefly away: the next beat repairs it
            self._stop.wait(INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        try:
            self._client.delete(keys.WORKER_HASH_PREFIX + self._name)
            self._client.zrem(keys.WORKERS_SET, self._name)
        except redis.RedisError:
            pass


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
