"""The retry schedule, without Celery beat or ETA tasks (an ETA longer than the broker's
visibility timeout would be handed out again and again): every CPU-tier worker runs a
small thread that, each POLL_S, queues the deliveries that are due (a retry whose time
came, a queued one no worker took within its lease, an attempt whose worker died). A
lock lets one worker do each round (tandem.rounds); a delivery queued twice is attempted
once (delivery._claim)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

from celery.signals import worker_ready
from django.db.models import Q
from django.utils import timezone

from tandem.rounds import round_claim

from .events import QUEUED_FOR_S
from .models import Delivery
from .queue import deliveries_queue

log = logging.getLogger(__name__)
POLL_S = 0.5
BATCH = 500
S = Delivery.Status


def deliveries_queue_due() -> int:
    """Queue what is due now; how many were queued."""
    now = timezone.now()
    due = (Q(status=S.PENDING, next_attempt_at__lte=now) & (Q(lease_until__isnull=True) | Q(lease_until__lt=now))
           | Q(status=S.SENDING, lease_until__lt=now))
    ids = [str(i) for i in Delivery.objects.filter(due).order_by("next_attempt_at").values_list("pk", flat=True)[:BATCH]]
    if ids:
        Delivery.objects.filter(pk__in=ids).update(lease_until=now + timedelta(seconds=QUEUED_FOR_S))
        deliveries_queue(ids)
    return len(ids)


def _round() -> None:
    from django.db import close_old_connections

    close_old_connections()
    if round_claim("webhooks:schedule", ttl_ms=POLL_S * 1000 * 0.9):
        deliveries_queue_due()


def _loop(stop: threading.Event) -> None:
    while not stop.wait(POLL_S):
        try:
            _round()
        except Exception:
            log.exception("the webhook schedule failed")


@worker_ready.connect(dispatch_uid="webhooks.schedule")
def _start(sender=None, **kwargs) -> None:
    if os.environ.get("TANDEM_ROLE", "cpu") != "cpu":
        return
    threading.Thread(target=_loop, args=(threading.Event(),), name="webhook-schedule", daemon=True).start()
