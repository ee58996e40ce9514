"""Sending a request's next task to a tier's queue, by task name.

The hops name the task they send (the constants below, which `inference.tasks`
registers), so no hop imports the Celery entry points and none needs the others'
modules. On the way to the first token twice (web -> CPU tier, CPU tier -> prefill):
`send` builds the message Celery's `apply_async(queue=...)` would (its task protocol,
`app.amqp.create_task_message`) and hands it to the same publisher
(`app.amqp.send_task_message`, which sends the publish signals) on the default exchange,
skipping the routing and option handling that a named direct queue does not need."""

from __future__ import annotations

from celery import current_app
from celery.utils import uuid

PREPROCESS = "tandem.preprocess"
PREFILL = "tandem.prefill"
DECODE = "tandem.decode"
COLOCATED = "tandem.colocated"



def queue_name(tier: str, pool: str) -> str:
    """The queue a tier's workers consume: `cpu` (one for every pool), or `<tier>.<pool>`
    for the model tiers (prefill, decode, colocated)."""
    return "cpu" if tier == "cpu" else f"{tier}.{pool}"


# Celery's Redis transport keeps one list per priority step and serves step 0 first, so
# a tenant's priority (higher is more important) maps onto steps 0 (first) .. 9 (last).
PRIORITY_STEPS = 10


def priority_lists(queue: str) -> list[str]:
    """The Redis lists that hold `queue`'s waiting messages, steps 0 .. 9 (the transport's
    `sep` is ":"; step 0's list is the queue's own name)."""
    return [queue if step == 0 else f"{queue}:{step}" for step in range(PRIORITY_STEPS)]


def broker_priority(priority: int) -> int:
    return max(0, min(PRIORITY_STEPS - 1, PRIORITY_STEPS // 2 - 1 - priority))


def send(task_name: str, args: list, *, queue: str, priority: int) -> str:
    """Publish `task_name(*args)` onto `queue` at broker `priority` (a step from
    `broker_priority`); returns the task id. Every pipeline task ignores its result."""
    app = current_app._get_current_object()
    amqp = app.amqp
    task_id = uuid()
    # The task that sends this one (in a worker) is its parent, as apply_async records it.
    parent = app.current_worker_task
    parent_id = parent.request.id if parent else None
    root_id = (parent.request.root_id or parent_id) if parent else None
    message = amqp.create_task_message(
        task_id, task_name, list(args), {}, reply_to=app.thread_oid,
        create_sent_event=app.conf.task_send_sent_event, root_id=root_id, parent_id=parent_id,
        ignore_result=True,
    )
    with app.producer_or_acquire() as producer:
        amqp.send_task_message(producer, task_name, message, queue=amqp.queues[queue], exchange="",
                               routing_key=queue, priority=priority)
    return task_id
