"""A tenant's repetition control: the penalties its assistant's replies are sampled
with on Tandem's own surfaces (the widget, the conversation API, agents' drafts). No
row: the widget's defaults (tandem.chat.sampling.WIDGET_REPETITION), which are on;
`enabled` off: no penalty at all. A request that sets a penalty itself (a socket's
`sampling`, the conversation API's fields) overrides these for that reply."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class RepetitionSettings(models.Model):
    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="repetition")
    enabled = models.BooleanField(default=True)
    # As OpenAI defines them (inference.engine.penalties): per repeat / once per token seen.
    frequency_penalty = models.FloatField(validators=[MinValueValidator(-2.0), MaxValueValidator(2.0)])
    presence_penalty = models.FloatField(validators=[MinValueValidator(-2.0), MaxValueValidator(2.0)])
    # vLLM's: divides the logits of tokens in the prompt or the reply; 1 = off.
    repetition_penalty = models.FloatField(validators=[MinValueValidator(1.0), MaxValueValidator(2.0)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "repetition settings"

    def __str__(self):
        return f"repetition control of {self.tenant_id} ({'on' if self.enabled else 'off'})"
