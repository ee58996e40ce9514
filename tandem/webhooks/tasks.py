"""The Celery entry point of a delivery, on the CPU tier's `webhooks` queue (sent by
name by queue.py): thin, taking an id, idempotent."""

from __future__ import annotations

from celery import shared_task

from . import schedule  # noqa: F401  (its worker_ready handler starts the retry schedule)
from .delivery import delivery_attempt
from .queue import TASK


@shared_task(name=TASK, acks_late=True, ignore_result=True)
def deliver(delivery_id: str) -> None:
    delivery_attempt(delivery_id=delivery_id)
