"""A hop's side of request ownership (wire.worker_ownership): take the request's stage when its
task starts, in the same round trip as the reads the hop does anyway (its spec, its
cancel flag), and release it when the stage ends. The verdict says whether this
delivery runs the stage:

- fresh: the stage starts here;
- resume: its worker died and this delivery continues it (decode: from the tokens the
  stream already holds);
- duplicate: a live worker runs it (the broker redelivered a task that outlasted the
  visibility timeout), stale (a later delivery exists, or the stage is done): nothing
  to do;
- lost: the request migrated more than TANDEM_MIGRATION_LIMIT times: it fails with
  `worker_lost`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from django.conf import settings

from ..wire import keys, metrics
from ..wire.spec import RequestSpec
from ..wire.worker_ownership import DUPLICATE, FRESH, LOST, RESUME, STALE, Ownership, Stage, Verdict
from ..worker.process import current
from . import outcomes

log = logging.getLogger(__name__)
RUNS = (FRESH, RESUME)

WORKER_LOST = ("worker_lost", "The workers serving this reply were lost too many times; please retry.")

_ownerships: dict[int, Ownership] = {}


def ownership(client: redis.Redis) -> Ownership:
    found = _ownerships.get(id(client))
    if found is None or found.client is not client:
        found = _ownerships[id(client)] = Ownership(client)
    return found


def worker() -> str:
    proc = current()
    if proc is None:
        raise RuntimeError("not a worker process: no worker name to own requests by")
    return proc.name


@dataclass(frozen=True)
class Start:
    """What a task found when it took its stage: the request's spec, whether it was
    cancelled, and the ownership verdict (`runs`: this delivery does the stage)."""

    spec: RequestSpec | None
    cancelled: bool
    verdict: Verdict

    @property
    def runs(self) -> bool:
        return self.verdict.kind in RUNS

    @property
    def resumed(self) -> bool:
        return self.verdict.kind == RESUME


def start(client: redis.Redis, stage: Stage, *, reads: bool = True) -> Start:
    """Take the stage; with `reads`, read the spec and the cancel flag in the same round
    trip (without, the Start carries neither)."""

    def queue_reads(pipe):
        pipe.get(keys.request(stage.request_id))
        pipe.exists(keys.cancel(stage.request_id))

    results, verdict = ownership(client).own(
        stage, worker(), limit=settings.TANDEM_MIGRATION_LIMIT, before=queue_reads if reads else None)
    _account(stage, verdict)
    raw, cancelled = results if reads else (None, False)
    return Start(spec=RequestSpec.from_json(raw) if raw else None, cancelled=bool(cancelled), verdict=verdict)


def release(client: redis.Redis, stage: Stage) -> None:
    """The stage ended here (done, failed or handed on). Best effort: the record expires
    with the request, and a watcher finds nothing to move for a finished stage."""
    try:
        ownership(client).release(stage, worker())
    except redis.RedisError:
        log.warning("could not release %s of %s", stage.stage, stage.request_id, exc_info=True)


@contextmanager
def held(client: redis.Redis, stage: Stage, *, reads: bool | None = None) -> Iterator[Start]:
    """Take the stage for the block (which runs it when `.runs`), release it after. The
    model tiers read the spec with it; the CPU tier reads its own."""
    begun = start(client, stage, reads=stage.stage != "cpu" if reads is None else reads)
    try:
        yield begun
    finally:
        if begun.runs:
            release(client, stage)


def _account(stage: Stage, verdict: Verdict) -> None:
    if verdict.kind in (DUPLICATE, STALE):
        metrics.REDELIVERIES.labels(stage.stage, verdict.kind).inc()
        log.info("%s of %s delivered again (%s%s): nothing to do", stage.stage, stage.request_id, verdict.kind,
                 f", held by {verdict.previous}" if verdict.previous else "")
    elif verdict.kind == RESUME and verdict.took_over:
        # Taken over straight from a dead worker (the broker redelivered its task before
        # any watcher claimed it): a migration all the same.
        metrics.MIGRATIONS.labels(stage.stage, stage.pool).inc()
    elif verdict.kind == LOST:
        metrics.MIGRATIONS.labels(stage.stage, stage.pool).inc()
        outcomes.request_fail(request_id=stage.request_id, code=WORKER_LOST[0], message=WORKER_LOST[1])
