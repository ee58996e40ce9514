"""The console's repetition-control form: on/off and the three penalties, each with its
range (the service checks them again)."""

from __future__ import annotations

from django import forms

from .models import RepetitionSettings

_STEP = {"step": "0.05"}


class RepetitionForm(forms.Form):
    enabled = forms.BooleanField(
        required=False, label="Repetition control",
        help_text="Off: replies are sampled without any penalty (a small model may then repeat a sentence "
                  "until its token budget runs out).")
    frequency_penalty = forms.FloatField(
        label="Frequency penalty", min_value=-2.0, max_value=2.0, widget=forms.NumberInput(attrs=_STEP),
        help_text="-2 to 2: subtracted from a token's score once per time it is already in the reply.")
    presence_penalty = forms.FloatField(
        label="Presence penalty", min_value=-2.0, max_value=2.0, widget=forms.NumberInput(attrs=_STEP),
        help_text="-2 to 2: subtracted once from every token already in the reply.")
    repetition_penalty = forms.FloatField(
        label="Repetition penalty", min_value=1.0, max_value=2.0, widget=forms.NumberInput(attrs=_STEP),
        help_text="1 to 2 (1 is off): divides the score of every token of the question or the reply. It also "
                  "discourages quoting the help articles' words.")

    @staticmethod
    def initial_for(row: RepetitionSettings) -> dict:
        return {"enabled": row.enabled, "frequency_penalty": row.frequency_penalty,
                "presence_penalty": row.presence_penalty, "repetition_penalty": row.repetition_penalty}

    def add_service_error(self, exc) -> None:
        self.add_error(exc.param if exc.param in self.fields else None, str(exc))
