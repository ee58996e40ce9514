"""PostgreSQL retrieval: `search_vector` (title A, heading B, text C) in the tenant's
text-search configuration (written through `django.contrib.postgres.search`), a GIN
index over (tenant_id, search_vector), and BM25: the sum, over the question's words, of
the word's inverse document frequency in the tenant times its frequency in the chunk
(`ts_rank_cd` of the word alone: title, heading and text weighed), saturated and
normalized by the chunk's length against the tenant's average. The index is created by migration
0001 (btree_gin lets one GIN index hold the tenant's integer beside the vector, so the
tenant filter and the text match are one index scan).

`models.Term` counts lexemes here (what the vectors hold: "orders" and "ordered" are
both `order`), read from the vectors themselves, so a question's word is looked up as
the index will match it."""

from __future__ import annotations

from collections import Counter

from django.contrib.postgres.search import SearchVector
from django.db import connections

from ..models import LANGUAGES, Chunk
from .base import CANDIDATES, CHUNKS, MAX_RANKED, Hit, squash, unsquash

# Weights of the labels D, C (text), B (heading), A (title): a title counts twice the text.
# A word's frequency in a chunk, r, is ts_rank_cd of that word alone, unnormalized: the
# sum of the weights of its occurrences.
WEIGHTS = "{0.1, 0.2, 0.3, 0.4}"
# BM25's k1 and b: a word's share of a chunk's rank is idf * r / (r + K1 * (1 - B + B *
# words / the tenant's average)), so a word said five times counts less than five times
# once, and a long chunk that mentions it in passing less than a short one about it.
K1 = 0.5
B = 0.75
# `models.Term`'s row for the words of the tenant's chunks (n_words), beside CHUNKS: no
# lexeme the counts keep has a "#".
WORDS = "#words"

# One statement. `w`: the question's lexemes that the tenant's chunks hold, with their
# counts (looked up one by one in knowledge_term's unique (tenant_id, word) index: a
# join let the planner read all of a large tenant's counts), BM25's IDF and its length
# normalization as ka + kb * a chunk's words. `m`: the candidates' tsquery (for about
# `candidates` chunks: base.CANDIDATES by default). The candidates, at most `ranked`
# (base.MAX_RANKED or fewer), come from the GIN index; each is ranked by every word of
# `w`. The words are letters and
# digits only (base.query_terms) and so are their lexemes: joined with | or &, none can
# be another tsquery operator. Articles are joined to the k chunks that come back only.
_SQL = f"""
WITH n AS (SELECT greatest(1, coalesce((SELECT df FROM knowledge_term WHERE tenant_id = %(tenant)s::bigint AND word = ''), 0)) AS n,
                  greatest(1, coalesce((SELECT df FROM knowledge_term WHERE tenant_id = %(tenant)s::bigint AND word = '{WORDS}'), 0))
                  AS words),
     l AS (SELECT v.lexeme AS lex,
                  (SELECT df FROM knowledge_term t WHERE t.tenant_id = %(tenant)s::bigint AND t.word = v.lexeme) AS df
           FROM unnest(to_tsvector(%(config)s::regconfig, array_to_string(%(words)s::text[], ' '))) AS v),
     w AS (SELECT l.lex, to_tsquery('simple', l.lex) AS q, ln(1 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf,
                  l.df, n.n, {K1 * (1 - B)} AS ka, {K1 * B} * n.n / n.words::float8 AS kb,
                  row_number() OVER o AS i, sum(l.df) OVER o AS upto,
                  n.n * exp(sum(ln(l.df::float8 / greatest(n.n, l.df))) OVER o) AS together
           FROM l, n WHERE l.df > 0
           WINDOW o AS (ORDER BY l.df, l.lex ROWS UNBOUNDED PRECEDING)),
     m AS (SELECT CASE WHEN min(df) <= %(candidates)s::int OR min(n) <= %(candidates)s::int
                       THEN to_tsquery('simple', string_agg(lex, ' | ')
                                                 FILTER (WHERE i = 1 OR upto <= %(candidates)s::int OR n <= %(candidates)s::int))
                       ELSE to_tsquery('simple', string_agg(lex, ' & ')
                                                 FILTER (WHERE i = 1 OR together * n / df > %(candidates)s::int)) END AS q
           FROM w)
SELECT r.id, r.article_id, r.title, r.heading, r.text, a.url, r.rank
FROM (SELECT c.id, c.article_id, c.title, c.heading, c.text,
             (SELECT sum(w.idf * f.r / (f.r + w.ka + w.kb * c.n_words))
              FROM w, LATERAL (SELECT ts_rank_cd('{WEIGHTS}', c.search_vector, w.q, 0) AS r) AS f
              WHERE c.search_vector @@ w.q) AS rank
      FROM (SELECT * FROM knowledge_chunk
            WHERE "knowledge_chunk"."tenant_id" = %(tenant)s::bigint AND search_vector @@ (SELECT q FROM m)
            LIMIT %(ranked)s::int) AS c
      ORDER BY rank DESC, c.id
      LIMIT %(k)s::int) AS r
JOIN knowledge_article a ON a.id = r.article_id
ORDER BY r.rank DESC, r.id
"""

