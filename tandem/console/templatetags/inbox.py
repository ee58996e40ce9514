"""Template tags for the agent inbox: a wait in the units a person reads ("11 min",
not "680 s"), and the waiting count the layout's nav starts with."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from tandem.chat import search
from tandem.handoff import inbox as handoff_inbox

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
    return handoff_inbox.waiting_count(tenant=tenant)


EXCERPT = 90


@register.filter
def search_excerpt(text, q) -> str:
    """The part of a message around the first word of the search it holds, with every
    word that starts like one of the search's in <mark> (the text is escaped first)."""
    text, words = str(text or ""), search.search_words(str(q or ""))
    if not words:
        return escape(text[:EXCERPT])
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    first = pattern.search(text)
    start = max(0, (first.start() if first else 0) - EXCERPT // 3)
    piece = text[start:start + EXCERPT]
    out, at = [], 0
    for m in pattern.finditer(piece):
        out += [escape(piece[at:m.start()]), "<mark>", escape(m.group(0)), "</mark>"]
        at = m.end()
    out.append(escape(piece[at:]))
    return mark_safe(("…" if start else "") + "".join(out) + ("…" if start + EXCERPT < len(text) else ""))


@register.filter
def visitor_name(conversation) -> str:
    """The name a conversation's visitor goes by (tandem.handoff.inbox.visitor_name)."""
    return handoff_inbox.visitor_name(conversation)
