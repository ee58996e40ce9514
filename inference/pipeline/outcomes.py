"""How a reply ends, written where the web tier reads it: the assistant message's status
and text, its UsageRecord, the sources it cited, the quota's real count, and the
stream's last record.

The one module of the pipeline that writes the web tier's rows (import-linter holds
every other to that). Finishing runs in a task thread after the engine reports the end,
never inside the decode loop."""

from __future__ import annotations

import logging
import time
import uuid

import redis
from django.db import DatabaseError, transaction
from django.utils import timezone

from knowledge.services import citations_record
from tandem.chat import assignment, events
from tandem.chat.models import Conversation, Message
from tenants import quotas
from tenants.models import UsageRecord

from ..wire import metrics, streams
from ..wire.connections import get_redis
from ..wire.spec import RequestSpec
from .contracts import ReplyOutcome

log = logging.getLogger(__name__)

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
        metrics.REQUEST_ERRORS.labels(code).inc()
        _through_outage(lambda: streams.publish(get_redis(), request_id, [streams.error_record(code, message)]),
                        f"the error record of {request_id}")
    _through_outage(lambda: _quota_release(request_id=request_id), f"the quota of {request_id}")
    return bool(updated)


HANDOVER = "handover"  # the CPU tier's "the visitor asked for a person" (inference.text.handover)
HANDOVER_UNGROUNDED = "handover_ungrounded"  # the CPU tier's "the knowledge has no answer" (a tenant setting)
_NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
             "prompt_tokens_details": {"cached_tokens": 0}}


def request_handover(*, request_id: str, text: str, reason: str = "words") -> bool:
    """The visitor asked for a person in words: the reply is `text` (no model call, so no
    UsageRecord), and the conversation waits for a person unless one already has it.
    The conversation's one edge written here (bot | resolved -> pending_human) is the
    same conditional UPDATE as tandem.chat.responder's. Idempotent like request_fail."""
    now = timezone.now()
    with transaction.atomic():
        updated = Message.objects.filter(pk=request_id, status__in=_PROGRESS).update(
            status=Message.Status.DONE, content=text, finish_reason=HANDOVER, finished_at=now)
        if not updated:
            return False
        conversation_id = Message.objects.filter(pk=request_id).values_list("conversation_id", flat=True).first()
        H = Conversation.Handoff
        moved = Conversation.objects.filter(pk=conversation_id, handoff__in=[H.BOT, H.RESOLVED]).update(
            handoff=H.PENDING_HUMAN, handoff_reason=reason, handoff_at=now, updated_at=now, assignee=None,
            claimed_at=None, first_human_reply_at=None, resolved_at=None)
    client = get_redis()
    streams.publish(client, request_id, [streams.token_record(0, text, -1), streams.end_record(HANDOVER, _NO_USAGE)])
    if moved:
        handed_over(client, conversation_id)
    _quota_release(request_id=request_id)
    return True


def handed_over(client: redis.Redis, conversation_id) -> None:
    """Tell the conversation's sockets it waits for a person (offline when no agent is
    online), then give it to the next agent when the tenant assigns round-robin."""
    conversation = Conversation.objects.select_related("tenant").get(pk=conversation_id)
    H = Conversation.Handoff
    events.publish(client, str(conversation_id),
                   assignment.state_event(state=H.PENDING_HUMAN, agent=None, tenant_id=conversation.tenant_id))
    agent = assignment.assign_round_robin(conversation_id=conversation_id, tenant=conversation.tenant)
    if agent is not None:
        events.publish(client, str(conversation_id),
                       assignment.state_event(state=H.HUMAN, agent=agent, tenant_id=conversation.tenant_id))


