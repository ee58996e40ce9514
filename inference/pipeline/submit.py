"""The web tier's side of a request: store its spec with its admission, enqueue the CPU
tier, report whether its rows committed, and cancel it. Runs in the web process; no
model, no engine."""

from __future__ import annotations

import time

from ..wire import broker, keys, worker_ownership
from ..wire.connections import get_redis
from ..wire.spec import REQUEST_TTL_S, RequestSpec
from ..wire.streams import LISTENER_TTL_S
from . import rendezvous


def request_keys(spec: RequestSpec) -> dict[str, tuple[str, float]]:
    """A new request's keys, {key: (value, TTL s)}: its spec, the listener lease and the
    record that its CPU task is sent (wire.worker_ownership.sent_record: the task deletes it, and
    a watcher sends it again if its message was lost with a dying CPU worker). The web
    tier stores them with the request's admission, in the same round trip
    (`tenants.quotas.admit(store=...)`)."""
    spec.enqueued_at = time.time()
    sent_key, sent = worker_ownership.sent_record(cpu_stage(spec.request_id))
    return {keys.request(spec.request_id): (spec.to_json(), REQUEST_TTL_S),
            keys.listener(spec.request_id): ("1", LISTENER_TTL_S),
            sent_key: (sent, worker_ownership.RECORD_TTL_S)}


def cpu_stage(request_id: str, epoch: int = 0) -> worker_ownership.Stage:
    """The CPU tier's stage of a request."""
    return worker_ownership.Stage(request_id=request_id, stage="cpu", epoch=epoch, task=broker.PREPROCESS,
                           args=[request_id], queue=broker.queue_name("cpu", ""), pool="")


def request_enqueue(*, spec: RequestSpec) -> None:
    """Enqueue the CPU task of a request whose keys are stored, at once, before the
    caller stores the message rows: the CPU tier builds the prompt from the spec alone,
    so the web tier's INSERTs and COMMIT run while it works instead of before it. The
    caller must then report the outcome with `request_stored`; the request goes on (or
    fails) only once both the commit and the prompt are done (see `rendezvous`), so no tier
    ever looks for a message row that is not yet visible."""
    broker.send(broker.PREPROCESS, [spec.request_id], queue=broker.queue_name("cpu", ""),
                priority=broker.broker_priority(spec.priority))


def request_stored(*, request_id: str, committed: bool) -> None:
    """The web tier's report: the request's message rows committed (or were rolled
    back, and the request is dropped without touching the database)."""
    rendezvous.report(get_redis(), request_id, rendezvous.web_report(committed))


def request_cancel(*, request_id: str, client=None) -> None:
    """Flag the request cancelled and tell the model workers at once. Tiers that have
    not reached it yet check the flag before they start. `client`: the Redis of another
    deployment than this process's (a test's second platform)."""
    pipe = (client or get_redis()).pipeline(transaction=False)
    pipe.set(keys.cancel(request_id), "1", ex=keys.CANCEL_TTL_S)
    pipe.publish(keys.CANCEL_CHANNEL, request_id)
    pipe.execute()


def is_cancelled(*, request_id: str) -> bool:
    return bool(get_redis().exists(keys.cancel(request_id)))
