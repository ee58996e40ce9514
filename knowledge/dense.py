"""Dense retrieval in the CPU worker's memory: a tenant's chunk vectors as one float32
matrix [n, DIM], scored against the question's vector with one matrix product, the top
k by argpartition. PostgreSQL here has no vector index (pgvector is not packaged for
these machines), and reading 10k vectors per question would cost more than scoring them.

The matrix is loaded on a tenant's first question and kept while it is current: every
change to a tenant's chunks (indexing, deleting) bumps the tenant's revision, a
`knowledge_term` row (word REVISION, in the same transaction as the change); each
question reads it through the unique index (one row) and reloads the matrix when it
moved. Memory: 1.5 KiB a chunk (384 float32), bounded over all tenants by
TANDEM_KNOWLEDGE_VECTOR_CACHE_MB, least recently used tenant dropped first."""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict

from django.conf import settings
from django.db import connections

from . import embedding
from .terms import terms_adjust

# Not a word any query can hold (query words are letters and digits).
REVISION = "#rev"
_lock = threading.Lock()
_cache: OrderedDict[int, tuple[int, object, object]] = OrderedDict()  # tenant -> (revision, ids, matrix)


def revision_bump(*, tenant_id: int) -> None:
    """The tenant's chunks changed: its cached matrix is stale from the next question on."""
    terms_adjust(tenant_id=tenant_id, added=Counter({REVISION: 1}))


def _revision(cursor, tenant_id: int) -> int:
    cursor.execute("SELECT df FROM knowledge_term WHERE tenant_id = %s AND word = %s", [tenant_id, REVISION])
    row = cursor.fetchone()
    return row[0] if row else 0


def _budget_bytes() -> int:
    return int(getattr(settings, "TANDEM_KNOWLEDGE_VECTOR_CACHE_MB", 512)) * 1024 * 1024


def matrix(*, tenant_id: int, using: str = "default"):
    """(ids [n] int64, ascending; vectors [n, DIM] float32) of the tenant's chunks, as of
    now: one read of the tenant's revision, the vectors loaded only when it moved. Read
    on the caller's thread (its database connection); scoring them needs none."""
    import numpy as np

    with connections[using].cursor() as cursor:
        rev = _revision(cursor, tenant_id)
        with _lock:
            hit = _cache.get(tenant_id)
            if hit is not None and hit[0] == rev:
                _cache.move_to_end(tenant_id)
                return hit[1], hit[2]
        # Vectors of another model (another size: chunks indexed before a model change,
        # until `knowledge reindex`) are left out, not scored against this one's.
        cursor.execute("SELECT id, embedding FROM knowledge_chunk WHERE tenant_id = %s AND embedding IS NOT NULL"
                       " AND length(embedding) = %s ORDER BY id", [tenant_id, embedding.DIM * 2])
        rows = cursor.fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    vectors = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float16).reshape(len(rows), -1) \
        .astype(np.float32) if rows else np.zeros((0, embedding.DIM), dtype=np.float32)
    with _lock:
        _cache[tenant_id] = (rev, ids, vectors)
        _cache.move_to_end(tenant_id)
        while len(_cache) > 1 and sum(v[2].nbytes for v in _cache.values()) > _budget_bytes():
            _cache.popitem(last=False)
    return ids, vectors


class Scores:
    """One question's cosine with every chunk of a tenant's matrix: the nearest, and the
    cosine of any chunk by id, from one matrix product."""

    def __init__(self, ids, vectors, question):
        import numpy as np

        self.ids = ids
        # [n] = [n, DIM] · [DIM]. einsum rather than BLAS's gemv: one thread, in the
        # caller's own; OpenBLAS's threads, spinning beside the other tiers' processes on
        # a busy host, made the tail several times slower.
        self.scores = np.einsum("ij,j->i", vectors, question) if len(ids) else np.zeros(0, dtype=np.float32)

    def nearest(self, k: int) -> list[tuple[int, float]]:
        """[(chunk id, cosine similarity)] of the k nearest chunks, best first."""
        import numpy as np

        k = min(k, len(self.ids))
        if k < 1:
            return []
        top = np.argpartition(-self.scores, k - 1)[:k]
        top = top[np.argsort(-self.scores[top], kind="stable")]
        return [(int(self.ids[i]), float(self.scores[i])) for i in top]

    def of(self, chunk_ids: list[int]) -> dict[int, float]:
        """The cosine of each of `chunk_ids` that has a vector in the matrix."""
        import numpy as np

        if not len(self.ids) or not chunk_ids:
            return {}
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.ids, wanted), 0, len(self.ids) - 1)
        found = self.ids[at] == wanted
        return {int(cid): float(self.scores[i]) for cid, i, ok in zip(wanted, at, found, strict=True) if ok}


def search(*, tenant_id: int, question, k: int, using: str = "default") -> list[tuple[int, float]]:
    """[(chunk id, cosine similarity)] of the tenant's k nearest chunks, best first."""
    return Scores(*matrix(tenant_id=tenant_id, using=using), question).nearest(k)


def cache_bytes() -> int:
    with _lock:
        return sum(v[1].nbytes + v[2].nbytes for v in _cache.values())


def cache_clear() -> None:
    with _lock:
        _cache.clear()
