"""SQLite retrieval: the FTS5 table `knowledge_chunk_fts` (tenant token, title, heading,
body; Porter stemming over unicode61), which triggers on `knowledge_chunk` keep equal to
the chunk rows (migration 0001), ranked by `bm25()`.

The tenant is inside the MATCH itself: every row's `tenant` column holds the token
`t<tenant id>`, which the query requires (index-driven, weight 0 in the ranking), and
the joined chunk row's tenant_id is checked again. bm25's term statistics are the whole
table's, so another tenant's articles nudge a score's scale (never which chunks come
back); PostgreSQL's ranking uses the tenant's own counts (`models.Term`)."""

from __future__ import annotations

import json
import uuid
from collections import Counter

from django.db import connections

from ..models import Chunk
from .base import CANDIDATES, COMMON_FLOOR, COMMON_FRACTION, Hit, squash, unsquash, word_counts

# bm25 column weights, in the table's column order: tenant, title, heading, body.
WEIGHTS = (0.0, 4.0, 2.0, 1.0)

# FTS5 ranks every row the MATCH yields before the LIMIT: ranking in a subquery of the
# FTS table alone keeps the joins to the k rows that come back.
_SQL = """
SELECT c.id, c.article_id, c.title, c.heading, c.text, a.url, r.raw
FROM (SELECT rowid, -bm25(knowledge_chunk_fts, {weights}) AS raw FROM knowledge_chunk_fts
      WHERE knowledge_chunk_fts MATCH ({match}) ORDER BY raw DESC, rowid LIMIT %(k)s) AS r
JOIN knowledge_chunk c ON c.id = r.rowid
JOIN knowledge_article a ON a.id = c.article_id
WHERE c.tenant_id = %(tenant)s
ORDER BY r.raw DESC, c.id
"""


# The MATCH expression, built inside the statement from the question's words less the
# tenant's common ones (base.COMMON_FRACTION), read from knowledge_term's unique index:
# `tenant : "t7" AND {title heading body} : ("refund" OR "twice")`; of those, the rarest
# whose counts add up to at most base.CANDIDATES chunks (the rarest always), as on
# PostgreSQL. When every word is common, the chunks holding all of the rarest few (ANDed
# until, were the words independent, base.CANDIDATES chunks would hold them all): an OR
# of common words alone matched most of the tenant. The words are letters and digits
# only (base.query_terms): quoted, none can be an FTS5 operator.
_MATCH = """
WITH s AS (SELECT j.value AS w, coalesce(t.df, 0) AS df FROM json_each(%(words)s) AS j
           LEFT JOIN knowledge_term t ON t.tenant_id = %(tenant)s AND t.word = j.value),
     n AS (SELECT max(1, coalesce((SELECT df FROM knowledge_term WHERE tenant_id = %(tenant)s AND word = ''), 0)) AS n),
     w AS (SELECT s.w, s.df, n.n, max(%(floor)s, n.n * %(fraction)s) AS cap, row_number() OVER o AS i, sum(s.df) OVER o AS upto,
                  n.n * exp(sum(ln(max(s.df, 1) * 1.0 / max(s.df, n.n))) OVER o) AS together
           FROM s, n WINDOW o AS (ORDER BY s.df, s.w ROWS UNBOUNDED PRECEDING))
SELECT 'tenant : "t' || %(tenant)s || '" AND {title heading body} : (' ||
       CASE WHEN min(df) <= min(cap) THEN group_concat('"' || w || '"', ' OR ') FILTER (WHERE df <= cap AND (i = 1 OR upto <= %(candidates)s OR n <= %(candidates)s))
            ELSE group_concat('"' || w || '"', ' AND ') FILTER (WHERE i = 1 OR together * n / df > %(candidates)s) END
       || ')'
FROM w
"""


class SqliteBackend:
    vendor = "sqlite"

    def __init__(self, using: str = "default"):
        self.using = using

    def index_article(self, *, article_id, language: str) -> None:
        # The triggers indexed the rows as they were inserted (and unindex them as they
        # are deleted). One tokenizer serves every tenant: Porter stems English.
        return None

    def term_counts(self, *, article_id) -> Counter:
        # FTS5's Porter stems are not readable from SQL: the words as questions spell them.
        chunks = Chunk.objects.using(self.using).filter(article_id=article_id)
        return word_counts(chunks.values_list("title", "heading", "text"))

    def search(self, *, tenant_id: int, terms: list[str], k: int, min_score: float,
               language: str, candidates: int = CANDIDATES) -> list[Hit]:
        if not terms or k < 1:
            return []
        sql = _SQL.format(weights=", ".join(map(str, WEIGHTS)), match=_MATCH)
        params = {"words": json.dumps(list(terms)), "tenant": int(tenant_id), "floor": COMMON_FLOOR,
                  "fraction": COMMON_FRACTION, "candidates": int(candidates), "k": int(k)}
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        # Rows come best first, so dropping those under the floor after the LIMIT keeps
        # exactly the top k of those above it.
        floor = unsquash(min_score) if min_score > 0 else float("-inf")
        rows = [r for r in rows if r[-1] >= floor]
        return [Hit(chunk_id=pk, article_id=str(uuid.UUID(str(article))), title=title, heading=heading,
                    text=text, url=url, score=round(squash(raw), 4))
                for pk, article, title, heading, text, url, raw in rows]
