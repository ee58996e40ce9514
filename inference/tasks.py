"""Celery entry points, one per hop: thin, idempotent, taking ids, each calling its hop in
`inference.pipeline`. The hops send each other by task name (`wire.broker`) and never
import this module.

Queues: `cpu` for preprocess; `prefill.<pool>`, `decode.<pool>` and `colocated.<pool>`
for the model tiers (the queue is chosen when the task is sent, from the tenant's
allocation).

`epoch` says which delivery of a stage this is: 0 as the previous hop sends it, more
when a watcher re-sent the stage after its worker died (`pipeline.supervisor`); a
delivery that is not the live one does nothing (`pipeline.stages`).

Every worker process also runs a watcher (started here once the worker is ready, since
the watcher is a pipeline module): it moves the requests of workers that died."""

from celery import shared_task
from celery.signals import worker_ready

from .pipeline.contracts import PrefillHandoff
from .wire import broker

# The hops are imported when a task runs: the web process loads this module too (task
# autodiscovery), and must not import the model tiers' engine with it.


@shared_task(name=broker.PREPROCESS, acks_late=True, ignore_result=True)
def preprocess(request_id: str, epoch: int = 0) -> None:
    from .pipeline.stages import held
    from .pipeline.submit import cpu_stage
    from .wire.connections import get_redis

    with held(get_redis(), cpu_stage(request_id, epoch)) as begun:
        if begun.runs:
            preprocess_within_budget(request_id)


CPU_TIME_EXCEEDED = ("cpu_time_exceeded", "Preparing this message took longer than the CPU tier allows "
                     "one request; try a shorter message.")


def preprocess_within_budget(request_id: str) -> None:
    """One request may hold the shared CPU worker (every tenant's) for at most
    TANDEM_CPU_TIME_BUDGET_S; past it the reply fails with `cpu_time_exceeded` and the
    worker takes the next request (Celery's time limits do not apply to a solo pool)."""
    from django.conf import settings

    from .pipeline import rendezvous
    from .pipeline.cpu import preprocess_request
    from .wire.connections import get_redis
    from .worker.budget import BudgetExceeded, time_budget

    try:
        with time_budget(settings.TANDEM_CPU_TIME_BUDGET_S):
            preprocess_request(request_id)
    except BudgetExceeded:
        rendezvous.report(get_redis(), request_id, rendezvous.cpu_failed(*CPU_TIME_EXCEEDED))


@shared_task(name=broker.PREFILL, acks_late=True, ignore_result=True)
def prefill(request_id: str, epoch: int = 0) -> None:
    from .pipeline.prefill import run_prefill

    run_prefill(request_id, epoch)


@shared_task(name=broker.DECODE, acks_late=True, ignore_result=True)
def decode(request_id: str, handoff: dict, epoch: int = 0) -> None:
    from .pipeline.decode import run_decode

    run_decode(request_id, PrefillHandoff.from_dict(handoff), epoch)


@shared_task(name=broker.COLOCATED, acks_late=True, ignore_result=True)
def colocated(request_id: str, epoch: int = 0) -> None:
    from .pipeline.colocated import run_colocated

    run_colocated(request_id, epoch)


@worker_ready.connect
def _start_watcher(**_):
    from .pipeline.supervisor import start_supervisor

    start_supervisor()
