"""Emitting an event: called by the chat's services in the transaction that made the
change. The event and one delivery per subscribed endpoint are rows of that same
transaction, and the deliveries are queued when it commits; a tenant with no endpoint
for the type pays one indexed SELECT and nothing else. A queueing lost to a crash is
made good by the schedule (schedule.py), so delivery is at least once."""

from __future__ import annotations

import json
import secrets
import time

from django.db import transaction
from django.utils import timezone

from .models import Delivery, Endpoint, Event
from .queue import deliveries_queue

QUEUED_FOR_S = 60  # how long a queued delivery may wait for a worker before it is queued again


def event_emit(*, tenant_id: int, tenant_slug: str | None = None, type: str, data: dict,
               endpoints: list[Endpoint] | None = None) -> Event | None:
    """Store the event `type` with `data` for the tenant's enabled endpoints that
    subscribe to it (or exactly `endpoints`: a test event) and queue its deliveries on
    commit. None when no endpoint wants it."""
    if endpoints is None:
        endpoints = [e for e in Endpoint.objects.filter(tenant_id=tenant_id, enabled=True) if type in e.events]
    if not endpoints:
        return None
    if tenant_slug is None:
        from tenants.models import Tenant

        tenant_slug = Tenant.objects.filter(pk=tenant_id).values_list("slug", flat=True).first()
    event_id = "evt_" + secrets.token_hex(12)
    body = json.dumps({"id": event_id, "type": type, "created": int(time.time()), "tenant": tenant_slug,
                       "data": data}, separators=(",", ":"), default=str)
    now = timezone.now()
    with transaction.atomic():
        event = Event.objects.create(id=event_id, tenant_id=tenant_id, type=type, body=body)
        rows = Delivery.objects.bulk_create(
            [Delivery(endpoint=e, event=event, next_attempt_at=now, lease_until=now + timezone.timedelta(
                seconds=QUEUED_FOR_S)) for e in endpoints])
    ids = [str(r.pk) for r in rows]
    transaction.on_commit(lambda: deliveries_queue(ids))
    return event
