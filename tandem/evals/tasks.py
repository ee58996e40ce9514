"""The evaluation runs' Celery entry point, on the CPU tier's `cpu` queue (sent there by
services.step_send at the lowest priority): thin, taking ids, idempotent."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name=services.STEP_TASK, acks_late=True, ignore_result=True)
def run_step(run_id: int, step: int) -> None:
    services.run_step(run_id=run_id, step=step)
