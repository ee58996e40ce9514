"""The request lifecycle across tiers, as services the web tier and the tasks call:
submit (spec to Redis, first task enqueued), cancel, fail and finish.

Finishing writes the assistant message and its UsageRecord; it runs in a task thread
after the engine reports the end, never inside the decode loop."""

from __future__ import annotations

import logging
import time
import uuid

from django.db import DatabaseError, transaction
from django.utils import timezone

from tandem.chat.models import Message
from tenants import quotas
from tenants.models import UsageRecord

from . import keys, publish, streams
from .redis_client import get_redis
from .requests import REQUEST_TTL_S, RequestSpec

log = logging.getLogger(__name__)
CANCEL_TTL_S = 3600
LISTENER_TTL_S = 30


def request_keys(spec: RequestSpec) -> dict[str, tuple[str, float]]:
    """A new request's keys, {key: (value, TTL s)}: its spec and the listener lease. The
    web tier stores them with the request's admission, in the same round trip
    (`tenants.quotas.admit(store=...)`)."""
    spec.enqueued_at = time.time()
    return {keys.request(spec.request_id): (spec.to_json(), REQUEST_TTL_S),
            keys.listener(spec.request_id): ("1", LISTENER_TTL_S)}


def request_enqueue(*, spec: RequestSpec) -> None:
    """Enqueue the CPU task of a request whose keys are stored, at once, before the
    caller stores the message rows: the CPU tier builds the prompt from the spec alone,
    so the web tier's INSERTs and COMMIT run while it works instead of before it (~3 ms
    of the time to first token on the benchmark machine). The caller must then report
    the outcome with `request_stored`; the request goes on (or fails) only once both the
    commit and the prompt are done (inference.handoff), so no tier ever looks for a
    message row that is not yet visible."""
    from .routing import broker_priority
    from .tasks import preprocess

    publish.send(preprocess, [spec.request_id], queue="cpu", priority=broker_priority(spec.priority))


def request_stored(*, request_id: str, committed: bool) -> None:
    """The web tier's report: the request's message rows committed (or were rolled
    back, and the request is dropped without touching the database). See handoff."""
    from . import handoff

    handoff.report(get_redis(), request_id, handoff.web_report(committed))


def listener_touch(*, request_id: str) -> None:
    """Someone is still reading this request's stream: keep it alive."""
    get_redis().set(keys.listener(request_id), "1", ex=LISTENER_TTL_S)


def request_cancel(*, request_id: str) -> None:
    """Flag the request cancelled and tell the decode workers at once. Tiers that have
    not reached it yet check the flag before they start."""
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    pipe.set(keys.cancel(request_id), "1", ex=CANCEL_TTL_S)
    pipe.publish(keys.CANCEL_CHANNEL, request_id)
    pipe.execute()


def is_cancelled(*, request_id: str) -> bool:
    return bool(get_redis().exists(keys.cancel(request_id)))


# A message's progress, in order. Tiers report it from different processes, and a later
# tier can report before an earlier one (the prefill tier may be done before the CPU tier
# writes "prefilling"), so a status only ever moves forward.
_PROGRESS = [Message.Status.QUEUED, Message.Status.PREFILLING, Message.Status.DECODING]


def message_set_status(*, request_id: str, status: str) -> None:
    """Advance the message to `status` unless it is already there, further on, or final.
    Best effort: tiers call this after sending the request on, and a failed progress
    write must not fail a request that is already running (its finish writes the row)."""
    earlier = _PROGRESS[: _PROGRESS.index(status)]
    try:
        Message.objects.filter(pk=request_id, status__in=earlier).update(status=status)
    except DatabaseError:
        log.warning("could not mark %s %s", request_id, status, exc_info=True)


def request_fail(*, request_id: str, code: str, message: str) -> bool:
    """Close the stream with an error record and mark the message failed. Idempotent: a
    message already final is left as it is, and False says so."""
    updated = Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
        status=Message.Status.FAILED, error=f"{code}: {message}", finished_at=timezone.now())
    if updated:
        streams.publish(get_redis(), request_id, [streams.error_record(code, message)])
    _quota_release(request_id=request_id)
    return bool(updated)


def request_finish(
    *, spec: RequestSpec, text: str, finish_reason: str, prompt_tokens: int, cached_tokens: int,
    completion_tokens: int, ttft_ms: float | None, duration_ms: float, prefill_worker: str,
    decode_worker: str,
) -> bool:
    """Write the reply, its UsageRecord and the quota's real count. False, with nothing
    written, when the message is already final: failed while it waited (a timeout, whose
    error record already closed the stream and released the quota), or finished by an
    earlier run of a redelivered task. The caller then writes no end record."""
    status = Message.Status.CANCELLED if finish_reason == "cancelled" else Message.Status.DONE
    with transaction.atomic():
        updated = Message.objects.filter(pk=spec.request_id, status__in=_PROGRESS).update(
            content=text, status=status, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, finish_reason=finish_reason,
            ttft_ms=ttft_ms, duration_ms=duration_ms, finished_at=timezone.now(),
        )
        if not updated:
            return False
        UsageRecord.objects.update_or_create(
            message_id=uuid.UUID(spec.request_id),
            defaults=dict(
                tenant_id=spec.tenant_id, api_key_id=spec.api_key_id, prompt_tokens=prompt_tokens,
                cached_tokens=cached_tokens, completion_tokens=completion_tokens, ttft_ms=ttft_ms,
                duration_ms=duration_ms, prefill_pool=spec.prefill_pool, decode_pool=spec.decode_pool,
                prefill_worker=prefill_worker, decode_worker=decode_worker, finish_reason=finish_reason,
            ),
        )
    _quota_reconcile(spec=spec, actual_tokens=prompt_tokens + completion_tokens)
    return True


def _quota_reconcile(*, spec: RequestSpec, actual_tokens: int) -> None:
    """The real count replaces the reservation made at admission, and the tenant's
    stream slot frees (idempotent: a redelivered task does not count twice)."""
    quotas.reconcile(get_redis(), tenant_id=spec.tenant_id, request_id=spec.request_id,
                     actual_tokens=actual_tokens)


def _quota_release(*, request_id: str) -> None:
    msg = Message.objects.filter(pk=request_id).select_related("conversation").first()
    if msg is not None:
        quotas.release(get_redis(), tenant_id=msg.conversation.tenant_id, request_id=request_id,
                       tokens_used=msg.prompt_tokens + msg.completion_tokens)
