"""The watcher every worker process runs (CPU and model tiers alike): it finds dead
workers and moves their requests, so that a reply survives the loss of any one process.

Twice a second it reads the worker list (wire.workers.dead_workers): a worker is dead
when its heartbeat expired (any host, within TTL_S), or at once when its process is gone
(same host). For each, it claims what the dead worker still held (wire.worker_ownership.claim,
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
with none taking it, it fails with `no_worker`. While its pool has a live worker and
none has taken it, it is sent again after 2 s, 4 s, … (same epoch: a second copy finds
the first one's worker running it): a message can be lost when a consumer is killed
between taking it off the queue and recording it (Kombu's Redis transport), or when it
is handed to a dead consumer's connection that Redis has not yet closed. After
TANDEM_MIGRATION_LIMIT moves a request fails with `worker_lost`.

Messages can be lost without anyone owning them, too: a task sent to a queue as one of
its consumers is killed may be handed to that consumer's connection, still open while
the process tears down, or taken by it just before it dies. Every sender writes a
record of what it sent before it sends (wire.worker_ownership.sent_record; the task deletes it
when it starts), and for ten seconds after a consumer of a queue died, the watcher looks
for records of that queue older than a second and a half whose message is neither taken
nor in the queue, and sends those again."""

from __future__ import annotations

import json
import logging
import threading
import time

import redis
from django import db
from django.conf import settings

