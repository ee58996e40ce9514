"""A label: a tenant's name for a kind of conversation, and the conversations that carry
it (a many-to-many held on this side, so the chat app's models know nothing of it)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Lower

# The colours a label may have: names the console's CSS knows (inbox.css .label-<colour>),
# never a tenant's own CSS.
COLORS = ("grey", "blue", "green", "amber", "red", "purple", "teal", "pink")


class Label(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=40)
    color = models.CharField(max_length=16, choices=[(c, c) for c in COLORS], default="grey")
    created_at = models.DateTimeField(auto_now_add=True)
    conversations = models.ManyToManyField("chat.Conversation", related_name="labels", blank=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(Lower("name"), "tenant", name="label_name_unique_ci")]

    def __str__(self) -> str:
        return self.name
