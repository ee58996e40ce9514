"""Celery entry points of knowledge syncs, on the CPU tier's `cpu` queue (sent there by
`sources`, at the lowest priority, by task name): thin, taking ids, idempotent.

The schedule: every CPU worker runs a small thread that asks, once a minute, for the
syncs that are due (`sources.sources_start_due`; row locks keep two workers from
starting one source twice). No Celery beat is needed, and no other tier fetches."""

from __future__ import annotations

import logging
import os
import threading

from celery import shared_task
from celery.signals import worker_ready

from . import sources, syncing

log = logging.getLogger(__name__)
SCHEDULE_EVERY_S = 60.0


@shared_task(name=sources.SYNC_TASK, acks_late=True, ignore_result=True)
def sync_step(source_id: str, run: str, step: int) -> None:
    syncing.sync_step(source_id=source_id, run=run, step=step)


def _schedule_loop(stop: threading.Event) -> None:
    from django.db import close_old_connections

    while not stop.wait(SCHEDULE_EVERY_S):
        try:
            close_old_connections()
            sources.sources_start_due()
        except Exception:
            log.exception("could not start the due knowledge syncs")


@worker_ready.connect(dispatch_uid="knowledge.sync_schedule")
def _start_schedule(sender=None, **kwargs) -> None:
    if os.environ.get("TANDEM_ROLE", "cpu") != "cpu":
        return
    threading.Thread(target=_schedule_loop, args=(threading.Event(),), name="knowledge-sync-schedule",
                     daemon=True).start()