from ..wire import broker, keys, metrics, streams, workers
from ..wire.connections import new_redis
from ..wire.spec import load
from ..wire.worker_ownership import LOST, MIGRATE, RESEND, Claimed, Ownership, unreceived
from ..worker.process import current
from . import outcomes
from .stages import WORKER_LOST

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S = 0.5
WAITING_STATUS_EVERY_S = 5.0
# A moved stage no worker took within this is sent again (then after twice as long, …).
RESEND_FIRST_S, RESEND_MAX_S = 2.0, 30.0
# After a consumer of a queue died: look for tasks lost with it every second for 10 s,
# counting those sent more than 1.5 s before (newer ones may still be on their way).
LOST_CHECK_FOR_S, LOST_CHECK_EVERY_S, LOST_GRACE_S = 10.0, 1.0, 1.5

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
        self._sent: dict[str, tuple[float, float]] = {}  # request -> (last sent, wait before the next)
        self._claimed: set[str] = set()  # moved here, not yet taken by a worker
        self._check_until: dict[str, float] = {}  # queue -> look for lost messages until
        self._checked_at: dict[str, float] = {}
        self._failing = False
        self._trust_expiry_at = 0.0  # monotonic: heartbeat expiry means death from then on

    def run(self) -> None:
        while not self._stop.wait(SWEEP_INTERVAL_S):
            try:
                self.sweep()
                self._failing = False
            except Exception:  # Redis away, or anything else: this thread must outlive it
                if not self._failing:
                    log.warning("supervisor sweep failed; trying again", exc_info=True)
                self._failing = True
                # Every heartbeat may have lapsed while Redis was away: give the live
                # workers time to beat again before an expired one counts as dead.
                self._trust_expiry_at = time.monotonic() + workers.TTL_S

    def stop(self) -> None:
        self._stop.set()

    def sweep(self) -> None:
        limit = settings.TANDEM_MIGRATION_LIMIT
        now = time.time()
        for dead in workers.dead_workers(self.client):
            if dead.name == self.name:
                continue  # this process is alive: its own key lapsed (Redis was away)
            if not dead.process_gone and time.monotonic() < self._trust_expiry_at:
                continue
            self._check_until[_queue_of(dead.name)] = now + LOST_CHECK_FOR_S
            claimed = self.ownership.claim(dead.name, self.name, limit=limit, process_gone=dead.process_gone)
            # Watched from now on, so that one that fails to go out below is sent again.
            self._claimed.update(c.request_id for c in claimed if c.kind != LOST)
            for c in claimed:
                try:
                    self._move(c, dead.name, "its process is gone" if dead.process_gone else "its heartbeat expired")
                except Exception:  # noqa: BLE001 - the others still go; this one is sent again later
                    log.warning("could not move %s", c.request_id, exc_info=True)
        self._watch_waiting()
        self._find_lost_messages(now)

    def _find_lost_messages(self, now: float) -> None:
        """For a while after a consumer of a queue died: tasks sent to that queue that
        nobody took and that are not in it any more are sent again (wire.worker_ownership.unreceived)."""
        for queue, until in list(self._check_until.items()):
            if now > until:
                del self._check_until[queue]
                continue
            if now - self._checked_at.get(queue, 0.0) < LOST_CHECK_EVERY_S:
                continue
            self._checked_at[queue] = now
            for lost in unreceived(self.client, queue, older_than_s=LOST_GRACE_S):
                if not self.ownership.resend_claim(lost):
                    continue  # another watcher sends it
                spec = load(self.client, lost.request_id)
                if spec is None:
                    continue
                task_id = broker.send(lost.task, [*lost.args, lost.epoch], queue=queue,
                                      priority=broker.broker_priority(spec.priority))
                metrics.RETRIES.labels("lost_message").inc()
                log.warning("%s: its %s task was lost with a dying consumer of %s; sent again as task %s",
                            lost.request_id, lost.task, queue, task_id)

    def _move(self, c: Claimed, dead: str, why: str) -> None:
        db.close_old_connections()
        if c.kind != RESEND:
            metrics.MIGRATIONS.labels(c.stage, c.pool).inc()
        if c.kind == LOST:
            log.warning("%s lost its worker %s (%s) once too often (%d moves): failing it", c.request_id, dead, why,
                        c.migrations)
            outcomes.request_fail(request_id=c.request_id, code=WORKER_LOST[0], message=WORKER_LOST[1])
            return
        task_id = self._send(c.request_id, c.task, c.args, c.epoch, c.queue)
        if task_id is None:
            return
        log.warning("%s: %s stage of %s moved off %s (%s; move %d), sent to %s as task %s",
                    "migrated" if c.kind == MIGRATE else "re-sent", c.stage, c.request_id, dead, why, c.migrations,
                    c.queue, task_id)
        if self._served(c.role, c.pool):
            streams.publish(self.client, c.request_id, [streams.status_record(*_MOVED[c.stage])])
        else:
            self._say_waiting(c.request_id, c.role, c.pool)

    def _send(self, request_id: str, task: str, args: list, epoch: int, queue: str) -> str | None:
        """Send a claimed stage (again); None when the request expired meanwhile."""
        spec = load(self.client, request_id)
        if spec is None:
            self.ownership.give_up(request_id, self.name)
            outcomes.request_fail(request_id=request_id, code="expired", message="The request expired.")
            self._forget(request_id)
            return None
        _, every = self._sent.get(request_id, (0.0, RESEND_FIRST_S / 2))
        self._sent[request_id] = (time.time(), min(RESEND_MAX_S, every * 2))
        return broker.send(task, [*args, epoch], queue=queue, priority=broker.broker_priority(spec.priority))

    def _watch_waiting(self) -> None:
        """The requests this watcher moved that no worker has taken yet: say so while
        their pool has no live worker, send them again now and then while it has (a
        message can be lost: one a worker took off the queue as it was killed), and fail
        them once they have waited TANDEM_QUEUE_TIMEOUT_S."""
        held = sorted(self._claimed)  # only this watcher claims into this worker's set
        if not held:
            return
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        for rid in held:
            pipe.hmget(keys.owner(rid), "worker", "state", "role", "pool", "waiting_since", "task", "args", "epoch",
                       "queue")
        for rid, row in zip(held, pipe.execute(), strict=True):
            owner, state = row[0], row[1]
            if state != b"claimed" or owner is None or owner.decode() != self.name:
                self._forget(rid)  # a worker took it (or it ended)
                continue
            role, pool, since, task, args, epoch, queue = (x.decode() if x else "" for x in row[2:])
            served = self._served(role, pool)
            if now - float(since or now) > settings.TANDEM_QUEUE_TIMEOUT_S:
                if self.ownership.give_up(rid, self.name):
                    db.close_old_connections()
                    outcomes.request_fail(request_id=rid, code="no_worker", message=(
                        f"No {_tier(role, pool)} came back in time to continue this reply; please retry."))
                self._forget(rid)
            elif not served and now - self._said_at.get(rid, 0.0) >= WAITING_STATUS_EVERY_S:
                self._say_waiting(rid, role, pool)
            elif served:
                at, every = self._sent.get(rid, (now, RESEND_FIRST_S))
                if now - at >= every:
                    # Same epoch: if the first copy arrives after all, the second finds it taken.
                    log.info("%s: no worker has taken its %s stage yet; sending it again", rid, role)
                    self._send(rid, task, json.loads(args), int(epoch), queue)

    def _forget(self, request_id: str) -> None:
        self._claimed.discard(request_id)
        self._said_at.pop(request_id, None)
        self._sent.pop(request_id, None)

    def _say_waiting(self, request_id: str, role: str, pool: str) -> None:
        self._said_at[request_id] = time.time()
        streams.publish(self.client, request_id, [streams.status_record(
            "queued", f"No {_tier(role, pool)} is alive; the reply waits for one.")])

    def _served(self, role: str, pool: str) -> bool:
        return bool(workers.live_workers(self.client, role=role, pool=None if role == "cpu" else pool))


def _queue_of(worker_name: str) -> str:
    """The queue a worker consumed, from its name (`<role>.<pool>@<host>:<pid>`)."""
    role, _, pool = worker_name.split("@", 1)[0].partition(".")
    return broker.queue_name(role, pool)


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
