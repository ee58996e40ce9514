"""The Celery entry point of a call, on the CPU tier's `actions` queue (sent by name by
queue.py): thin, taking an id, idempotent."""

from __future__ import annotations

from celery import shared_task

from .queue import TASK
from .runner import call_run


@shared_task(name=TASK, bind=True, acks_late=True, ignore_result=True, max_retries=10)
def run(self, call_id: str) -> None:
    wait = call_run(call_id=call_id)
    if wait is not None:  # another worker holds it: look again once its lease is over
        raise self.retry(countdown=wait)
