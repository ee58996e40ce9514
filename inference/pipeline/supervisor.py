"""The watcher every worker process runs (CPU and model tiers alike): it finds dead
workers and moves their requests, so that a reply survives the loss of any one process.

Twice a second it reads the worker list (wire.workers.dead_workers): a worker is dead
when its heartbeat expired (any host, within TTL_S), or at once when its process is gone
(same host). For each, it claims what the dead worker still held (wire.ownership.claim,
one Lua script: two watchers never both move a request) and sends each request's stage
again, by task name, to the same queue, with the next epoch: a prefill runs again, a
decode continues from the next token index (pipeline.decode), a CPU task runs again.
The stream gets a status record saying so.

Why here, and not in the web tier: the web process that follows a reply may itself be
gone (the client reconnects elsewhere, or not at all), there may be several, and they
only see silence, not its cause. The workers see the heartbeats. Every worker watches,
so the watching survives any one of them; a claimer that dies before the stage it
re-sent starts leaves the request in its own set, and the next watcher claims it again.

A request whose pool has no live worker left waits in its queue, claimed by the watcher
that moved it: its stream gets a status record every few seconds saying so (a client
sees `status` frames), and once TANDEM_QUEUE_TIMEOUT_S has passed since its worker died
with none taking it, it fails with `no_worker`. After TANDEM_MIGRATION_LIMIT moves a
request fails with `worker_lost`."""

from __future__ import annotations

import logging
import threading
import time

import redis
from django import db
from django.conf import settings

from ..wire import broker, keys, metrics, streams, workers
from ..wire.connections import new_redis
from ..wire.ownership import LOST, MIGRATE, Claimed, Ownership
from ..wire.spec import load
from ..worker.process import current
from . import outcomes
from .stages import WORKER_LOST

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S = 0.5
WAITING_STATUS_EVERY_S = 5.0

_MOVED = {
    "cpu": ("queued", "The worker preparing this request was lost; another one takes it."),
    "prefill": ("prefilling", "The worker reading this request was lost; another one takes it."),
    "decode": ("decoding", "The worker writing this reply was lost; another one continues it."),
    "colocated": ("decoding", "The worker writing this reply was lost; another one continues it."),
}


class Supervisor(threading.Thread):
    def __init__(self, client: redis.Redis, name: str):
        super().__init__(name="supervisor", daemon=True)
        self.client, self.name = client, name
        self.ownership = Ownership(client)
        self._stop = threading.Event()
        self._said_at: dict[str, float] = {}  # request -> when its last "waiting" status went out
        self._failing = False

    def run(self) -> None:
        while not self._stop.wait(SWEEP_INTERVAL_S):
            try:
                self.sweep()
                self._failing = False
            except Exception:  # Redis away, or anything else: this thread must outlive it
                if not self._failing:
                    log.warning("supervisor sweep failed; trying again", exc_info=True)
                self._failing = True

    def stop(self) -> None:
        self._stop.set()

    def sweep(self) -> None:
        limit = settings.TANDEM_MIGRATION_LIMIT
        for dead in workers.dead_workers(self.client):
            if dead.name == self.name:
                continue  # this process is alive: its own key lapsed (Redis was away)
            for claimed in self.ownership.claim(dead.name, self.name, limit=limit, process_gone=dead.process_gone):
                self._move(claimed, dead.name)
        self._watch_waiting()

    def _move(self, c: Claimed, dead: str) -> None:
        db.close_old_connections()
        if c.kind != "resend":
            metrics.MIGRATIONS.labels(c.stage, c.pool).inc()
        if c.kind == LOST:
            log.warning("%s lost its worker %s again (%d moves): failing it", c.request_id, dead, c.migrations)
            outcomes.request_fail(request_id=c.request_id, code=WORKER_LOST[0], message=WORKER_LOST[1])
            return
        spec = load(self.client, c.request_id)
        if spec is None:  # expired meanwhile: nothing to continue
            self.ownership.give_up(c.request_id, self.name)
            outcomes.request_fail(request_id=c.request_id, code="expired", message="The request expired.")
            return
        broker.send(c.task, [*c.args, c.epoch], queue=c.queue, priority=broker.broker_priority(spec.priority))
        log.warning("%s: %s stage of %s moved off %s (move %d), sent to %s", "migrated" if c.kind == MIGRATE
                    else "re-sent", c.stage, c.request_id, dead, c.migrations, c.queue)
        if self._served(c.role, c.pool):
            streams.publish(self.client, c.request_id, [streams.status_record(*_MOVED[c.stage])])
        else:
            self._say_waiting(c.request_id, c.role, c.pool)

    def _watch_waiting(self) -> None:
        """The requests this watcher moved that no worker has taken yet."""
        held = self.ownership.held_by(self.name)
        if not held:
            return
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        for rid in held:
            pipe.hmget(keys.owner(rid), "worker", "state", "role", "pool", "waiting_since")
        for rid, (owner, state, role, pool, since) in zip(held, pipe.execute(), strict=True):
            if state != b"claimed" or owner is None or owner.decode() != self.name:
                self._said_at.pop(rid, None)
                continue
            role, pool = role.decode(), pool.decode()
            if now - float(since or now) > settings.TANDEM_QUEUE_TIMEOUT_S:
                if self.ownership.give_up(rid, self.name):
                    db.close_old_connections()
                    outcomes.request_fail(request_id=rid, code="no_worker", message=(
                        f"No {_tier(role, pool)} came back in time to continue this reply; please retry."))
                self._said_at.pop(rid, None)
            elif now - self._said_at.get(rid, 0.0) >= WAITING_STATUS_EVERY_S and not self._served(role, pool):
                self._say_waiting(rid, role, pool)

    def _say_waiting(self, request_id: str, role: str, pool: str) -> None:
        self._said_at[request_id] = time.time()
        streams.publish(self.client, request_id, [streams.status_record(
            "queued", f"No {_tier(role, pool)} is alive; the reply waits for one.")])

    def _served(self, role: str, pool: str) -> bool:
        return bool(workers.live_workers(self.client, role=role, pool=None if role == "cpu" else pool))


def _tier(role: str, pool: str | None = None) -> str:
    if role == "cpu":
        return "CPU worker"
    return f"{role} worker of pool '{pool}'" if pool else f"{role} worker"


_supervisor: Supervisor | None = None


def start_supervisor() -> Supervisor | None:
    """Start this worker process's watcher (once)."""
    global _supervisor
    proc = current()
    if proc is None:
        log.warning("no worker identity in this process: not watching other workers")
        return None
    if _supervisor is None:
        _supervisor = Supervisor(new_redis(), proc.name)
        _supervisor.start()
    return _supervisor
