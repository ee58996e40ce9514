"""PostgreSQL retrieval: `search_vector` (title A, heading B, text C) in the tenant's
text-search configuration, a GIN index over (tenant_id, search_vector), and
`ts_rank_cd` (cover density, divided by 1 + log of the chunk's length), all through
`django.contrib.postgres.search`. The index is created by migration 0001 (btree_gin lets
one GIN index hold the tenant's integer beside the vector, so the tenant filter and the
text match are one index scan)."""

from __future__ import annotations

from django.contrib.postgres.search import SearchQueryField, SearchRank, SearchVector
from django.db.models import BooleanField, F, Value
from django.db.models.expressions import RawSQL

from ..models import LANGUAGES, Chunk
from .base import COMMON_FLOOR, COMMON_FRACTION, Hit, squash, unsquash

# The question's words less the tenant's common ones (base.COMMON_FRACTION), as one
# tsquery (an OR): a scalar subquery of the retrieval statement itself, over
# knowledge_term's unique (tenant_id, word) index. PostgreSQL runs it once (an InitPlan),
# and every row is matched and ranked against its result.
KEPT_TERMS = """(
WITH s AS (SELECT q.w, coalesce(t.df, 0) AS df FROM unnest(%s::text[]) AS q(w)
           LEFT JOIN knowledge_term t ON t.tenant_id = %s AND t.word = q.w),
     cap AS (SELECT greatest(%s, coalesce((SELECT df FROM knowledge_term WHERE tenant_id = %s AND word = ''), 0)
                                 * %s) AS c)
SELECT to_tsquery(%s::regconfig, coalesce(string_agg(s.w, ' | '), '')) FROM s, cap
WHERE s.df <= cap.c OR (SELECT min(df) FROM s) > cap.c)"""

# ts_rank_cd's normalization bit 1: divide by 1 + log(document length), so a long chunk
# that mentions a word once does not outrank a short one about it.
NORMALIZATION = 1
# Weights of the labels D, C (text), B (heading), A (title). PostgreSQL's default gives a
# title 5x the text; ts_rank_cd has no IDF, so a common word in a title ("order") then
# outranked the passage that answers. 2x measured better on benchmarks/knowledge.
WEIGHTS = [0.1, 0.2, 0.3, 0.4]


def config_for(language: str) -> str:
    """The text-search configuration: one of PostgreSQL's built-in ones, never the
    caller's text (it reaches SQL as a ::regconfig value)."""
    return language if language in LANGUAGES else "simple"


def chunk_vector(language: str) -> SearchVector:
    """A chunk's tsvector: title A, heading B, text C, in the language's configuration."""
    config = config_for(language)
    return (SearchVector("title", weight="A", config=config)
            + SearchVector("heading", weight="B", config=config)
            + SearchVector("text", weight="C", config=config))


class PostgresBackend:
    vendor = "postgresql"

    def __init__(self, using: str = "default"):
        self.using = using

    def index_article(self, *, article_id, language: str) -> None:
        Chunk.objects.using(self.using).filter(article_id=article_id).update(search_vector=chunk_vector(language))

    def search(self, *, tenant_id: int, terms: list[str], k: int, min_score: float,
               language: str) -> list[Hit]:
        if not terms or k < 1:
            return []
        # The words are letters and digits only (base.query_terms), so joining them with
        # | builds an OR query that no text can turn into another operator.
        params = (list(terms), tenant_id, COMMON_FLOOR, tenant_id, COMMON_FRACTION, config_for(language))
        query = RawSQL(KEPT_TERMS, params, output_field=SearchQueryField())
        matches = RawSQL(f'"knowledge_chunk"."search_vector" @@ {KEPT_TERMS}', params, output_field=BooleanField())
        rank = SearchRank(F("search_vector"), query, weights=WEIGHTS, cover_density=True,
                          normalization=Value(NORMALIZATION))
        rows = (Chunk.objects.using(self.using)
                .filter(matches, tenant_id=tenant_id)
                .annotate(rank=rank))
        if min_score > 0:
            rows = rows.filter(rank__gte=unsquash(min_score))
        rows = rows.order_by("-rank", "pk").values_list(
            "pk", "article_id", "title", "heading", "text", "article__url", "rank")[:k]
        return [Hit(chunk_id=pk, article_id=str(article), title=title, heading=heading, text=text,
                    url=url, score=round(squash(raw), 4))
                for pk, article, title, heading, text, url, raw in rows]
