"""Running a call on the CPU tier's `actions` queue (tasks.py): claimed by one
conditional UPDATE (queued, or running past its lease: the worker holding it died), the
endpoint called (outbound.py), the result recorded and the visitor's line updated, then
the reply continued (continuation.py). A call that was refused or denied is only
continued. Idempotent: a redelivered task finds the call claimed or settled."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from . import conf, lines, outbound
from .calls import acting_for, publish_state
from .continuation import continue_after
from .models import ActionCall

S = ActionCall.Status
LEASE_S = 30  # beyond the action's own timeout, before another worker may take it over
log = logging.getLogger(__name__)


def lease_s() -> float:
    return conf.max_timeout_s() * 2 + LEASE_S


def call_run(*, call_id: str) -> float | None:
    """Run and continue the call; or, when another worker holds it (running, its lease
    not yet over), the seconds until its lease ends: the task looks again then, so a
    call whose worker died is taken over rather than lost."""
    now = timezone.now()
    stale = now - timedelta(seconds=lease_s())
    if ActionCall.objects.filter(pk=call_id).filter(Q(status=S.QUEUED) | Q(status=S.RUNNING, started_at__lt=stale)) \
            .update(status=S.RUNNING, started_at=now):
        _run(ActionCall.objects.select_related("action", "conversation").get(pk=call_id))
    held = ActionCall.objects.filter(pk=call_id, status=S.RUNNING).values_list("started_at", flat=True).first()
    if held is not None:
        return max(1.0, (held - stale).total_seconds())
    continue_after(call_id=call_id)
    return None


def _run(call: ActionCall) -> None:
    action, conv = call.action, call.conversation
    if action is None or not action.enabled:
        status, http_status, result, error, took = S.REFUSED, None, "", "the action was removed or disabled", 0
    else:
        user_id, verified = acting_for(conv)
        answer = outbound.call(action, call.arguments, user_id=user_id, verified=verified, call_id=str(call.pk))
        status = S.SUCCEEDED if answer.ok else S.FAILED
        http_status, error, took = answer.status, answer.error, answer.duration_ms
        result = _capped(answer.body) if answer.ok else ""
    line = call.status_line if status == S.SUCCEEDED else (lines.FAILED if status == S.FAILED else lines.NOT_AVAILABLE)
    ActionCall.objects.filter(pk=call.pk, status=S.RUNNING).update(
        status=status, http_status=http_status, result=result, error=error[:300], duration_ms=took,
        status_line=line, finished_at=timezone.now())
    call.refresh_from_db()
    try:
        publish_state(call)
    except Exception:
        log.exception("could not publish the state of action call %s", call.pk)


def _capped(body: str) -> str:
    limit = conf.result_chars()
    body = body.strip() or "(done; the endpoint answered with no content)"
    return body if len(body) <= limit else body[:limit] + "… (cut)"
