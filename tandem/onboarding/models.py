"""What the checklist needs that no other table holds: when the tenant's embed snippet
was first copied in the console, and when its widget first connected from an origin
the tenant allowed (and from which one). One row per tenant, made by the first fact."""

from __future__ import annotations

from django.db import models


class TenantSetup(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, primary_key=True,
                                  related_name="setup")
    snippet_copied_at = models.DateTimeField(null=True, blank=True)
    widget_connected_at = models.DateTimeField(
        null=True, blank=True, help_text="The widget's first connection from an allowed origin.")
    widget_origin = models.CharField(max_length=300, blank=True, default="")

    def __str__(self) -> str:
        return f"setup({self.tenant_id})"
