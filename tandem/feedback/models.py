"""What visitors said of the assistant: a rating of one reply (`Feedback`) and a
satisfaction score of a whole conversation (`Csat`). `rater` is who rated, as the
per-visitor limits name them (`Visitor.subject`: "visitor:<id>" or "user:<id>"), or
"api" for a REST conversation with no visitor: one rating per reply per rater."""

from __future__ import annotations

from django.db import models


class Feedback(models.Model):
    TENANT_PATH = "tenant"

    class Rating(models.TextChoices):
        UP = "up"
        DOWN = "down"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="feedback")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="feedback")
    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="feedback")
    rater = models.CharField(max_length=160)
    rating = models.CharField(max_length=4, choices=Rating.choices)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["message", "rater"], name="uniq_feedback_per_rater")]
        indexes = [models.Index(fields=["tenant", "-updated_at"])]

    def __str__(self) -> str:
        return f"{self.rating} on {self.message_id} by {self.rater}"


class Csat(models.Model):
    """One score per conversation, given once. `answered_by` is who had answered it when
    it was rated ("ai" or "human"), so CSAT can be reported for each."""

    TENANT_PATH = "tenant"

    class AnsweredBy(models.TextChoices):
        AI = "ai"
        HUMAN = "human"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="csat")
    conversation = models.OneToOneField("chat.Conversation", on_delete=models.CASCADE, related_name="csat")
    score = models.PositiveSmallIntegerField()
    comment = models.TextField(blank=True, default="")
    answered_by = models.CharField(max_length=8, choices=AnsweredBy.choices)
    rater = models.CharField(max_length=160)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.CheckConstraint(condition=models.Q(score__gte=1, score__lte=5), name="csat_score_1_to_5")]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"CSAT {self.score} on {self.conversation_id}"


class ConversationOutcome(models.Model):
    """One conversation as the Outcomes page counts it (docs/outcomes.md): written by the
    periodic rollup (tandem.feedback.rollup) from messages, usage records, citations,
    ratings and CSAT, so a page view reads these rows, never the messages."""

    TENANT_PATH = "tenant"

    class Outcome(models.TextChoices):
        AI_RESOLVED = "ai_resolved"
        HANDED_OVER = "handed_over"
        HUMAN_RESOLVED = "human_resolved"
        ABANDONED = "abandoned"
        PENDING = "pending"  # the assistant answered last, less than 24 h ago: not decided yet

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    conversation = models.OneToOneField("chat.Conversation", on_delete=models.CASCADE, related_name="outcome")
    day = models.DateField()  # the day the conversation started (UTC)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    handoff_reason = models.CharField(max_length=16, blank=True, default="")
    ai_involved = models.BooleanField(default=False)  # the assistant finished at least one reply
    first_ai_response_ms = models.FloatField(null=True, blank=True)
    first_human_response_ms = models.FloatField(null=True, blank=True)
    replies = models.PositiveIntegerField(default=0)
    # Replies that left a question unanswered: retrieval found nothing above min_score, or a 👎.
    unanswered_replies = models.PositiveIntegerField(default=0)
    thumbs_up = models.PositiveIntegerField(default=0)
    thumbs_down = models.PositiveIntegerField(default=0)
    csat_score = models.PositiveSmallIntegerField(null=True, blank=True)
    csat_answered_by = models.CharField(max_length=8, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    prefill_s = models.FloatField(default=0.0)
    decode_s = models.FloatField(default=0.0)
    computed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "day"])]

    def __str__(self) -> str:
        return f"{self.outcome} ({self.conversation_id})"