def request_finish(*, spec: RequestSpec, outcome: ReplyOutcome) -> bool:
    """Write the reply, its UsageRecord and the quota's real count. False, with nothing
    written, when the message is already final: failed while it waited (a timeout, whose
    error record already closed the stream and released the quota), or finished by an
    earlier run of a redelivered task. The caller then writes no end record."""
    o = outcome
    status = Message.Status.CANCELLED if o.finish_reason == "cancelled" else Message.Status.DONE
    with transaction.atomic():
        updated = Message.objects.filter(pk=spec.request_id, status__in=_PROGRESS).update(
            content=o.text, status=status, prompt_tokens=o.prompt_tokens,
            completion_tokens=o.completion_tokens, finish_reason=o.finish_reason,
            ttft_ms=o.ttft_ms, duration_ms=o.duration_ms, finished_at=timezone.now(),
        )
        if not updated:
            return False
        UsageRecord.objects.update_or_create(
            message_id=uuid.UUID(spec.request_id),
            defaults=dict(
                tenant_id=spec.tenant_id, api_key_id=spec.api_key_id, prompt_tokens=o.prompt_tokens,
                cached_tokens=o.cached_tokens, completion_tokens=o.completion_tokens, ttft_ms=o.ttft_ms,
                duration_ms=o.duration_ms, queue_ms=o.queue_ms, prefill_pool=spec.prefill_pool, decode_pool=spec.decode_pool,
                prefill_worker=o.prefill_worker, decode_worker=o.decode_worker, finish_reason=o.finish_reason,
            ),
        )
        citations_record(tenant_id=spec.tenant_id, message_id=spec.request_id, sources=o.sources)
    metrics.REQUESTS_FINISHED.labels(spec.decode_pool, o.finish_reason).inc()
    metrics.E2E_LATENCY.labels(spec.decode_pool, metrics.tenant_label(spec.tenant_id)).observe(o.duration_ms / 1000)
    # The real count replaces the reservation made at admission, and the tenant's stream
    # slot frees (idempotent: a redelivered task does not count twice).
    _through_outage(lambda: quotas.reconcile(get_redis(), tenant_id=spec.tenant_id, request_id=spec.request_id,
                                             actual_tokens=o.prompt_tokens + o.completion_tokens),
                    f"the quota of {spec.request_id}")
    return True


def _through_outage(write, what: str, *, for_s: float = 20.0) -> None:
    """A Redis write at a reply's end, tried again over a Redis restart (its row is
    already written: the write must not make the reply look failed). Given up, with a
    warning, after `for_s`."""
    give_up_at, attempt = time.monotonic() + for_s, 0
    while True:
        try:
            write()
            return
        except redis.RedisError:
            if time.monotonic() > give_up_at:
                log.warning("could not write %s: Redis unreachable", what, exc_info=True)
                return
            metrics.RETRIES.labels("redis_write").inc()
            attempt += 1
            time.sleep(min(1.0, 0.25 * attempt))


def final_record(*, request_id: str) -> dict | None:
    """The stream's last record for a reply already final in the database (None while it
    is in progress): for a worker that picks up a reply whose worker died after writing
    its row but before closing its stream."""
    msg = Message.objects.filter(pk=request_id).first()
    if msg is None or msg.status in _PROGRESS:
        return None
    if msg.status == Message.Status.FAILED:
        code, _, text = msg.error.partition(": ")
        return streams.error_record(code or "failed", text or msg.error)
    usage = UsageRecord.objects.filter(message_id=msg.pk).first()
    cached = usage.cached_tokens if usage is not None else 0
    return streams.end_record(msg.finish_reason or "stop", {
        "prompt_tokens": msg.prompt_tokens, "completion_tokens": msg.completion_tokens,
        "total_tokens": msg.prompt_tokens + msg.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached}},
        {"ttft_ms": msg.ttft_ms, "duration_ms": msg.duration_ms})


def end_record(outcome: ReplyOutcome) -> dict:
    """The stream's last record for a reply that `request_finish` wrote."""
    return streams.end_record(outcome.finish_reason, outcome.usage, outcome.timings, list(outcome.sources))


def _quota_release(*, request_id: str) -> None:
    msg = Message.objects.filter(pk=request_id).select_related("conversation").first()
    if msg is not None:
        quotas.release(get_redis(), tenant_id=msg.conversation.tenant_id, request_id=request_id,
                       tokens_used=msg.prompt_tokens + msg.completion_tokens)
