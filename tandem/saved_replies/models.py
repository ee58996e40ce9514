"""A saved reply: one tenant's text an agent expands by its shortcut."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SavedReply(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="saved_replies")
    shortcut = models.CharField(max_length=32)  # typed as "/<shortcut>"; lower case, digits, - and _
    text = models.TextField()  # may hold {{visitor.name}} and the other VARIABLES (templating.py)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["shortcut"]
        constraints = [models.UniqueConstraint(fields=["tenant", "shortcut"], name="saved_reply_shortcut_unique")]

    def __str__(self) -> str:
        return f"/{self.shortcut}"
