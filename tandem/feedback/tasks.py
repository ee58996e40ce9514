"""The outcomes rollup's schedule: every CPU worker runs a small thread that rolls up
every TANDEM_OUTCOMES_ROLLUP_S seconds (as knowledge syncs are scheduled: no Celery
beat). A Redis lock lets one worker do each round (tandem.rounds); the rollup is
idempotent, so a round run twice only costs time."""

from __future__ import annotations

import logging
import os
import threading

from celery.signals import worker_ready
from django.conf import settings

log = logging.getLogger(__name__)


def _round() -> None:
    from django.db import close_old_connections

    from tandem.rounds import round_claim

    from .rollup import outcomes_rollup

    close_old_connections()
    every = settings.TANDEM_OUTCOMES_ROLLUP_S
    if not round_claim("outcomes:rollup", ttl_ms=max(int(every) - 1, 1) * 1000):
        return  # another worker has this round
    outcomes_rollup()


def _loop(stop: threading.Event) -> None:
    while not stop.wait(settings.TANDEM_OUTCOMES_ROLLUP_S):
        try:
            _round()
        except Exception:
            log.exception("the outcomes rollup failed")


@worker_ready.connect(dispatch_uid="feedback.outcomes_rollup")
def _start(sender=None, **kwargs) -> None:
    if os.environ.get("TANDEM_ROLE", "cpu") != "cpu" or settings.TANDEM_OUTCOMES_ROLLUP_S <= 0:
        return
    threading.Thread(target=_loop, args=(threading.Event(),), name="outcomes-rollup", daemon=True).start()
