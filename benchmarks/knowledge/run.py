"""`python -m benchmarks knowledge`: retrieval, measured (a benchmark, not a test).

- quality: the demo help centre (knowledge/fixtures/demo-help-centre, 40 articles) and
  benchmarks/knowledge/questions.jsonl (120 questions, each with the article that answers
  it): hit@1 and hit@3 by article, in a tenant of its own and again inside the largest
  synthetic tenant;
- latency: `selectors.retrieve` (what the CPU tier calls: one query, k=3) for the eval
  questions against a tenant holding N synthetic chunks (sentences of the help centre
  shuffled with a long tail of made-up words), beside another tenant with N/10; p50/p99;
- cpu: the CPU tier's work between loading a spec and saving it (validate, retrieve,
  build the prompt, tokenize), with knowledge on and off, at the largest size measured;
- cache: the prefix cache's hit rate (the engine's own PrefixCache, block 32) over
  three-turn conversations, prompts built with and without knowledge.

Each backend runs in a child process of its own (Django takes one database per process):
SQLite in a fresh file under var/bench/, PostgreSQL in a throwaway database on
127.0.0.1:5432. Prints tables; writes JSON under var/bench/ (or at --out, each backend's
beside it).

    python -m benchmarks knowledge [--backends sqlite,postgres] [--sizes 1000,10000,100000]
                                   [--queries 300] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from ..machine import machine_info, measured_on
from ..quick import add_quick_options, parse_quick
from ..report import say, table
from ..stats import percentile

BASE_DIR = Path(__file__).resolve().parents[2]
BENCH_DIR = BASE_DIR / "var" / "bench"
QUESTIONS = BASE_DIR / "benchmarks" / "knowledge" / "questions.jsonl"
# 60 questions about the same articles that share no content word (no English lexeme) with
# the article that answers them: what full-text search alone cannot bridge.
NO_OVERLAP = BASE_DIR / "benchmarks" / "knowledge" / "no_overlap.jsonl"
# 30 questions the demo help centre does not answer (weather, films, homework): every
# passage cited for one of them is an unrelated citation.
OFF_TOPIC = BASE_DIR / "benchmarks" / "knowledge" / "off_topic.jsonl"
MODES = ("bm25", "dense", "hybrid")
# Minimum scores swept (`measure_thresholds`): what each keeps of the right answers and
# how many unrelated articles it still lets a reply cite.
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(17))
HELP_CENTRE = BASE_DIR / "knowledge" / "fixtures" / "demo-help-centre"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SYSTEM_PROMPT = "You are the friendly support assistant of Demo Co. Answer briefly."
REPLY = "Thanks for your message! Let me check that for you: here is what our help centre says."


def summary_ms(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_ms": round(percentile(xs, 50) * 1000, 3), "p99_ms": round(percentile(xs, 99) * 1000, 3),
            "mean_ms": round(statistics.fmean(xs) * 1000, 3)}


# -- the child: one backend ---------------------------------------------------------------


def questions(path: Path = QUESTIONS) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure_quality(tenant, *, study: bool = False) -> dict:
    """hit@1/hit@3 on both question sets in each mode (BM25 alone, vectors alone, the
    two fused), each also on the two halves of the articles (`fusion_study.half`); the
    top-level figures are the paraphrase set's in the default mode. `study`: the
    embedding models and fusion rules compared on the same lists (`fusion_study`)."""
    from knowledge import embedding, importing, services

    result = services.articles_import(tenant=tenant, items=importing.parse_folder(HELP_CENTRE), index="inline")
    source_of = {str(a.pk): a.source for a in result.articles}
    modes = MODES if embedding.available() else ("bm25",)
    sets = {name: {mode: _quality(tenant, source_of, questions(path), mode) for mode in modes}
            for name, path in (("paraphrase", QUESTIONS), ("no_overlap", NO_OVERLAP))}
    default = sets["paraphrase"]["hybrid" if "hybrid" in modes else "bm25"]
    if study and embedding.available():
        from .fusion_study import measure_fusion

        default = {**default, "fusion_study": measure_fusion(
            tenant, source_of, {"paraphrase": questions(QUESTIONS), "no_overlap": questions(NO_OVERLAP)})}
    return {"articles": len(result.articles), **default, "sets": sets,
            "thresholds": {mode: measure_thresholds(tenant, source_of, mode) for mode in modes if mode != "dense"}}


def measure_thresholds(tenant, source_of: dict, mode: str, k: int = 3) -> list[dict]:
    """Per minimum score, a reply's sources as the CPU tier picks them (the top `k`
    chunks at or above it, their articles once each): on the questions the help centre
    answers (both sets), how often the right article is still among them (`hit@k`) and
    how many other articles are cited per reply (`wrong_per_reply`); on the off-topic
    questions, the share that cite anything (`off_topic_cited`)."""
    from knowledge import selectors

    def sources(question: str) -> list[tuple[str, float]]:
        out: dict[str, float] = {}
        for h in selectors.retrieve(tenant_id=tenant.pk, message=question, k=k, mode=mode):
            out.setdefault(source_of.get(h.article_id, h.article_id), h.score)
        return list(out.items())  # (article, its best chunk's score), best first

    answerable = [(q["article"], sources(q["question"])) for q in questions(QUESTIONS) + questions(NO_OVERLAP)]
    off = [sources(q["question"]) for q in questions(OFF_TOPIC)]
    rows = []
    for t in THRESHOLDS:
        kept = [(right, [a for a, score in got if score >= t]) for right, got in answerable]
        rows.append({
            "min_score": t,
            "hit@k": round(sum(right in cited for right, cited in kept) / len(kept), 3),
            "wrong_per_reply": round(sum(len([a for a in cited if a != right]) for right, cited in kept) / len(kept), 3),
            "off_topic_cited": round(sum(any(score >= t for _, score in got) for got in off) / len(off), 3),
        })
    return rows


def _quality(tenant, source_of: dict, qs: list[dict], mode: str) -> dict:
    from knowledge import selectors

    from .fusion_study import half

    hit1 = hit3 = 0
    misses = []
    halves = {"tuning": [0, 0, 0], "held_out": [0, 0, 0]}
    for q in qs:
        ranked: list[str] = []
        for h in selectors.retrieve(tenant_id=tenant.pk, message=q["question"], k=10, mode=mode):
            source = source_of.get(h.article_id, h.article_id)  # a synthetic chunk's article has none
            if source not in ranked:
                ranked.append(source)
        hit1 += ranked[:1] == [q["article"]]
        hit3 += q["article"] in ranked[:3]
        halves[half(q["article"])][0] += ranked[:1] == [q["article"]]
        halves[half(q["article"])][1] += q["article"] in ranked[:3]
        halves[half(q["article"])][2] += 1
        if q["article"] not in ranked[:3]:
            misses.append({"question": q["question"], "expected": q["article"], "got": ranked[:3]})
    return {"questions": len(qs), "hit@1": round(hit1 / len(qs), 3), "hit@3": round(hit3 / len(qs), 3),
            **{h: {"questions": n, "hit@1": round(a / n, 3), "hit@3": round(b / n, 3)}
               for h, (a, b, n) in halves.items() if n},
            "misses": misses}


def synthetic_chunks(tenant, n: int, rng: random.Random) -> None:
    """`n` chunks for `tenant`, 20 to an article, through bulk inserts (the FTS5 triggers
    index them on SQLite; one UPDATE computes the vectors on PostgreSQL)."""
    from django.db import connection, transaction

    from knowledge import dense, embedding
    from knowledge.models import Article, Chunk, KnowledgeSettings
    from knowledge.search import backend_for
    from knowledge.search.postgres import chunk_vector
    from knowledge.terms import terms_adjust

    sentences = []
    titles = []
    for path in sorted(HELP_CENTRE.rglob("*.md")):
        text = path.read_text()
        titles.append(text.split("title:", 1)[1].split("\n", 1)[0].strip())
        body = text.split("---", 2)[2]
        sentences += [s.strip() for s in body.replace("\n", " ").split(". ") if len(s.split()) > 3]
    tail = ["".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3)) for _ in range(5000)]
    if embedding.available():
        import numpy as np

        sentence_vec = embedding.embed(sentences)
        title_vec = dict(zip(titles, embedding.embed(titles), strict=True))
    per_article = 20
    with transaction.atomic():
        for start in range(0, n, 2000):
            count = min(2000, n - start)
            articles = Article.objects.bulk_create([
                Article(tenant=tenant, title=f"{rng.choice(titles)} ({start + i})", body="synthetic", text="synthetic",
                        status=Article.Status.INDEXED, chunk_count=per_article)
                for i in range(0, count, per_article)])
            picks = [rng.sample(range(len(sentences)), 6) for _ in range(count)]
            chunks = [
                Chunk(tenant=tenant, article=articles[i // per_article], ordinal=i % per_article,
                      title=articles[i // per_article].title,
                      text=". ".join(sentences[j] for j in picks[i]) + ". " + " ".join(rng.sample(tail, 4)), n_words=120)
                for i in range(count)]
            if embedding.available():
                # Embedding 100,000 chunks with the model would take hours on this host:
                # a synthetic chunk's vector is the normalised mean of its title's and its
                # six sentences' vectors, each embedded once (what a chunk's own vector is
                # close to, and the same size and cost to score; the latency is what counts).
                for c, picked in zip(chunks, picks, strict=True):
                    v = title_vec[c.title.rsplit(" (", 1)[0]] + sentence_vec[picked].sum(0)
                    c.embedding = embedding.to_bytes(v / np.linalg.norm(v))
            Chunk.objects.bulk_create(chunks, batch_size=500)
        if connection.vendor == "postgresql":
            Chunk.objects.filter(tenant=tenant).update(search_vector=chunk_vector("english"))
        # As indexing counts them (each backend its own way), an article at a time.
        backend = backend_for()
        total: Counter = Counter()
        for article_id in Article.objects.filter(tenant=tenant).values_list("pk", flat=True):
            total.update(backend.term_counts(article_id=article_id))
        terms_adjust(tenant_id=tenant.pk, added=total)
        dense.revision_bump(tenant_id=tenant.pk)
        KnowledgeSettings.objects.get_or_create(tenant=tenant)  # as the first indexed article makes it
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO knowledge_chunk_fts(knowledge_chunk_fts) VALUES ('optimize')")
            cursor.execute("ANALYZE")


def measure_latency(tenant, n_queries: int, mode: str = "bm25") -> dict:
    from knowledge import dense, embedding, selectors

    qs = [q["question"] for q in questions()]
    dense.cache_clear()
    t0 = time.perf_counter()
    for q in qs[:20]:  # warm the caches and the connection (hybrid: the first loads the vectors)
        selectors.retrieve(tenant_id=tenant.pk, message=q, k=3, mode=mode)
    warm_s = time.perf_counter() - t0
    times = []
    for i in range(n_queries):
        embedding.cache_clear()  # every question embedded as if new: its full cost
        t0 = time.perf_counter()
        selectors.retrieve(tenant_id=tenant.pk, message=qs[i % len(qs)], k=3, mode=mode)
        times.append(time.perf_counter() - t0)
    out = summary_ms(times)
    if mode != "bm25":
        out.update(vector_cache_mb=round(dense.cache_bytes() / 2**20, 2), warm_s=round(warm_s, 2))
    return out


def measure_sync(n_pages: int) -> dict:
    """A website source over a generated site of `n_pages` on 127.0.0.1 (the operator
    setting allows that host only): the first sync (pages fetched, extracted, chunked,
    embedded, indexed per second) and a re-sync of the unchanged site (every page a 304),
    the steps run in this process as the CPU worker's task runs them."""
    from django.conf import settings

    from knowledge import sources, syncing
    from knowledge.models import Source
    from tenants.services import tenant_create

    from .site import Site, generated_pages

    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    # This process runs the steps itself and has no broker: the chain's next-step sends
    # are left out (each would otherwise wait on a connection that cannot be made).
    sources.sync_step_send = syncing.sync_step_send = lambda **kwargs: None
    site = Site(generated_pages(n_pages, HELP_CENTRE))
    try:
        tenant = tenant_create(slug=f"bench-sync-{n_pages}", name="Sync").tenant
        source = sources.source_create(tenant=tenant, kind="website", name="Generated", delay_ms=0,
                                       url=site.base + "/sitemap.xml", max_pages=n_pages)
        out = {"pages": n_pages}
        for label in ("first", "unchanged"):
            if label == "unchanged":
                sources.source_sync_request(source=source)
            t0 = time.perf_counter()
            source.refresh_from_db()
            steps = 0
            while source.status in (Source.Status.QUEUED, Source.Status.SYNCING):
                syncing.sync_step(source_id=source.pk, run=str(source.run), step=source.state.get("step", 0))
                source.refresh_from_db()
                steps += 1
            took = time.perf_counter() - t0
            out[label] = {"s": round(took, 2), "pages_per_s": round(source.fetched / took, 1), "steps": steps,
                          "fetched": source.fetched, "changed": source.changed, "failed": source.failed,
                          "status": source.status}
        return out
    finally:
        site.close()


