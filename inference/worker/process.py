"""A worker process's identity and the threads every worker runs, CPU tier included: its
heartbeat (wire.workers, so that others can tell when it dies and move what it held) and
its metrics endpoint (`/metrics` and `/healthz` on TANDEM_METRICS_PORT). The model tiers'
runtime starts it with their engine's stats; the CPU tier with none."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis

from ..wire import metrics
from ..wire.connections import new_redis
from .heartbeats import HeartbeatThread, worker_name

log = logging.getLogger(__name__)


@dataclass
class WorkerProcess:
    name: str
    role: str
    pool: str
    client: redis.Redis
    heartbeat: HeartbeatThread
    metrics_port: int | None

    def stop(self) -> None:
        self.heartbeat.stop()


_current: WorkerProcess | None = None


def current() -> WorkerProcess | None:
    """This process's worker, once started (None in the web tier and before start-up)."""
    return _current


def start_process(role: str, pool: str, *, static: dict | None = None,
                  dynamic: Callable[[], dict] = dict, healthy: Callable[[], tuple[bool, dict]] | None = None,
                  client: redis.Redis | None = None) -> WorkerProcess:
    """Beat once (so the worker is visible before it takes a task), then keep beating;
    serve metrics. `healthy` adds the worker's own checks (e.g. its engine thread) to
    the heartbeat's."""
    global _current
    client = client or new_redis()
    name = worker_name(role, pool)
    port = metrics.configured_port()
    static = dict(static or {})
    beats: list[HeartbeatThread] = []  # the heartbeat, once made: /healthz reports it

    def health() -> tuple[bool, dict]:
        ok, detail = (healthy() if healthy else (True, {}))
        beating = bool(beats) and beats[0].healthy()
        return ok and beating, {"worker": name, "heartbeat": beating, **detail}

    if port is not None:
        try:
            port = metrics.serve(port, health)
            static["metrics_port"] = port
            log.info("metrics for %s on port %d (/metrics, /healthz)", name, port)
        except OSError:
            log.warning("could not serve metrics on port %s", port, exc_info=True)
            port = None
    heartbeat = HeartbeatThread(client, name=name, role=role, pool=pool, static=static, dynamic=dynamic)
    beats.append(heartbeat)
    heartbeat.beat()
    heartbeat.start()
    _current = WorkerProcess(name=name, role=role, pool=pool, client=client, heartbeat=heartbeat,
                             metrics_port=port)
    return _current
