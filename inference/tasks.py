"""Celery entry points, one per hop: thin, idempotent, taking ids, each calling its hop in
`inference.pipeline`. The hops send each other by task name (`wire.broker`) and never
import this module.

Queues: `cpu` for preprocess; `prefill.<pool>`, `decode.<pool>` and `colocated.<pool>`
for the model tiers (the queue is chosen when the task is sent, from the tenant's
allocation)."""

from celery import shared_task

from .pipeline.contracts import PrefillHandoff
from .wire import broker

# The hops are imported when a task runs: the web process loads this module too (task
# autodiscovery), and must not import the model tiers' engine with it.


@shared_task(name=broker.PREPROCESS, acks_late=True, ignore_result=True)
def preprocess(request_id: str) -> None:
    from .pipeline.cpu import preprocess_request

    preprocess_request(request_id)


@shared_task(name=broker.PREFILL, acks_late=True, ignore_result=True)
def prefill(request_id: str) -> None:
    from .pipeline.prefill import run_prefill

    run_prefill(request_id)


@shared_task(name=broker.DECODE, acks_late=True, ignore_result=True)
def decode(request_id: str, handoff: dict) -> None:
    from .pipeline.decode import run_decode

    run_decode(request_id, PrefillHandoff.from_dict(handoff))


@shared_task(name=broker.COLOCATED, acks_late=True, ignore_result=True)
def colocated(request_id: str) -> None:
    from .pipeline.colocated import run_colocated

    run_colocated(request_id)