def measure_cpu_tier(tenant, n_requests: int) -> dict:
    """The CPU tier's work on one request (inference/pipeline/cpu.py between load and
    save), knowledge on vs off."""
    from inference.pipeline.cpu import knowledge_hits, prompt_parts
    from inference.text.prompting import build_prompt
    from inference.text.tokenizer import get_tokenizer
    from inference.wire.spec import RequestSpec, Sampling
    from knowledge import embedding
    from knowledge.selectors import passage, retrieval_spec, sources_of

    tokenizer = get_tokenizer()
    qs = [q["question"] for q in questions()]
    out = {}
    for label, retrieval in (("off", {}), ("on", retrieval_spec(tenant))):
        times, tokens = [], []
        for i in range(n_requests + 10):
            spec = RequestSpec(request_id="bench", tenant_id=tenant.pk, api_key_id=None, conversation_id="c",
                               channel="widget", sampling=Sampling(max_tokens=256), system_prompt=SYSTEM_PROMPT,
                               max_prompt_tokens=1536, retrieval=retrieval,
                               prompt_messages=[{"role": "user", "content": qs[i % len(qs)]}])
            embedding.cache_clear()  # every question embedded as if new
            t0 = time.perf_counter()
            system_prompt, history = prompt_parts(spec)
            hits = knowledge_hits(spec, history)
            prompt = build_prompt(tokenizer, system_prompt=system_prompt, history=history, max_prompt_tokens=1536,
                                  knowledge=[passage(h) for h in hits] if spec.retrieval else None)
            spec.sources = sources_of(hits[:prompt.knowledge_used])
            if i >= 10:
                times.append(time.perf_counter() - t0)
                tokens.append(prompt.n_tokens)
        out[label] = {**summary_ms(times), "prompt_tokens_mean": round(statistics.fmean(tokens), 1)}
    out["added_p50_ms"] = round(out["on"]["p50_ms"] - out["off"]["p50_ms"], 3)
    out["added_p99_ms"] = round(out["on"]["p99_ms"] - out["off"]["p99_ms"], 3)
    return out


