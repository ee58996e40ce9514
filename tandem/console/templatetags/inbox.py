"""Template tags for the agent inbox: a wait in the units a person reads ("11 min",
not "680 s"), and the waiting count the layout's nav starts with."""

from __future__ import annotations

from django import template

from tandem.chat import inbox as chat_inbox

register = template.Library()


@register.filter
def human_duration(seconds) -> str:
    """Whole seconds under a minute, minutes under an hour, then hours and minutes, then
    days and hours; an unknown value (None, text) as "–" rather than an error."""
    try:
        s = max(0, int(float(seconds)))
    except (TypeError, ValueError):
        return "–"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"


@register.simple_tag
def inbox_waiting(tenant) -> int:
    """The waiting count for the nav's first paint (the partial then polls it)."""
    return chat_inbox.waiting_count(tenant=tenant)
