"""Hybrid retrieval: the full-text ranking (BM25, `search`) and the dense one (`dense`),
fused per tenant by a weighted sum of the two scores (a convex combination, as Bruch,
Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023,
found better than rank fusion once its one weight is set on a few labelled questions):

    fused = cosine(question, chunk) + LEXICAL_WEIGHT × bm25(chunk) / bm25(best full-text hit)

over the candidates of both lists (each list's top FUSE_DEPTH; a full-text hit outside
the nearest chunks is scored with its own cosine). The full-text score is divided by the
list's best, so the weight means the same on both databases, whose BM25 scales differ.

The weight is small, and measured so (docs/benchmarks-knowledge.md, on half of the
articles' questions, checked on the other half): the vectors carry the ranking, the
words break near-ties. Reciprocal rank fusion (this module's previous rule) gave a
chunk that full text ranked first a place near the top whatever its words: for a
question that shares no word with its answer, full text's list is matches on incidental
words, and rank fusion put them above the vectors' right answer (hit@3 0.73 against
0.97 for the vectors alone with all-MiniLM-L6-v2); a convex weight of 0.02 keeps the
vectors' answer (0.97) and still lets the words lift the right one among near-equals
(0.98 on the paraphrases, against 0.975 for the vectors alone).

When no chunk's cosine with the question reaches DENSE_FLOOR, the dense side offers
nothing: every question has nearest neighbours, even one the help centre says nothing
about, and such a question must still find nothing from them (the prompt then says so).
The floor asks whether the question is about the help centre at all, not which chunks
count: once the nearest chunk reaches it, the nearest FUSE_DEPTH all enter, ranked by
their cosines (a cut per chunk dropped right answers whose cosine, for the hardest
paraphrases, is as low as 0.19, where the nearest chunk was a wrong one above it).

A hybrid hit's `score` is its fused score over the best a chunk can get (cosine 1 and
the best full-text score), times SCORE_TOP: in [0, 0.99], higher is better (below 1, as
every backend's score is), and what `min_score` is read against in this mode.

Work: one read of the tenant's revision (`dense`), the full-text query (as in BM25
mode, k = FUSE_DEPTH) with the question's embedding and one matrix product beside it on
a thread of its own, and, for chunks only the dense side found, one read of their rows
by primary key."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

from . import dense, embedding
from .search import Hit, SearchBackend

FUSE_DEPTH = 20
# The full-text side ranks at most about this many chunks (base.CANDIDATES: 1000 in
# BM25 mode). Ranking costs PostgreSQL about a microsecond per chunk and word, and here
# the words only break near-ties between the vectors' candidates: at 10,000 chunks a
# quarter of the candidates halved the tail of a question's time and changed the top 3
# of one question in 120 (docs/benchmarks-knowledge.md).
LEXICAL_CANDIDATES = 250
LEXICAL_WEIGHT = 0.02
DENSE_FLOOR = 0.25
SCORE_TOP = 0.99

_ROWS = """
SELECT c.id, c.article_id, c.title, c.heading, c.text, a.url
FROM knowledge_chunk c JOIN knowledge_article a ON a.id = c.article_id
WHERE c.tenant_id = %s AND c.id = ANY(%s)
"""
_ROWS_SQLITE = """
SELECT c.id, c.article_id, c.title, c.heading, c.text, a.url
FROM knowledge_chunk c JOIN knowledge_article a ON a.id = c.article_id
WHERE c.tenant_id = %s AND c.id IN ({})
"""


def hybrid_search(*, backend: SearchBackend, tenant_id: int, terms: list[str], question: str, k: int,
                  min_score: float, language: str) -> list[Hit]:
    if k < 1:
        return []
    depth = max(FUSE_DEPTH, k)
    using = getattr(backend, "using", "default")
    # The question's embedding and its cosine with every chunk of the tenant (ONNX Runtime
    # and numpy, which release the GIL) run on a thread of their own beside the full-text
    # query (the database's work): a question costs the longer of the two. The tenant's
    # matrix is read first, here: the database connection is this thread's.
    ids, vectors = dense.matrix(tenant_id=tenant_id, using=using)
    pending = _embedder().submit(_scores, question, ids, vectors)
    lexical = backend.search(tenant_id=tenant_id, terms=terms, k=depth, min_score=0.0, language=language,
                             candidates=LEXICAL_CANDIDATES) if terms else []
    scores = pending.result()
    near = dict(scores.nearest(depth))
    if not near or max(near.values()) < DENSE_FLOOR:
        near = {}  # nothing in the help centre is near: the vectors offer nothing
    cosine = dict(near)
    cosine.update(scores.of([h.chunk_id for h in lexical if h.chunk_id not in cosine]))
    top = max((h.score for h in lexical), default=0.0) or 1.0
    words = {h.chunk_id: h.score / top for h in lexical}
    fused = {cid: max(0.0, cosine.get(cid, 0.0)) + LEXICAL_WEIGHT * words.get(cid, 0.0)
             for cid in set(near) | set(words)}
    best = (1.0 + LEXICAL_WEIGHT) / SCORE_TOP
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    order = [cid for cid in order if fused[cid] / best >= min_score][:k]
    known = {h.chunk_id: h for h in lexical}
    missing = [cid for cid in order if cid not in known]
    if missing:
        known.update(_rows(tenant_id, missing, using))
    return [Hit(chunk_id=cid, article_id=known[cid].article_id, title=known[cid].title, heading=known[cid].heading,
                text=known[cid].text, url=known[cid].url, score=round(fused[cid] / best, 4))
            for cid in order if cid in known]


def _scores(question: str, ids, vectors) -> dense.Scores:
    return dense.Scores(ids, vectors, embedding.embed([question])[0])


_pool: tuple[int, ThreadPoolExecutor] | None = None


def _embedder() -> ThreadPoolExecutor:
    """One embedding thread per process (made again in a forked child, whose copy of
    the parent's thread does not run)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge-embed"))
    return _pool[1]


def _rows(tenant_id: int, ids: list[int], using: str) -> dict[int, Hit]:
    conn = connections[using]
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(_ROWS, [tenant_id, ids])
        else:
            cursor.execute(_ROWS_SQLITE.format(", ".join(["%s"] * len(ids))), [tenant_id, *ids])
        rows = cursor.fetchall()
    # SQLite keeps a UUID as 32 hex digits: read back as every other hit spells it.
    return {pk: Hit(chunk_id=pk, article_id=str(uuid.UUID(str(article))), title=title, heading=heading, text=text,
                    url=url, score=0.0)
            for pk, article, title, heading, text, url in rows}