def measure_prefix_cache(tenant, n_conversations: int = 40) -> dict:
    """Hit rate of the engine's prefix cache (tokens served from it / prompt tokens) over
    three-turn conversations, the same questions with knowledge in the prompt and without."""
    import torch

    from inference.engine.prefix_cache import PrefixCache
    from inference.pipeline.cpu import knowledge_hits
    from inference.text.prompting import build_prompt
    from inference.text.tokenizer import get_tokenizer
    from inference.wire.spec import RequestSpec, Sampling
    from knowledge.selectors import passage, retrieval_spec

    tokenizer = get_tokenizer()
    qs = [q["question"] for q in questions()]
    rng = random.Random(7)
    conversations = [rng.sample(qs, 3) for _ in range(n_conversations)]
    out = {}
    for label, retrieval in (("without_knowledge", {}), ("with_knowledge", retrieval_spec(tenant))):
        cache = PrefixCache(fingerprint="bench", max_tokens=1 << 22, block_size=32)
        hit = total = 0
        for turns in conversations:
            history: list[dict] = []
            for question in turns:
                history.append({"role": "user", "content": question})
                spec = RequestSpec(request_id="b", tenant_id=tenant.pk, api_key_id=None, conversation_id="c",
                                   channel="widget", sampling=Sampling(), retrieval=retrieval)
                hits = knowledge_hits(spec, history)
                ids = build_prompt(tokenizer, system_prompt=SYSTEM_PROMPT, history=history, max_prompt_tokens=1536,
                                   knowledge=[passage(h) for h in hits] if retrieval else None).token_ids
                found = cache.lookup(ids, f"tenant:{tenant.pk}")
                hit += found.tokens if found else 0
                total += len(ids)
                kv = torch.zeros(1, 1, len(ids), 1)
                cache.insert(ids, f"tenant:{tenant.pk}", kv, kv)
                history.append({"role": "assistant", "content": REPLY})
        out[label] = {"prompt_tokens": total, "cached_tokens": hit, "hit_rate": round(hit / total, 3)}
    return out


