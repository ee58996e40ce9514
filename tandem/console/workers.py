"""What the running platform reports, for the console: its Redis client and the live
model workers (heartbeats). The console's only imports from `inference`, kept in this
one module so that a move of those helpers is a change here alone."""

from __future__ import annotations

from inference.wire.connections import get_redis
from inference.wire.workers import live_workers as _live_workers


def redis_client():
    return get_redis()


def live_workers() -> list[dict]:
    """Every worker with a current heartbeat, with `queue` set for each role (prefill
    workers report their batcher's queue, decode workers their waiting list)."""
    workers = sorted(_live_workers(get_redis()), key=lambda w: (w["role"], w["pool"], w["name"]))
    for w in workers:
        w["queue"] = w.get("queue_depth", w.get("prefill_queue", 0)) or 0
    return workers
