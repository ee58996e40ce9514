"""Endpoints, events and deliveries. An event is stored once with the exact body every
endpoint receives (so a resend sends the same bytes and the same event id); a delivery
is one event for one endpoint, updated at each attempt."""

from __future__ import annotations

import uuid

from django.db import models

from tenants.models import Tenant

EVENT_TYPES = ("conversation.created", "message.created", "conversation.handoff", "reply.failed",
               "feedback.created", "csat.created")
TEST_EVENT = "webhook.test"


class Endpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True, default="")
    events = models.JSONField(default=list)  # event types; every one of EVENT_TYPES when empty is not allowed
    # The signing secret, encrypted with a key derived from SECRET_KEY (crypto.py): it
    # must be readable to sign, so it cannot be hashed.
    secret_encrypted = models.TextField()
    enabled = models.BooleanField(default=True)
    # Set by the first failed attempt after a success; an endpoint failing for
    # TANDEM_WEBHOOK_DISABLE_AFTER_H is disabled (`disabled_reason` says so in the console).
    failing_since = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self):
        return f"webhook {self.url}"


class Event(models.Model):
    id = models.CharField(primary_key=True, max_length=40)  # evt_<hex>
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_events")
    type = models.CharField(max_length=40)
    body = models.TextField()  # the JSON sent, byte for byte
    created_at = models.DateTimeField(auto_now_add=True)


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"        # waiting for its first attempt or a retry (next_attempt_at)
        SENDING = "sending"        # a worker holds it until lease_until
        SUCCEEDED = "succeeded"
        FAILED = "failed"          # retries exhausted, or the endpoint was disabled

    TENANT_PATH = "endpoint__tenant"  # tenants.access narrows deliveries through their endpoint

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "next_attempt_at"]),
                   models.Index(fields=["endpoint", "-created_at"])]
