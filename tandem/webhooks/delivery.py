"""One attempt of one delivery, on the webhooks worker. The attempt claims the delivery
with a conditional UPDATE (so a task that arrives twice, or after the delivery
succeeded, does nothing), signs the event's stored body with the endpoint's secret,
POSTs it and records the outcome: success; or a retry at the next step of the backoff
(TANDEM_WEBHOOK_RETRY_BASE_S, doubling, at most MAX_DELAY_S) while the event is younger
than TANDEM_WEBHOOK_RETRY_HOURS; or failure. An endpoint that has failed every attempt
for DISABLE_AFTER is disabled, and its waiting deliveries fail with it."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from . import sending, signing
from .crypto import secret_decrypt
from .models import Delivery, Endpoint

LEASE_S = 30            # longer than one attempt can take (sending.TIMEOUT_S)
MAX_DELAY_S = 3600
DISABLE_AFTER = timedelta(hours=72)
S = Delivery.Status
log = logging.getLogger(__name__)


def retry_delay_s(attempts: int) -> float:
    """The wait after the `attempts`-th failed attempt: base, 2 × base, 4 × base, ..."""
    return min(settings.TANDEM_WEBHOOK_RETRY_BASE_S * 2 ** (attempts - 1), MAX_DELAY_S)


def _claim(delivery_id: str) -> bool:
    now = timezone.now()
    due = Q(status=S.PENDING, next_attempt_at__lte=now) | Q(status=S.SENDING, lease_until__lt=now)
    return bool(Delivery.objects.filter(due, pk=delivery_id).update(
        status=S.SENDING, lease_until=now + timedelta(seconds=LEASE_S), attempts=F("attempts") + 1))


def delivery_attempt(*, delivery_id: str) -> Delivery | None:
    """Attempt the delivery if it is due; the delivery as recorded, or None when it was
    not (done, or held by another attempt)."""
    if not _claim(delivery_id):
        return None
    delivery = Delivery.objects.select_related("endpoint", "event").get(pk=delivery_id)
    try:
        return _attempt(delivery)
    except Exception as exc:
        # Whatever went wrong here (a resolver error, a lost database connection), the
        # attempt is recorded and retried on schedule: left 'sending', the delivery would
        # wait out its lease before anyone tried again.
        log.exception("webhook delivery %s: the attempt failed", delivery_id)
        return _record(delivery, status=S.PENDING, error=f"internal error: {exc.__class__.__name__}", code=None,
                       ms=None, next_attempt_at=timezone.now() + timedelta(seconds=retry_delay_s(delivery.attempts)))


def _attempt(delivery: Delivery) -> Delivery:
    endpoint, event = delivery.endpoint, delivery.event
    if not endpoint.enabled:
        return _record(delivery, status=S.FAILED, error="the endpoint is disabled", code=None, ms=None)
    body = event.body.encode()
    headers = {"Tandem-Signature": signing.signature_header(secret=secret_decrypt(endpoint.secret_encrypted),
                                                            body=body, timestamp=int(time.time())),
               "Tandem-Event-Id": event.id, "Tandem-Event-Type": event.type}
    sent = sending.post(endpoint.url, body=body, headers=headers)
    if sent.ok:
        if endpoint.failing_since is not None:
            Endpoint.objects.filter(pk=endpoint.pk).update(failing_since=None)
        return _record(delivery, status=S.SUCCEEDED, error="", code=sent.status, ms=sent.duration_ms)
    now = timezone.now()
    retry_at = now + timedelta(seconds=retry_delay_s(delivery.attempts))
    window = timedelta(hours=settings.TANDEM_WEBHOOK_RETRY_HOURS)
    if endpoint.failing_since is None:
        Endpoint.objects.filter(pk=endpoint.pk, failing_since__isnull=True).update(failing_since=now)
    elif now - endpoint.failing_since >= DISABLE_AFTER:
        endpoint_disable(endpoint=endpoint, reason=f"Disabled {now:%Y-%m-%d %H:%M} UTC: every delivery failed "
                                                   f"for {DISABLE_AFTER.days} days.")
        return _record(delivery, status=S.FAILED, error=sent.error, code=sent.status, ms=sent.duration_ms)
    if retry_at - event.created_at > window:
        return _record(delivery, status=S.FAILED, error=sent.error, code=sent.status, ms=sent.duration_ms)
    return _record(delivery, status=S.PENDING, error=sent.error, code=sent.status, ms=sent.duration_ms,
                   next_attempt_at=retry_at)


def endpoint_disable(*, endpoint: Endpoint, reason: str) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False, disabled_reason=reason)
    Delivery.objects.filter(endpoint=endpoint, status=S.PENDING).update(
        status=S.FAILED, error="the endpoint was disabled", next_attempt_at=None)


def _record(delivery: Delivery, *, status, error: str, code, ms, next_attempt_at=None) -> Delivery:
    # Only the attempt that holds the lease writes (a stale one finds it moved on).
    Delivery.objects.filter(pk=delivery.pk, status=S.SENDING, attempts=delivery.attempts).update(
        status=status, error=error[:300], response_code=code, duration_ms=ms, next_attempt_at=next_attempt_at,
        lease_until=None, updated_at=timezone.now())
    delivery.refresh_from_db()
    return delivery
