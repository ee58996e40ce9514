"""A tenant's retention period: conversations not touched for this many days are
purged by the daily task (tandem.contacts.tasks). No row, or `days` null: kept."""

from __future__ import annotations

from django.db import models


class RetentionPolicy(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="retention_policy")
    days = models.PositiveIntegerField(null=True, blank=True,
                                       help_text="Delete conversations idle for this many days; empty: keep them.")
    last_purge_at = models.DateTimeField(null=True, blank=True)
    last_purge_count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"retention of {self.tenant_id}: {self.days or 'keep'}"
