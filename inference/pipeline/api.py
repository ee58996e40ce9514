"""The pipeline as the web tier sees it, and all it sees: check a message's text, route
a tenant, admit-and-store a request's keys, submit it, cancel it, fail it. Following a reply's
tokens is the stream reader's (inference.wire.reader). How a reply goes comes back
through the sink the web tier registers (`sink_register`, a `ReplySink`), so nothing
under `inference` imports `tandem`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import transaction

from tenants import quotas

from ..text.handover import OFF as HANDOVER_OFF
from ..text.tokenizer import estimate_prompt_tokens
from ..text.validation import TextRejected, clean_user_text
from ..wire import keys
from ..wire.connections import get_redis
from ..wire.reader import LISTENER_TTL_S
from ..wire.spec import RequestSpec, Sampling
from ..wire.workers import live_workers
from .contracts import HANDOVER, HandOver, ReplyOutcome, ReplySink, ReplyState
from .outcomes import request_fail
from .route import Route, route_for_tenant, served_by
from .sink import register as sink_register
from .submit import request_cancel, request_enqueue, request_keys, request_stored

__all__ = [
    "HANDOVER", "HANDOVER_OFF", "HandOver", "ReplyOutcome", "ReplySink", "ReplyState", "RequestSpec", "Route",
    "Sampling", "TextRejected", "cancel", "clean_user_text", "fail", "estimate_prompt_tokens", "get_redis",
    "keep_listening", "request_keys", "route_for_tenant", "route_is_served", "sink_register", "submit",
]

T = TypeVar("T")


def route_is_served(route: Route) -> bool:
    """Whether a live worker serves every tier of `route` now (one read of the heartbeats)."""
    return served_by(route, live_workers(get_redis()))


def submit(*, spec: RequestSpec, write_rows: Callable[[], T]) -> T:
    """Submit a request that was admitted with its keys (`request_keys`, stored by
    `tenants.quotas.admit`): enqueue its CPU task at once, then run `write_rows` (the
    web tier's rows for it) in a transaction, and report whether they committed, on
    commit of the caller's outermost transaction. The CPU tier builds the prompt while
    the rows are written; the request goes on once both are done (`rendezvous`). When
    anything on the way raises, the admission is released, the request dropped, and the
    error raised again. Returns what `write_rows` returned."""
    request_id = spec.request_id
    try:
        request_enqueue(spec=spec)
        with transaction.atomic():
            rows = write_rows()
    except BaseException:
        quotas.release(get_redis(), tenant_id=spec.tenant_id, request_id=request_id)
        request_stored(request_id=request_id, committed=False)
        raise
    transaction.on_commit(lambda: request_stored(request_id=request_id, committed=True))
    return rows


def keep_listening(*, request_ids: list[str]) -> None:
    """Renew the listener lease of replies someone waits for by reading their stored rows
    rather than their stream (the evaluation harness, the console's trial chat): the
    model workers cancel a request whose lease lapsed (LISTENER_TTL_S after the last
    renewal), as they do a reply whose socket left."""
    if not request_ids:
        return
    pipe = get_redis().pipeline(transaction=False)
    for request_id in request_ids:
        pipe.set(keys.listener(request_id), "1", ex=LISTENER_TTL_S, xx=True)  # never revive a finished one
    pipe.execute()


def cancel(*, request_id: str) -> None:
    """Stop a reply: tiers that have it stop, tiers that have not reached it skip it."""
    request_cancel(request_id=request_id)


def fail(*, request_id: str, code: str, message: str) -> bool:
    """End a reply the web tier stopped waiting for (it went silent): an error record
    closes its stream, the sink marks it failed, its quota is released. False when it
    was already final."""
    return request_fail(request_id=request_id, code=code, message=message)
