"""Template filters for the console: numbers people can read at a glance, and audit
values shown as values rather than Python reprs."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def num(value):
    """22164 -> "22,164"; floats keep one decimal; anything else as it is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return value


@register.filter
def audit_value(value):
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "(none)"
    if isinstance(value, int):
        return f"{value:,}"
    return value
