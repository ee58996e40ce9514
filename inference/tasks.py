"""Celery tasks: thin, idempotent, taking ids. Each calls one tier service.

Queues: `cpu` for preprocess; `prefill.<pool>`, `decode.<pool>` and `colocated.<pool>`
for the model tiers (the queue is chosen when the task is sent, from the tenant's
allocation; see inference.routing)."""

from celery import shared_task


@shared_task(name="tandem.preprocess", acks_late=True, ignore_result=True)
def preprocess(request_id: str) -> None:
    from .cpu_tier import preprocess_request

    preprocess_request(request_id)


@shared_task(name="tandem.prefill", acks_late=True, ignore_result=True)
def prefill(request_id: str) -> None:
    from .prefill_tier import run_prefill

    run_prefill(request_id)


@shared_task(name="tandem.decode", acks_late=True, ignore_result=True)
def decode(request_id: str, first_token: int, meta: dict) -> None:
    from .decode_tier import run_decode

    run_decode(request_id, first_token, meta)


@shared_task(name="tandem.colocated", acks_late=True, ignore_result=True)
def colocated(request_id: str) -> None:
    from .colocated_tier import run_colocated

    run_colocated(request_id)
