"""Test cases of a tenant's assistant, the runs that checked them, and the draft of the
assistant's settings that a run or the console's trial chat may use instead of the live
ones (published only by a person: `drafts.draft_publish`)."""

from __future__ import annotations

import uuid

from django.conf import settings as conf
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from knowledge.models import MAX_TOP_K, MODES


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


class AssistantDraft(models.Model):
    """A tenant's draft of the settings that shape a reply: the system prompt, retrieval
    and sampling. One per tenant; runs and the trial chat name it by id, and the server
    reads it (a client never sends the settings themselves). Publishing copies it onto
    the live settings and deletes it."""

    TENANT_PATH = "tenant"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    system_prompt = models.TextField(blank=True, default="")
    knowledge_enabled = models.BooleanField(default=True, help_text="Ground replies in the tenant's articles.")
    top_k = models.PositiveSmallIntegerField(default=3, validators=[MinValueValidator(1), MaxValueValidator(MAX_TOP_K)],
                                             help_text="Passages retrieved for each message.")
    min_score = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                                  help_text="Passages scoring below this (0..1) are left out.")
    mode = models.CharField(max_length=8, default="hybrid", choices=[(m, m) for m in MODES])
    # Sampling: blank keeps the platform's default for the widget and the conversation API
    # (tandem.chat.sampling.sampling_for_tandem).
    temperature = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    frequency_penalty = models.FloatField(null=True, blank=True,
                                          validators=[MinValueValidator(-2.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)],
                                             help_text="At most the tenant's maximum output tokens.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    def __str__(self) -> str:
        return f"draft({self.tenant_id})"


class EvalRun(models.Model):
    TENANT_PATH = "tenant"

    class Settings(models.TextChoices):
        LIVE = "live"
        DRAFT = "draft"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"  # could not go on (`error` says why); the results so far are kept

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    settings = models.CharField(max_length=8, choices=Settings.choices, default=Settings.LIVE)
    # What the run's requests carried (assistant_settings.AssistantSettings.as_dict): a
    # draft changes or goes, the run still says what it measured.
    settings_used = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    error = models.CharField(max_length=300, blank=True, default="")
    total = models.PositiveIntegerField(default=0)  # cases when it started
    # The case ids still to ask, in order, and the replies in flight {message id: case id}.
    pending = models.JSONField(default=list, blank=True)
    in_flight = models.JSONField(default=dict, blank=True)
    step = models.PositiveIntegerField(default=0)  # the step task that may act next (idempotence)
    progressed_at = models.DateTimeField(auto_now=True)  # its last step (a run long without one stalled)
    created_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-started_at", "-id"]

    @property
    def done(self) -> int:
        return self.total - len(self.pending) - len(self.in_flight)

    @property
    def is_final(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class EvalResult(models.Model):
    TENANT_PATH = "run__tenant"

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, null=True, on_delete=models.SET_NULL, related_name="+")
    question = models.TextField()  # as asked, kept if the case changes
    message_id = models.UUIDField(null=True, blank=True)  # the reply (its usage record is counted as any)
    reply = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16)  # the reply's: done, failed, timeout, refused
    checks = models.JSONField(default=dict)  # {check: true | false}, only those the case asks for
    passed = models.BooleanField(default=False)
    repetition = models.FloatField(default=0.0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(null=True, blank=True)
    sources = models.JSONField(default=list, blank=True)  # what the reply cited, by rank: {"article_id", "title"}

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["run", "message_id"], name="uniq_eval_result_message")]
