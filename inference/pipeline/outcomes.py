"""How a reply ends: reported to the web tier's sink (the assistant message's status and
text, the conversation's owner on a hand-over), and written here where the pipeline
keeps it: the reply's UsageRecord and the sources it cited, the quota's real count, and
the stream's last record.

The sink (`contracts.ReplySink`) is what the web tier registers (`sink.register`)
when Django sets up (tandem.chat's AppConfig.ready), in every process type: daphne, the
CPU and model workers, management commands. Nothing under `inference` imports `tandem`
(import-linter holds that). Finishing runs in a task thread after the engine reports
the end, never inside the decode loop."""

from __future__ import annotations

import logging
import time
import uuid

import redis
from django.db import DatabaseError, transaction

from knowledge.services import citations_record
from tenants import quotas
from tenants.models import UsageRecord

from ..wire import metrics, streams
from ..wire.connections import get_redis
from ..wire.spec import RequestSpec
from .contracts import HANDOVER, ReplyOutcome
from .sink import current as sink

log = logging.getLogger(__name__)

def message_set_status(*, request_id: str, status: str) -> None:
    """Advance the reply to `status` unless it is already there, further on, or final
    (tiers report from different processes, and a later tier can report before an
    earlier one). Best effort: tiers call this after sending the request on, and a failed
    progress write must not fail a request that is already running (its finish writes
    the row)."""
    try:
        sink().reply_progressed(request_id=request_id, status=status)
    except DatabaseError:
        log.warning("could not mark %s %s", request_id, status, exc_info=True)


def request_fail(*, request_id: str, code: str, message: str) -> bool:
    """Close the stream with an error record and mark the reply failed. Idempotent: a
    reply already final is left as it is, and False says so."""
    updated = sink().reply_failed(request_id=request_id, error=f"{code}: {message}")
    if updated:
        metrics.REQUEST_ERRORS.labels(code).inc()
        _through_outage(lambda: streams.publish(get_redis(), request_id, [streams.error_record(code, message)]),
                        f"the error record of {request_id}")
    _through_outage(lambda: _quota_release(request_id=request_id), f"the quota of {request_id}")
    return bool(updated)


_NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
             "prompt_tokens_details": {"cached_tokens": 0}}


def request_handover(*, request_id: str, text: str, reason: str = "words") -> bool:
    """The visitor asked for a person in words: the reply is `text` (no model call, so no
    UsageRecord), and the conversation waits for a person unless one already has it.
    Idempotent like request_fail."""
    handed = sink().reply_handed_over(request_id=request_id, text=text, reason=reason)
    if handed is None:
        return False
    client = get_redis()
    streams.publish(client, request_id, [streams.token_record(0, text, -1), streams.end_record(HANDOVER, _NO_USAGE)])
    if handed.waits:
        sink().conversation_handed_over(conversation_id=handed.conversation_id)
    _quota_release(request_id=request_id)
    return True


def request_finish(*, spec: RequestSpec, outcome: ReplyOutcome) -> bool:
    """Write the reply, its UsageRecord and the quota's real count. False, with nothing
    written, when the reply is already final: failed while it waited (a timeout, whose
    error record already closed the stream and released the quota), or finished by an
    earlier run of a redelivered task. The caller then writes no end record."""
    o = outcome
    with transaction.atomic():
        if not sink().reply_finished(request_id=spec.request_id, outcome=o):
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
    """The stream's last record for a reply already final (None while it is in
    progress): for a worker that picks up a reply whose worker died after writing its
    row but before closing its stream."""
    state = sink().reply_state(request_id=request_id)
    if state is None or not state.final:
        return None
    if state.status == "failed":
        code, _, text = state.error.partition(": ")
        return streams.error_record(code or "failed", text or state.error)
    usage = UsageRecord.objects.filter(message_id=request_id).first()
    cached = usage.cached_tokens if usage is not None else 0
    return streams.end_record(state.finish_reason or "stop", {
        "prompt_tokens": state.prompt_tokens, "completion_tokens": state.completion_tokens,
        "total_tokens": state.prompt_tokens + state.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached}},
        {"ttft_ms": state.ttft_ms, "duration_ms": state.duration_ms})


def end_record(outcome: ReplyOutcome) -> dict:
    """The stream's last record for a reply that `request_finish` wrote."""
    return streams.end_record(outcome.finish_reason, outcome.usage, outcome.timings, list(outcome.sources))


def _quota_release(*, request_id: str) -> None:
    state = sink().reply_state(request_id=request_id)
    if state is not None:
        quotas.release(get_redis(), tenant_id=state.tenant_id, request_id=request_id,
                       tokens_used=state.prompt_tokens + state.completion_tokens)
