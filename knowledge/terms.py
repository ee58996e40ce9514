"""The per-tenant word counts (`models.Term`) that retrieval reads to leave out common
words (`search.base.COMMON_FRACTION`): kept up to date, in the same transaction, by
indexing and deleting. Increments are one upsert (`ON CONFLICT … DO UPDATE SET df = df
+ …`, PostgreSQL and SQLite alike), so two workers indexing one tenant never lose one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db import connection

from .search.base import query_terms

# No word the query builder could produce is empty: the empty word counts the chunks.
CHUNKS = ""

_UPSERT = ("INSERT INTO knowledge_term (tenant_id, word, df) VALUES (%s, %s, %s) "
           "ON CONFLICT (tenant_id, word) DO UPDATE SET df = knowledge_term.df + excluded.df")


def chunk_words(title: str, heading: str, text: str) -> set[str]:
    return set(query_terms(title, heading, text, limit=1 << 30))


def counts(chunks: Iterable[tuple[str, str, str]]) -> Counter:
    """{word: chunks holding it, CHUNKS: chunks} for (title, heading, text) triples."""
    total: Counter = Counter()
    for title, heading, text in chunks:
        total.update(chunk_words(title, heading, text))
        total[CHUNKS] += 1
    return total


def terms_adjust(*, tenant_id: int, added: Counter | None = None, removed: Counter | None = None) -> None:
    delta = Counter(added or {})
    delta.subtract(removed or {})
    rows = [(tenant_id, word, n) for word, n in delta.items() if n]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_UPSERT, rows)
        cursor.execute("DELETE FROM knowledge_term WHERE tenant_id = %s AND df <= 0 AND word <> ''", [tenant_id])
