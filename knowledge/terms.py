"""The per-tenant counts of index terms (`models.Term`) that retrieval reads inside its
query (`search.base`): kept up to date, in the same transaction, by indexing and
deleting, from what each backend's `term_counts` says the index holds (SQLite: the
words as `query_terms` spells them; PostgreSQL: the lexemes of the chunks' vectors).
Increments are one upsert (`ON CONFLICT … DO UPDATE SET df = df + …`, PostgreSQL and
SQLite alike), so two workers indexing one tenant never lose one."""

from __future__ import annotations

from collections import Counter

from django.db import connection

from .search.base import CHUNKS

__all__ = ["CHUNKS", "terms_adjust"]

_UPSERT = ("INSERT INTO knowledge_term (tenant_id, word, df) VALUES (%s, %s, %s) "
           "ON CONFLICT (tenant_id, word) DO UPDATE SET df = knowledge_term.df + excluded.df")


def terms_adjust(*, tenant_id: int, added: Counter | None = None, removed: Counter | None = None) -> None:
    delta = Counter(added or {})
    delta.subtract(removed or {})
    rows = [(tenant_id, word, n) for word, n in delta.items() if n]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_UPSERT, rows)
        cursor.execute("DELETE FROM knowledge_term WHERE tenant_id = %s AND df <= 0 AND word <> ''", [tenant_id])
