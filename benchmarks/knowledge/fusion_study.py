"""The choices behind hybrid retrieval, measured in one run on the same full-text lists:
which embedding model (all-MiniLM-L6-v2, the one shipped; WordLlama's l2_supercat, the
previous one, when its package is installed) and which fusion rule (the vectors alone;
weighted reciprocal rank fusion, the previous rule; the convex sum the code uses, over
a few weights).

Every question is scored on its half: the articles are split in two by a hash of their
path ("tuning": what a weight may be chosen on; "held_out": what reports it), so a rule
picked on one half is judged on questions about articles it never saw. Hits count
articles, as `_quality` does. The dense side here scores every chunk of the tenant with
float32 vectors computed in this process (the code keeps float16 bytes and a floor), so
its figures can differ from `_quality`'s by a question."""

from __future__ import annotations

import hashlib

RRF_K = 60
WEIGHTS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


def half(article: str) -> str:
    return "held_out" if int(hashlib.sha256(article.encode()).hexdigest(), 16) % 2 else "tuning"


def _wordllama():
    """WordLlama's l2_supercat (256 dims) from its installed wheel, or None."""
    try:
        from pathlib import Path

        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
    except ImportError:
        return None
    root = Path(wordllama.__file__).parent
    with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    model = WordLlamaInference(table, Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json")))
    import numpy as np

    return lambda texts: np.nan_to_num(np.asarray(model.embed(texts, norm=True), dtype=np.float32))


def measure_fusion(tenant, source_of: dict, question_sets: dict[str, list[dict]]) -> dict:
    import numpy as np

    from knowledge import embedding, selectors
    from knowledge.models import Chunk

    chunks = list(Chunk.objects.filter(tenant=tenant).order_by("pk").values_list("pk", "article_id", "title",
                                                                                 "heading", "text"))
    article_of = {pk: source_of.get(str(article), str(article)) for pk, article, *_ in chunks}
    ids = [pk for pk, *_ in chunks]
    texts = [embedding.chunk_text(title, heading, text) for _, _, title, heading, text in chunks]
    models = {"all-MiniLM-L6-v2": embedding.embed}
    if (wordllama := _wordllama()) is not None:
        models["wordllama l2_supercat"] = wordllama
    out: dict = {}
    for set_name, qs in question_sets.items():
        lexical = [[(h.chunk_id, h.score) for h in selectors.retrieve(tenant_id=tenant.pk, message=q["question"],
                                                                       k=20, mode="bm25")] for q in qs]
        rows = {"bm25": _score([[c for c, _ in lx] for lx in lexical], qs, article_of)}
        for model_name, embed in models.items():
            doc = embed(texts)                                   # [chunks, dim]
            cos = embed([q["question"] for q in qs]) @ doc.T     # [questions, chunks]
            dense = [[(ids[i], float(row[i])) for i in np.argsort(-row, kind="stable")] for row in cos]
            rows[f"{model_name}: vectors alone"] = _score([[c for c, _ in d] for d in dense], qs, article_of)
            rows[f"{model_name}: RRF 1:2, floor 0.22 (previous)"] = _score(
                [_rrf(lx, d, 1.0, 2.0, 0.22) for lx, d in zip(lexical, dense, strict=True)], qs, article_of)
            for w in WEIGHTS:
                rows[f"{model_name}: convex, weight {w}"] = _score(
                    [_convex(lx, d, w) for lx, d in zip(lexical, dense, strict=True)], qs, article_of)
        out[set_name] = rows
    # Per-unit figures: 60 questions and 24 chunks measure them (the whole sets add time, not precision).
    out["embedding_cost"] = measure_embedding_cost([q["question"] for q in question_sets["paraphrase"]][:60],
                                                   texts[:24])
    return out


def _rrf(lexical, dense, w_lexical: float, w_dense: float, floor: float, depth: int = 20) -> list[int]:
    fused: dict[int, float] = {}
    for rank, (cid, _) in enumerate(lexical[:depth], 1):
        fused[cid] = fused.get(cid, 0.0) + w_lexical / (RRF_K + rank)
    for rank, (cid, _) in enumerate([d for d in dense if d[1] >= floor][:depth], 1):
        fused[cid] = fused.get(cid, 0.0) + w_dense / (RRF_K + rank)
    return sorted(fused, key=lambda c: (-fused[c], c))


def _convex(lexical, dense, weight: float, depth: int = 20) -> list[int]:
    """As `knowledge.fusion`: cosine + weight × BM25 over the list's best."""
    top = max((s for _, s in lexical[:depth]), default=0.0) or 1.0
    words = {c: s / top for c, s in lexical[:depth]}
    cosine = dict(dense)
    candidates = {c for c, _ in dense[:depth]} | set(words)
    return sorted(candidates, key=lambda c: (-(max(0.0, cosine.get(c, 0.0)) + weight * words.get(c, 0.0)), c))


def _score(rankings: list[list[int]], qs: list[dict], article_of: dict) -> dict:
    tally = {h: [0, 0, 0] for h in ("tuning", "held_out", "all")}
    for chunk_ids, q in zip(rankings, qs, strict=True):
        ranked: list[str] = []
        for cid in chunk_ids:
            if article_of[cid] not in ranked:
                ranked.append(article_of[cid])
        for h in (half(q["article"]), "all"):
            tally[h][0] += ranked[:1] == [q["article"]]
            tally[h][1] += q["article"] in ranked[:3]
            tally[h][2] += 1
    return {h: {"questions": n, "hit@1": round(a / n, 3), "hit@3": round(b / n, 3)}
            for h, (a, b, n) in tally.items() if n}


def measure_embedding_cost(questions: list[str], chunk_texts: list[str]) -> dict:
    """Each model's cost: a question alone (wall and this thread's CPU, p50/p99, the
    cache cleared before each, as a question never seen before), and the chunks in one
    batch as indexing embeds them (wall and CPU per chunk)."""
    import time

    from knowledge import embedding

    from ..stats import percentile

    models = {"all-MiniLM-L6-v2": embedding.embed}
    if (wordllama := _wordllama()) is not None:
        models["wordllama l2_supercat"] = wordllama
    out = {}
    for name, embed in models.items():
        embed(["warm up"])
        wall, cpu = [], []
        for q in questions:
            embedding.cache_clear()
            w0, c0 = time.perf_counter(), time.thread_time()
            embed([q])
            wall.append(time.perf_counter() - w0)
            cpu.append(time.thread_time() - c0)
        embedding.cache_clear()
        w0, c0 = time.perf_counter(), time.thread_time()
        embed(chunk_texts)
        n = max(len(chunk_texts), 1)
        out[name] = {
            "question_wall_ms": [round(percentile(wall, p) * 1000, 2) for p in (50, 99)],
            "question_cpu_ms": [round(percentile(cpu, p) * 1000, 2) for p in (50, 99)],
            "chunk_wall_ms": round((time.perf_counter() - w0) / n * 1000, 1),
            "chunk_cpu_ms": round((time.thread_time() - c0) / n * 1000, 1),
        }
    return out