def child(backend: str, sizes: list[int], n_queries: int, out_path: Path, *, cpu_requests: int = 200,
          conversations: int = 40, sync_pages: int = 500) -> None:
    run_dir = BENCH_DIR / f"knowledge-{backend}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    throwaway = None
    if backend == "postgres":
        import psycopg

        throwaway = f"tandem_bench_knowledge_{os.getpid()}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{throwaway}"')
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{throwaway}"
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{run_dir / 'bench.sqlite3'}"
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: nothing here enqueues
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")
    import logging

    import django

    django.setup()
    logging.getLogger("tenants.changes").setLevel(logging.CRITICAL)  # no Redis to count changes in
    from django.core.management import call_command
    from django.db import connection, connections

    from knowledge import embedding
    from tenants.services import tenant_create

    try:
        call_command("migrate", verbosity=0, interactive=False)
        result: dict = {"backend": backend, "vendor": connection.vendor}
        say(f"{backend}: quality on the help centre")
        demo = tenant_create(slug="bench-demo", name="Demo").tenant
        result["quality"] = measure_quality(demo, study=True)
        say(f"{backend}: syncing a generated site of {sync_pages} pages, then again unchanged")
        result["sync"] = measure_sync(sync_pages)
        say(f"{backend}: {result['sync']}")
        say(f"{backend}: prefix cache with and without knowledge")
        result["prefix_cache"] = measure_prefix_cache(demo, conversations)
        result["latency"] = {}
        rng = random.Random(1)
        for n in sizes:
            say(f"{backend}: {n} chunks (+{n // 10} of another tenant)")
            tenant = tenant_create(slug=f"bench-{n}", name=f"Bench {n}").tenant
            other = tenant_create(slug=f"bench-{n}-other", name="Other").tenant
            t0 = time.perf_counter()
            synthetic_chunks(tenant, n, rng)
            synthetic_chunks(other, n // 10, rng)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    # The planner's statistics for every table the query reads, as
                    # autovacuum keeps them for a deployment's tables.
                    cursor.execute("VACUUM ANALYZE knowledge_chunk, knowledge_article, knowledge_term")
            build_s = time.perf_counter() - t0
            result["latency"][str(n)] = {**measure_latency(tenant, n_queries), "build_s": round(build_s, 1)}
            if embedding.available():
                result.setdefault("latency_hybrid", {})[str(n)] = measure_latency(tenant, n_queries, "hybrid")
            say(f"{backend}: {n} chunks: {result['latency'][str(n)]}")
            if n == max(sizes):
                say(f"{backend}: the CPU tier's added time at {n} chunks")
                result["cpu_tier"] = {"chunks": n, **measure_cpu_tier(tenant, cpu_requests)}
                # The help centre among the synthetic chunks (made of its own sentences):
                # what bounding the chunks ranked costs, against the small tenant's figure.
                say(f"{backend}: quality on the help centre inside the {n}-chunk tenant")
                result["quality_at_scale"] = {"chunks": n, **measure_quality(tenant)}
        out_path.write_text(json.dumps(result, indent=2))
    finally:
        connections.close_all()
        if throwaway:
            import psycopg

            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{throwaway}" WITH (FORCE)')


# -- the parent ---------------------------------------------------------------------------


# --quick: SQLite alone (PostgreSQL's path is the full run's), a few hundred chunks, a
# few queries: every measurement's code on a small workload.
QUICK = {"backends": "sqlite", "sizes": "200", "queries": 20, "cpu_requests": 10, "conversations": 4,
         "sync_pages": 20}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks knowledge")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--cpu-requests", type=int, default=200,
                        help="CPU-tier requests timed, knowledge on and off (default 200)")
    parser.add_argument("--conversations", type=int, default=40,
                        help="three-turn conversations through the prefix cache (default 40)")
    parser.add_argument("--sync-pages", type=int, default=500,
                        help="pages of the generated site a website source syncs (default 500)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    add_quick_options(parser, default_out=None)
    args = parse_quick(parser, argv, name="knowledge", default_out=None, quick_defaults=QUICK)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.child:
        child(args.child, sizes, args.queries, Path(args.child_out), cpu_requests=args.cpu_requests,
              conversations=args.conversations, sync_pages=args.sync_pages)
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    path = Path(args.out) if args.out else BENCH_DIR / f"knowledge-{stamp}.json"
    if not path.is_absolute():
        path = BASE_DIR / path
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "knowledge", "quick": args.quick, "machine": machine_info(), "sizes": sizes,
              "queries": args.queries, "backends": {}}
    for backend in args.backends.split(","):
        out = path.with_name(f"{path.stem}-{backend}{path.suffix}")
        env = {**os.environ, "PYTHONPATH": str(BASE_DIR)}
        env.pop("DATABASE_URL", None)
        subprocess.run([sys.executable, "-m", "benchmarks", "knowledge", "--child", backend, "--child-out", str(out),
                        "--sizes", args.sizes, "--queries", str(args.queries),
                        "--cpu-requests", str(args.cpu_requests), "--conversations", str(args.conversations),
                        "--sync-pages", str(args.sync_pages)],
                       cwd=BASE_DIR, env=env, check=True)
        report["backends"][backend] = json.loads(out.read_text())
    path.write_text(json.dumps(report, indent=2))
    b = report["backends"]
    print(f"\n{measured_on(report['machine'])}\n")
    print(table(["backend", "chunks", "retrieval p50 ms", "retrieval p99 ms", "build s"],
                [[name, n, r["latency"][str(n)]["p50_ms"], r["latency"][str(n)]["p99_ms"], r["latency"][str(n)]["build_s"]]
                 for name, r in b.items() for n in sizes], digits=2))
    print()
    print(table(["backend", "articles", "questions", "hit@1", "hit@3"],
                [[name, r["quality"]["articles"], r["quality"]["questions"], r["quality"]["hit@1"], r["quality"]["hit@3"]]
                 for name, r in b.items()], digits=3))
    print()
    sets = [(name, qset, mode, m) for name, r in b.items() for qset, modes in r["quality"].get("sets", {}).items()
            for mode, m in modes.items()]
    if sets:
        print(table(["backend", "question set", "retrieval", "hit@1", "hit@3", "tuning half hit@1/@3",
                     "held-out half hit@1/@3"],
                    [[name, qset, mode, m["hit@1"], m["hit@3"],
                      *(f"{m[h]['hit@1']:.3f}/{m[h]['hit@3']:.3f}" if h in m else "" for h in ("tuning", "held_out"))]
                     for name, qset, mode, m in sets], digits=3))
        print()
    study = [(name, qset, rule, m) for name, r in b.items()
             for qset, rules in r["quality"].get("fusion_study", {}).items() if qset != "embedding_cost"
             for rule, m in rules.items()]
    costs = [(name, model, c) for name, r in b.items()
             for model, c in r["quality"].get("fusion_study", {}).get("embedding_cost", {}).items()]
    if costs:
        print(table(["backend", "model", "question wall p50/p99 ms", "question CPU p50/p99 ms", "chunk wall ms",
                     "chunk CPU ms"],
                    [[name, model, "/".join(map(str, c["question_wall_ms"])), "/".join(map(str, c["question_cpu_ms"])),
                      c["chunk_wall_ms"], c["chunk_cpu_ms"]] for name, model, c in costs], digits=2))
        print()
    if study:
        print(table(["backend", "question set", "model and fusion (same full-text lists)", "hit@1", "hit@3",
                     "tuning half hit@1/@3", "held-out half hit@1/@3"],
                    [[name, qset, rule, m["all"]["hit@1"], m["all"]["hit@3"],
                      *(f"{m[h]['hit@1']:.3f}/{m[h]['hit@3']:.3f}" for h in ("tuning", "held_out"))]
                     for name, qset, rule, m in study], digits=3))
        print()
    sweeps = [(name, mode, row) for name, r in b.items() for mode, rows in r["quality"].get("thresholds", {}).items()
              for row in rows]
    if sweeps:
        print(table(["backend", "retrieval", "min score", "hit@3", "other articles cited per reply",
                     "off-topic questions citing something"],
                    [[name, mode, row["min_score"], row["hit@k"], row["wrong_per_reply"], row["off_topic_cited"]]
                     for name, mode, row in sweeps], digits=3))
        print()
    hybrid = [(name, n, r["latency_hybrid"][str(n)]) for name, r in b.items() for n in sizes
              if str(n) in r.get("latency_hybrid", {})]
    if hybrid:
        print(table(["backend", "chunks", "hybrid p50 ms", "hybrid p99 ms", "vectors in memory MB", "first load s"],
                    [[name, n, h["p50_ms"], h["p99_ms"], h["vector_cache_mb"], h["warm_s"]] for name, n, h in hybrid],
                    digits=2))
        print()
    print(table(["backend", "site pages", "first sync s", "pages/s", "unchanged re-sync s", "pages/s"],
                [[name, r["sync"]["pages"], r["sync"]["first"]["s"], r["sync"]["first"]["pages_per_s"],
                  r["sync"]["unchanged"]["s"], r["sync"]["unchanged"]["pages_per_s"]] for name, r in b.items()],
                digits=2))
    print()
    print(table(["backend", "help centre inside a tenant of N chunks", "hit@1", "hit@3"],
                [[name, r["quality_at_scale"]["chunks"], r["quality_at_scale"]["hit@1"], r["quality_at_scale"]["hit@3"]]
                 for name, r in b.items()], digits=3))
    print()
    print(table(["backend", "chunks", "CPU tier off p50/p99 ms", "on p50/p99 ms", "added p50/p99 ms", "prompt tokens off/on"],
                [[name, r["cpu_tier"]["chunks"], f"{r['cpu_tier']['off']['p50_ms']}/{r['cpu_tier']['off']['p99_ms']}",
                  f"{r['cpu_tier']['on']['p50_ms']}/{r['cpu_tier']['on']['p99_ms']}",
                  f"{r['cpu_tier']['added_p50_ms']}/{r['cpu_tier']['added_p99_ms']}",
                  f"{r['cpu_tier']['off']['prompt_tokens_mean']}/{r['cpu_tier']['on']['prompt_tokens_mean']}"]
                 for name, r in b.items()]))
    print()
    print(table(["backend", "prefix-cache hit rate without knowledge", "with knowledge"],
                [[name, r["prefix_cache"]["without_knowledge"]["hit_rate"], r["prefix_cache"]["with_knowledge"]["hit_rate"]]
                 for name, r in b.items()], digits=3))
    print(f"\nJSON: {path}")
