"""A worker's heartbeat thread: its identity (name, role, pool, host, PID) and live stats
(batch occupancy, tokens/s, KV held, queue) written every second through `wire.workers`.
A watcher on the same host tells from the PID when the process is gone; on another host,
the key's expiry says it."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

import redis

from ..wire import workers

log = logging.getLogger(__name__)


def worker_name(role: str, pool: str) -> str:
    return f"{role}.{pool}@{socket.gethostname()}:{os.getpid()}"


class HeartbeatThread(threading.Thread):
    def __init__(self, client: redis.Redis, *, name: str, role: str, pool: str,
                 static: dict, dynamic: Callable[[], dict]):
        super().__init__(name="heartbeat", daemon=True)
        self._client, self._name, self._stop = client, name, threading.Event()
        self._base = {"name": name, "role": role, "pool": pool, **workers.this_process(), **static}
        self._dynamic = dynamic
        self.last_beat = 0.0  # monotonic time of the last beat Redis took

    def beat(self) -> None:
        workers.heartbeat_write(self._client, self._name, {**self._base, **self._dynamic()})
        self.last_beat = time.monotonic()

    def healthy(self) -> bool:
        """Beating: the last beat reached Redis within the heartbeat's lifetime."""
        return self.is_alive() and time.monotonic() - self.last_beat < workers.TTL_S

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except redis.RedisError:
                pass  # Redis briefly away: the next beat repairs it
            except Exception:  # noqa: BLE001 - a stats callback's bug must not stop the beats
                log.exception("heartbeat failed")
            self._stop.wait(workers.INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        try:
            workers.heartbeat_clear(self._client, self._name)
        except redis.RedisError:
            pass
