"""Endpoints as a tenant's admins manage them (console and REST): create (the secret is
answered once), update, delete, send a test event, resend a delivery. Keyword-only;
input that cannot be used raises WebhookInputError naming the field."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from knowledge.outbound import address_refusal, allowed_hosts
from tenants.models import Tenant

from .crypto import secret_encrypt, secret_generate
from .events import QUEUED_FOR_S, event_emit
from .models import EVENT_TYPES, TEST_EVENT, Delivery, Endpoint
from .queue import deliveries_queue
from .sending import url_refusal

MAX_ENDPOINTS = 16


class WebhookInputError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class Created:
    endpoint: Endpoint
    secret: str  # shown once


def _clean_url(url) -> str:
    if not isinstance(url, str) or not url.strip():
        raise WebhookInputError("url", "A URL is required.")
    url = url.strip()
    if len(url) > 2000:
        raise WebhookInputError("url", "The URL is longer than 2000 characters.")
    why = url_refusal(url)
    if why:
        raise WebhookInputError("url", why)
    host = (urlsplit(url).hostname or "").lower()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return url  # a name: resolved and checked before each delivery
    why = address_refusal(host)
    if why and host not in allowed_hosts():
        raise WebhookInputError("url", f"{host} is a {why} address: webhooks go to public addresses only.")
    return url


def _clean_events(events) -> list[str]:
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise WebhookInputError("events", f"Name at least one event type of: {', '.join(EVENT_TYPES)}.")
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown:
        raise WebhookInputError("events", f"Unknown event type {unknown[0]!r}; the types are {', '.join(EVENT_TYPES)}.")
    return [e for e in EVENT_TYPES if e in events]


def _clean_description(description) -> str:
    if not isinstance(description, str) or len(description) > 200:
        raise WebhookInputError("description", "The description is text of at most 200 characters.")
    return description.strip()


def endpoint_create(*, tenant: Tenant, url: str, events: list[str], description: str = "") -> Created:
    url, events, description = _clean_url(url), _clean_events(events), _clean_description(description)
    if Endpoint.objects.filter(tenant=tenant).count() >= MAX_ENDPOINTS:
        raise WebhookInputError("url", f"A tenant has at most {MAX_ENDPOINTS} endpoints.")
    secret = secret_generate()
    endpoint = Endpoint.objects.create(tenant=tenant, url=url, events=events, description=description,
                                       secret_encrypted=secret_encrypt(secret))
    return Created(endpoint=endpoint, secret=secret)


def endpoint_update(*, endpoint: Endpoint, url: str | None = None, events: list[str] | None = None,
                    description: str | None = None, enabled: bool | None = None) -> Endpoint:
    if url is not None:
        endpoint.url = _clean_url(url)
    if events is not None:
        endpoint.events = _clean_events(events)
    if description is not None:
        endpoint.description = _clean_description(description)
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise WebhookInputError("enabled", "enabled is true or false.")
        if enabled and not endpoint.enabled:  # turned on again by a person: its failures start afresh
            endpoint.failing_since, endpoint.disabled_reason = None, ""
        endpoint.enabled = enabled
    endpoint.save()
    return endpoint


def endpoint_delete(*, endpoint: Endpoint) -> None:
    endpoint.delete()


def endpoint_test(*, endpoint: Endpoint) -> Delivery:
    """A `webhook.test` event to this endpoint alone, whatever its subscriptions."""
    with transaction.atomic():
        event = event_emit(tenant_id=endpoint.tenant_id, tenant_slug=endpoint.tenant.slug, type=TEST_EVENT,
                           data={"endpoint": str(endpoint.pk), "message": "A test event from Tandem."},
                           endpoints=[endpoint])
    return event.deliveries.get()


def delivery_resend(*, delivery: Delivery) -> Delivery:
    """The same event (same id and body, so a receiver de-duplicates it) as a new
    delivery to the same endpoint, attempted at once."""
    if not delivery.endpoint.enabled:
        raise WebhookInputError("enabled", "The endpoint is disabled: enable it before resending.")
    now = timezone.now()
    again = Delivery.objects.create(endpoint=delivery.endpoint, event=delivery.event, next_attempt_at=now,
                                    lease_until=now + timedelta(seconds=QUEUED_FOR_S))
    transaction.on_commit(lambda: deliveries_queue([str(again.pk)]))
    return again
