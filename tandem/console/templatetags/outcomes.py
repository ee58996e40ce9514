"""Filters of the Outcomes page: a share as a percentage, a CSAT mean, a time in
seconds; "–" where there is nothing to measure (no conversation, no rating)."""

from __future__ import annotations

from django import template

register = template.Library()
NONE = "–"


@register.filter
def pct(value):
    return NONE if value is None else f"{value * 100:.0f}%"


@register.filter
def score(value):
    return NONE if value is None else f"{value:.1f}"


@register.filter
def seconds(ms):
    if ms is None:
        return NONE
    return f"{ms / 1000:.1f} s" if ms < 60_000 else f"{ms / 60_000:.0f} min"
