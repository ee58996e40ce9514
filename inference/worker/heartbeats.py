"""A model worker's heartbeat thread: its identity and live stats (batch occupancy,
tokens/s, KV held, queue) written every few seconds through `wire.workers`."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

import redis

from ..wire import workers


def worker_name(role: str, pool: str) -> str:
    return f"{role}.{pool}@{socket.gethostname()}:{os.getpid()}"


class HeartbeatThread(threading.Thread):
    def __init__(self, client: redis.Redis, *, name: str, role: str, pool: str,
                 static: dict, dynamic: Callable[[], dict]):
        super().__init__(name="heartbeat", daemon=True)
        self._client, self._name, self._stop = client, name, threading.Event()
        self._base = {"name": name, "host": socket.gethostname(), "role": role, "pool": pool, **static}
        self._dynamic = dynamic

    def beat(self) -> None:
        workers.heartbeat_write(self._client, self._name, {**self._base, **self._dynamic()})

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except redis.RedisError:
                pass  # Redis briefly away: the next beat repairs it
            self._stop.wait(workers.INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        try:
            workers.heartbeat_clear(self._client, self._name)
        except redis.RedisError:
            pass
