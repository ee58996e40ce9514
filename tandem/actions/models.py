"""An action (what a tenant's admins define) and a call of it (one tool call the
assistant made in a conversation, from the call to its result)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tenants.models import Tenant

# The role of a call's result in the transcript (a chat Message): agents see it, the
# model reads it as a tool message (tandem.api.tool_calls), the visitor never does.
# Not among chat's Message.Role choices yet: adding it there is a migration of the chat
# app, which others are changing at the same time (docs/actions.md, "Known gaps").
TOOL_ROLE = "tool"


class Action(models.Model):
    class Method(models.TextChoices):
        GET = "GET", "GET"
        POST = "POST", "POST"
        PUT = "PUT", "PUT"
        PATCH = "PATCH", "PATCH"
        DELETE = "DELETE", "DELETE"

    class Who(models.TextChoices):
        VERIFIED = "verified", "Verified users only"  # the site proved the user's id (identity hash)
        ANYONE = "anyone", "Any visitor"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="actions")
    name = models.CharField(max_length=64)  # the function name the model calls
    description = models.TextField(max_length=1000)  # for the model: when to call it
    status_text = models.CharField(max_length=120, blank=True, default="")  # the widget's line while it runs
    parameters = models.JSONField(default=dict)  # a JSON schema of an object
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GET)
    url_template = models.CharField(max_length=2000)  # placeholders {param} in the path and query only
    headers = models.JSONField(default=dict)  # plain headers, {name: value}
    secret_header_name = models.CharField(max_length=100, blank=True, default="")
    # Encrypted like webhook secrets (tandem.webhooks.crypto): it must be sent, so it
    # cannot be hashed. Shown once, when set.
    secret_header_encrypted = models.TextField(blank=True, default="")
    # Signs the user id the call carries (Tandem-Signature); shown once, at creation.
    signing_secret_encrypted = models.TextField()
    timeout_s = models.FloatField(default=5.0)
    who = models.CharField(max_length=10, choices=Who.choices, default=Who.VERIFIED)
    needs_approval = models.BooleanField(default=False)
    # Phrases, one a line: a visitor's message that contains one (case-insensitive) makes
    # the first pass call this action (a named tool_choice), rather than leaving it to
    # the model (docs/actions.md, "Forcing a call").
    trigger_phrases = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_action_name")]

    def __str__(self) -> str:
        return f"action {self.name} ({self.tenant_id})"

    @property
    def line(self) -> str:
        """What the visitor reads while it runs."""
        return self.status_text or f"Running {self.name.replace('_', ' ')}…"

    def phrases(self) -> list[str]:
        return [p.strip().lower() for p in self.trigger_phrases.splitlines() if p.strip()]


class ActionCall(models.Model):
    TENANT_PATH = "tenant"

    class Status(models.TextChoices):
        AWAITING_APPROVAL = "awaiting_approval"
        QUEUED = "queued"          # to run (approved, or needing no approval)
        RUNNING = "running"        # a worker holds it since started_at
        SUCCEEDED = "succeeded"    # the endpoint answered 2xx
        FAILED = "failed"          # no answer, an error status, or a refused address
        REFUSED = "refused"        # not allowed for this visitor, bad arguments, too many rounds
        DENIED = "denied"          # a person said no

    FINAL = (Status.SUCCEEDED, Status.FAILED, Status.REFUSED, Status.DENIED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="action_calls")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="action_calls")
    # The assistant message whose reply was the call (one call per reply).
    message = models.OneToOneField("chat.Message", on_delete=models.CASCADE, related_name="action_call")
    action = models.ForeignKey(Action, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls")
    name = models.CharField(max_length=64)  # as called, kept when the action is deleted
    arguments = models.JSONField(default=dict)
    round = models.PositiveSmallIntegerField(default=1)  # its place among the turn's tool rounds
    status = models.CharField(max_length=20, choices=Status.choices)
    status_line = models.CharField(max_length=200, blank=True, default="")  # what the visitor was shown
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    result = models.TextField(blank=True, default="")  # what the model was told (capped)
    error = models.CharField(max_length=300, blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The reply that continued after the result (None until it is submitted).
    continuation = models.ForeignKey("chat.Message", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "status"]), models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return f"call of {self.name} ({self.status})"
