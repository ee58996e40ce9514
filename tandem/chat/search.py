"""Full-text search over a tenant's conversations, for the inbox and the Conversations
page: a conversation matches when one of its messages holds every word of the search
(each word of three letters or more as a prefix, so "refu" finds "refund"), or the visitor's name or e-mail holds
the text. On PostgreSQL the messages are matched by the database's own full-text search
(`to_tsvector('simple', content) @@ to_tsquery`), which a GIN index over that expression
serves (chat migration 0009); the 'simple' configuration lowercases and does not stem,
so a search means the same in every language a conversation is in. SQLite (development
only) falls back to a substring match. The caller's queryset is already the tenant's
(tenants.access); this only narrows it."""

from __future__ import annotations

import re

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery, TextField, Value

from .models import Message

CONFIG = "simple"
MAX_WORDS = 8
MAX_QUERY = 200
MIN_PREFIX = 3
# Letters, digits and _ only reach to_tsquery, each with ":*": none is an operator.
_WORD = re.compile(r"\w+")
# What a search looks through: never the assistant's unsent drafts to an agent.
_SEARCHED = [Message.Role.USER, Message.Role.ASSISTANT, Message.Role.AGENT, Message.Role.NOTE]


def search_words(q: str) -> list[str]:
    return _WORD.findall((q or "")[:MAX_QUERY].lower())[:MAX_WORDS]


def _term(word: str) -> str:
    """A word as a prefix ("refu" finds "refund"); one or two characters as the whole
    word only: as a prefix they would match a large share of every word in the index."""
    return f"{word}:*" if len(word) >= MIN_PREFIX else word


def _message_vector() -> SearchVector:
    # The same expression as the GIN index (migration 0009): the planner matches it.
    return SearchVector("content", config=CONFIG)


def matching_messages(q: str, *, using: str = "default") -> QuerySet:
    """The messages that hold every word of `q` (none for an empty search)."""
    words = search_words(q)
    msgs = Message.objects.filter(role__in=_SEARCHED)
    if not words:
        return msgs.none()
    if connections[using].vendor == "postgresql":
        query = SearchQuery(" & ".join(_term(w) for w in words), search_type="raw", config=CONFIG)
        return msgs.annotate(fts=_message_vector()).filter(fts=query)
    for w in words:
        msgs = msgs.filter(content__icontains=w)
    return msgs


def conversations_matching(conversations: QuerySet, q: str, *, also: Q | None = None) -> QuerySet:
    """`conversations` narrowed to those that match `q` (or the condition `also`), each
    with `match`: the newest of its messages that matched (None when only the visitor's
    name or e-mail did). An empty search narrows nothing."""
    q = (q or "").strip()[:MAX_QUERY]
    if not q:
        return conversations
    cond = Q(user_name__icontains=q) | Q(user_email__icontains=q)
    if also is not None:
        cond |= also
    if not search_words(q):  # punctuation only: no word for the index to find
        return conversations.filter(cond).annotate(match=Value(None, output_field=TextField()))
    hits = matching_messages(q, using=conversations.db).filter(conversation=OuterRef("pk"))
    return (conversations.filter(Q(Exists(hits)) | cond)
            .annotate(match=Subquery(hits.order_by("-seq").values("content")[:1])))