# The lexemes of some chunks, each once per chunk; those a question's word can become
# (letters and digits, at most Term.word's 64 characters) are all that is kept.
_LEXEMES = """
SELECT v.lexeme, count(*) FROM knowledge_chunk c, unnest(tsvector_to_array(c.search_vector)) AS v(lexeme)
WHERE c.article_id = %s AND length(v.lexeme) <= 64 AND v.lexeme ~ '^[[:alnum:]]+$'
GROUP BY v.lexeme
"""


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


def _fetch_prepared(conn, sql: str, params: dict) -> list[tuple]:
    """The rows of `sql`, on a cursor that binds its parameters on the server: psycopg
    then prepares a statement run often on the connection (settings:
    DB_PREPARED_STATEMENTS), and PostgreSQL keeps its plan. Planning the ranking statement
    (its CTEs, a sub-select per word) takes longer than running it on most tenants.
    Django's own cursors bind client-side and never prepare; this one is on Django's
    connection (the same transaction) and goes through Django's cursor wrapper (query
    logging, execute wrappers), after the checks Django's `cursor()` makes first: a
    persistent connection that fails its health check is replaced, and the connection is
    this thread's."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    conn.close_if_health_check_failed()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    with conn.wrap_database_errors:
        raw = ServerBindingCursor(conn.connection)
    with (conn.make_debug_cursor(raw) if conn.queries_logged else conn.make_cursor(raw)) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


class PostgresBackend:
    vendor = "postgresql"

    def __init__(self, using: str = "default"):
        self.using = using

    def index_article(self, *, article_id, language: str) -> None:
        Chunk.objects.using(self.using).filter(article_id=article_id).update(search_vector=chunk_vector(language))

    def term_counts(self, *, article_id) -> Counter:
        with connections[self.using].cursor() as cursor:
            cursor.execute(_LEXEMES, [article_id])
            counts = Counter(dict(cursor.fetchall()))
        chunks = Chunk.objects.using(self.using).filter(article_id=article_id)
        counts[CHUNKS] = chunks.count()
        counts[WORDS] = sum(chunks.values_list("n_words", flat=True))
        return counts

    def search(self, *, tenant_id: int, terms: list[str], k: int, min_score: float,
               language: str, candidates: int = CANDIDATES) -> list[Hit]:
        if not terms or k < 1:
            return []
        params = {"tenant": int(tenant_id), "words": list(terms), "config": config_for(language), "k": int(k),
                  "candidates": int(candidates), "ranked": int(min(candidates, MAX_RANKED))}
        rows = _fetch_prepared(connections[self.using], _SQL, params)
        # Rows come best first, so dropping those under the floor after the LIMIT keeps
        # exactly the top k of those above it.
        floor = unsquash(min_score) if min_score > 0 else float("-inf")
        return [Hit(chunk_id=pk, article_id=str(article), title=title, heading=heading, text=text,
                    url=url, score=round(squash(raw), 4))
                for pk, article, title, heading, text, url, raw in rows if raw >= floor]
