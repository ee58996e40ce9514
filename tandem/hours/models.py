"""A tenant's business hours. No row, or `enabled` off: the team counts as in hours at
any time (then only the agents' presence says whether someone can answer)."""

from __future__ import annotations

from django.db import models


class BusinessHours(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="business_hours")
    enabled = models.BooleanField(default=False)
    time_zone = models.CharField(max_length=64, default="UTC")  # an IANA name, e.g. Europe/Paris
    # {"0": ["09:00", "17:00"], …}: Monday is "0"; a day that is missing is closed. One
    # opening a day, closing after opening on the same day (schedule.parse checks it).
    weekly = models.JSONField(default=dict, blank=True)
    # [{"date": "2026-12-25", "name": "Christmas"}, …]: closed all day, in the tenant's zone.
    holidays = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "business hours"

    def __str__(self):
        return f"business hours of {self.tenant_id} ({'on' if self.enabled else 'off'})"
