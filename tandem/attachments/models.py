"""An attachment (a file a visitor or an agent sent in a conversation) and a tenant's
limits on them. An upload is kept first with no message (`message` null: the widget's
upload, `owner` the visitor who may send it); sending it into the conversation links it
to the message that carries it (tandem.attachments.services)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from .kinds import DEFAULT_KINDS

DEFAULT_MAX_BYTES = 10 * 1024 * 1024


def _default_kinds() -> list[str]:
    return list(DEFAULT_KINDS)


class AttachmentPolicy(models.Model):
    """What a tenant's visitors and agents may send. No row: the defaults."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="attachment_policy")
    enabled = models.BooleanField(default=True)
    kinds = models.JSONField(default=_default_kinds, help_text="Allowed kinds: image, pdf, text.")
    max_bytes = models.PositiveBigIntegerField(default=DEFAULT_MAX_BYTES)

    def __str__(self) -> str:
        return f"attachments of {self.tenant_id}: {self.kinds} up to {self.max_bytes} bytes"


class Attachment(models.Model):
    TENANT_PATH = "tenant"

    class Sender(models.TextChoices):
        VISITOR = "visitor"
        AGENT = "agent"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, null=True, blank=True,
                                     related_name="attachments")
    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, null=True, blank=True,
                                related_name="attachments")
    sender = models.CharField(max_length=8, choices=Sender.choices)
    # Who may send a widget upload: the visitor's subject ("visitor:<id>", "user:<id>").
    owner = models.CharField(max_length=160, blank=True, default="")
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    # The file's name in the attachments storage (tandem.attachments.storage): read through
    # the storage each time, so a deployment that changes backends needs no migration.
    path = models.CharField(max_length=200)
    name = models.CharField(max_length=200)  # as the sender named it, cleaned
    content_type = models.CharField(max_length=100)  # as sniffed from the bytes (kinds.sniff)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["tenant", "created_at"])]

    def __str__(self) -> str:
        return f"attachment {self.name} ({self.content_type}, {self.size} B)"
