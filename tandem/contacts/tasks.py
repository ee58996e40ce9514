"""The retention purge as a Celery task (`tandem.contacts.purge`, on the CPU tier's
queue), run once a day. Tandem runs no Celery beat process (as the outcomes rollup and
the webhook retries, tandem.feedback.tasks and tandem.webhooks.schedule): every CPU
worker runs a small thread that wakes every TANDEM_RETENTION_CHECK_S and queues the
task when a Redis key for today's date is not set yet (SET NX, kept two days), so one
worker of the deployment queues it once a day. The purge is idempotent; a run queued
twice only costs the time to find nothing. A deployment that runs beat may schedule
the same task there instead."""

from __future__ import annotations

import logging
import os
import threading

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

log = logging.getLogger(__name__)
TASK = "tandem.contacts.purge"


@shared_task(name=TASK, ignore_result=True)
def retention_purge_task() -> dict:
    from .services import retention_purge

    done = retention_purge()
    if any(done.values()):
        log.info("retention purge: %s", done)
    return done


def _due_round(now) -> str:
    """The round's name (tandem.rounds): one a day."""
    return f"contacts:purge:{now.date().isoformat()}"


def purge_if_due(now=None) -> bool:
    """Queue today's purge unless a worker already did; True if this call queued it."""
    from tandem.rounds import round_claim

    now = now or timezone.now()
    if not round_claim(_due_round(now), ttl_ms=2 * 86400 * 1000):
        return False
    retention_purge_task.apply_async(queue="cpu")
    return True


def _loop(stop: threading.Event) -> None:
    while True:
        try:
            purge_if_due()
        except Exception:
            log.exception("scheduling the retention purge failed")
        if stop.wait(settings.TANDEM_RETENTION_CHECK_S):
            return


@worker_ready.connect(dispatch_uid="contacts.retention_purge")
def _start(sender=None, **kwargs) -> None:
    if os.environ.get("TANDEM_ROLE", "cpu") != "cpu" or settings.TANDEM_RETENTION_CHECK_S <= 0:
        return
    threading.Thread(target=_loop, args=(threading.Event(),), name="retention-purge", daemon=True).start()
