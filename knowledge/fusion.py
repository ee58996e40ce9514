"""Hybrid retrieval: the full-text ranking (BM25, `search`) and the dense one (`dense`)
fused by reciprocal rank fusion, per tenant. Each list's top FUSE_DEPTH count; a chunk
scores Σ weight / (RRF_K + rank) over the lists it is in (rank from 1), the best k are
kept. RRF needs no common scale between a BM25 score and a cosine, which is why it is
the usual choice (Elasticsearch's and OpenSearch's hybrid queries, Cormack et al. 2009).

A chunk whose cosine with the question is under DENSE_FLOOR does not enter from the
dense side: every question has nearest neighbours, even one the help centre says
nothing about, and such a question must still find nothing (the prompt then says so).

A hybrid hit's `score` is its fused score over the best a chunk can get (first in both
lists), times SCORE_TOP: in (0, 0.99], higher is better (below 1, as every backend's
score is), and what `min_score` is read against in this mode.

Work: the full-text query (as in BM25 mode, k = FUSE_DEPTH), one read of the tenant's
revision (`dense`), the question's embedding, one matrix product, and, for chunks only
the dense side found, one read of their rows by primary key."""

from __future__ import annotations

import uuid

from django.db import connections

from . import dense, embedding
from .search import Hit, SearchBackend

FUSE_DEPTH = 20
RRF_K = 60
LEXICAL_WEIGHT = 1.0
DENSE_WEIGHT = 2.0
DENSE_FLOOR = 0.22
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
    lexical = backend.search(tenant_id=tenant_id, terms=terms, k=depth, min_score=0.0, language=language) \
        if terms else []
    vector = embedding.embed([question])[0]
    near = [(cid, cos) for cid, cos in dense.search(tenant_id=tenant_id, question=vector, k=depth,
                                                    using=getattr(backend, "using", "default"))
            if cos >= DENSE_FLOOR]
    fused: dict[int, float] = {}
    for rank, hit in enumerate(lexical, 1):
        fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + LEXICAL_WEIGHT / (RRF_K + rank)
    for rank, (cid, _) in enumerate(near, 1):
        fused[cid] = fused.get(cid, 0.0) + DENSE_WEIGHT / (RRF_K + rank)
    best = (LEXICAL_WEIGHT + DENSE_WEIGHT) / (RRF_K + 1) / SCORE_TOP
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    order = [cid for cid in order if fused[cid] / best >= min_score][:k]
    known = {h.chunk_id: h for h in lexical}
    missing = [cid for cid in order if cid not in known]
    if missing:
        known.update(_rows(tenant_id, missing, getattr(backend, "using", "default")))
    return [Hit(chunk_id=cid, article_id=known[cid].article_id, title=known[cid].title, heading=known[cid].heading,
                text=known[cid].text, url=known[cid].url, score=round(fused[cid] / best, 4))
            for cid in order if cid in known]


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
