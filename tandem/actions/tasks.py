"""The Celery entry point of a call, on the CPU tier's `actions` queue (sent by name by
queue.py): thin, taking an id, idempotent."""

from __future__ import annotations

from celery import shared_task

from .queue import TASK
from .runner import call_run


@shared_task(name=TASK, acks_late=True, ignore_result=True)
def run(call_id: str) -> None:
    call_run(call_id=call_id)
