"""Test cases of a tenant's assistant, and the runs that checked them."""

from __future__ import annotations

from django.db import models


class EvalCase(models.Model):
    TENANT_PATH = "tenant"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    question = models.TextField()
    # Optional expectations; an empty one is not checked.
    expect_article = models.ForeignKey("knowledge.Article", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+", help_text="The article the reply should cite.")
    must_include = models.JSONField(default=list, blank=True, help_text="Phrases the reply must contain.")
    must_not_include = models.JSONField(default=list, blank=True, help_text="Phrases it must not contain.")
    expect_handover = models.BooleanField(null=True, blank=True, help_text="Whether it should hand over.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.question[:60]


class EvalRun(models.Model):
    TENANT_PATH = "tenant"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at"]


class EvalResult(models.Model):
    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, null=True, on_delete=models.SET_NULL, related_name="+")
    question = models.TextField()  # as asked, kept if the case changes
    message_id = models.UUIDField(null=True, blank=True)  # the reply (its usage record is counted as any)
    reply = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16)  # the reply's: done, failed, timeout
    checks = models.JSONField(default=dict)  # {check: true | false}, only those the case asks for
    passed = models.BooleanField(default=False)
    repetition = models.FloatField(default=0.0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
