"""The console's business-hours form: on/off, the time zone, each weekday's opening and
closing time (both empty: closed that day) and the holidays, one a line. The checking
is the service's (schedule.py); its InvalidInput lands on the field it names."""

from __future__ import annotations

from django import forms

from .models import BusinessHours
from .schedule import DAYS, holidays_text

_TIME = {"type": "time", "step": "60"}


class HoursForm(forms.Form):
    enabled = forms.BooleanField(
        required=False, label="Use business hours",
        help_text="Off: a visitor who asks for a person waits for whoever is online, at any time.")
    time_zone = forms.CharField(max_length=64, label="Time zone",
                                help_text="An IANA name, such as Europe/Paris or America/New_York.")
    holidays = forms.CharField(
        required=False, label="Holidays", widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One a line: a date as YYYY-MM-DD, then a name (2026-12-25 Christmas). Closed all day.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for i, day in enumerate(DAYS):
            self.fields[f"day{i}_opens"] = forms.CharField(required=False, label=f"{day} opens",
                                                           widget=forms.TimeInput(attrs=_TIME))
            self.fields[f"day{i}_closes"] = forms.CharField(required=False, label=f"{day} closes",
                                                            widget=forms.TimeInput(attrs=_TIME))

    @staticmethod
    def initial_for(row: BusinessHours) -> dict:
        initial = {"enabled": row.enabled, "time_zone": row.time_zone, "holidays": holidays_text(row.holidays)}
        for key, (opens, closes) in (row.weekly or {}).items():
            initial[f"day{key}_opens"], initial[f"day{key}_closes"] = opens, closes
        return initial

    def head_fields(self):
        return [self["enabled"]]

    def tail_fields(self):
        return [self["time_zone"], self["holidays"]]

    def days(self):
        """(name, opens field, closes field) for the template's table."""
        return [(day, self[f"day{i}_opens"], self[f"day{i}_closes"]) for i, day in enumerate(DAYS)]

    def clean(self):
        data = super().clean()
        weekly = {}
        for i, day in enumerate(DAYS):
            opens, closes = (data.get(f"day{i}_{k}", "").strip() for k in ("opens", "closes"))
            if opens and closes:
                weekly[str(i)] = [opens, closes]
            elif opens or closes:
                self.add_error(f"day{i}_opens", f"{day}: give both times, or neither for a closed day.")
        data["weekly"] = weekly
        return data

    def service_args(self) -> dict:
        d = self.cleaned_data
        return {"enabled": d["enabled"], "time_zone": d["time_zone"].strip(), "weekly": d["weekly"],
                "holidays": d.get("holidays", "")}

    def add_service_error(self, exc) -> None:
        """A service refusal on the field it names (a day's on its opening time)."""
        param = exc.param or ""
        field = f"{param}_opens" if param.startswith("day") else param
        self.add_error(field if field in self.fields else None, str(exc))
