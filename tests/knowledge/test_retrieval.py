"""Retrieval through the one interface over both backends: whichever database this
session runs on (SQLite's FTS5 without DATABASE_URL, PostgreSQL in CI). When PostgreSQL
is configured, the last test runs this same file again on SQLite in a child pytest, so
both backends are exercised in either configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import selectors, services
from knowledge.models import Article, Chunk
from knowledge.search import backend_for
from tests.factories import make_tenant

from .conftest import import_help_centre


def retrieve(**kwargs):
    """Full-text retrieval (BM25) alone: what these tests pin; the hybrid mode is
    test_hybrid.py's."""
    return selectors.retrieve(mode="bm25", **kwargs)


pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def top_sources(tenant, question: str, k: int = 5) -> list[str]:
    hits = retrieve(tenant_id=tenant.pk, message=question, k=k)
    sources = dict(Article.objects.filter(pk__in=[h.article_id for h in hits]).values_list("pk", "source"))
    return [_source(sources, h.article_id) for h in hits]


def _source(sources: dict, article_id: str) -> str:
    return next(v for k, v in sources.items() if str(k) == article_id)


def test_an_imported_help_centre_is_indexed_and_a_question_matching_one_article_returns_it_first():
    tenant = make_tenant().tenant
    articles = import_help_centre(tenant)
    assert len(articles) == 40
    assert all(a.status == Article.Status.INDEXED and a.chunk_count >= 1 for a in articles.values())
    assert Chunk.objects.filter(tenant=tenant).count() == sum(a.chunk_count for a in articles.values())
    assert top_sources(tenant, "I was charged twice for my order")[0] == "orders/charged-twice.md"
    assert top_sources(tenant, "How do I clean a rusty cast iron skillet?")[0] == "products/cast-iron-care.md"


def test_hits_carry_their_article_title_url_heading_and_a_score_between_0_and_1():
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    [hit] = retrieve(tenant_id=tenant.pk, message="Klarna instalments invoice", k=1)
    assert hit.title == "Paying later with Klarna"
    assert hit.url == "https://help.demo-co.example/payments/klarna"
    assert 0 < hit.score < 1
    assert "Klarna" in selectors.passage(hit).split("\n", 1)[0]


def test_an_article_deleted_after_indexing_is_never_retrieved_again():
    tenant = make_tenant().tenant
    article = services.article_create(tenant=tenant, title="Zebra stripes", body="Zebras have stripes.")
    services.article_index(article_id=article.pk)
    assert retrieve(tenant_id=tenant.pk, message="zebra stripes", k=3)
    services.article_delete(article=article)
    assert retrieve(tenant_id=tenant.pk, message="zebra stripes", k=3) == []
    assert not Chunk.objects.filter(article_id=article.pk).exists()


def test_editing_an_article_reindexes_it_and_its_old_words_no_longer_match():
    tenant = make_tenant().tenant
    article = services.article_create(tenant=tenant, title="Opening hours", body="We open at nine on Mondays.")
    services.article_index(article_id=article.pk)
    article = services.article_update(article=article, body="We open at ten on Saturdays.")
    assert article.status == Article.Status.PENDING
    services.article_index(article_id=article.pk)
    assert retrieve(tenant_id=tenant.pk, message="mondays", k=3) == []
    [hit] = retrieve(tenant_id=tenant.pk, message="saturdays", k=3)
    assert hit.article_id == str(article.pk)


def test_indexing_the_same_content_again_changes_nothing():
    tenant = make_tenant().tenant
    article = services.article_create(tenant=tenant, title="Gift cards", body="Gift cards last two years.")
    services.article_index(article_id=article.pk)
    before = list(Chunk.objects.filter(article=article).values_list("pk", flat=True))
    services.article_index(article_id=article.pk)  # a redelivered task
    assert list(Chunk.objects.filter(article=article).values_list("pk", flat=True)) == before
    assert services.article_index(article_id="00000000-0000-0000-0000-000000000000") is None  # deleted meanwhile


def test_k_and_the_minimum_score_bound_what_comes_back():
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    assert len(retrieve(tenant_id=tenant.pk, message="order delivery refund", k=2)) == 2
    everything = retrieve(tenant_id=tenant.pk, message="order delivery refund", k=10)
    floor = everything[len(everything) // 2].score
    above = retrieve(tenant_id=tenant.pk, message="order delivery refund", k=10, min_score=floor)
    assert above and all(h.score >= floor for h in above) and len(above) < len(everything)


@pytest.mark.parametrize("question", [
    'tenant : "t1" OR *', "NEAR(a b) AND NOT c", "'); DROP TABLE knowledge_chunk; --", "refund & | ! <-> :*",
    "", "   ", "the and of",  # nothing left to search for
])
def test_query_syntax_in_a_question_is_only_words(question):
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    hits = retrieve(tenant_id=tenant.pk, message=question, k=5)
    assert all(Chunk.objects.get(pk=h.chunk_id).tenant_id == tenant.pk for h in hits)
    assert Chunk.objects.filter(tenant=tenant).exists()


def test_word_counts_follow_indexing_editing_and_deleting():
    from knowledge.models import Term

    tenant = make_tenant().tenant

    def df():
        # Less the vectors' revision counter (knowledge.dense), which only ever grows.
        return dict(Term.objects.filter(tenant=tenant).exclude(word="#rev").values_list("word", "df"))

    # What each index holds and its query looks up: PostgreSQL's english lexemes (and the
    # chunks' words, for BM25's average length), the words themselves on SQLite.
    def words(**counts):
        if connection.vendor != "postgresql":
            return counts
        stems = {"towels": "towel", "dry": "dri"}
        total = sum(Chunk.objects.filter(tenant=tenant).values_list("n_words", flat=True))
        return {"#words": total, **{stems.get(w, w): n for w, n in counts.items()}}

    a = services.article_create(tenant=tenant, title="Towels", body="# Wash\n\nwash towels hot\n\n# Dry\n\ndry towels")
    services.article_index(article_id=a.pk)
    assert df() == {"": 2, **words(towels=2, wash=1, hot=1, dry=1)}
    services.article_update(article=a, body="wash towels cold")
    services.article_index(article_id=a.pk)
    assert df() == {"": 1, **words(towels=1, wash=1, cold=1)}
    services.article_delete(article=a)
    assert df() == {"": 0}


def test_a_word_most_chunks_hold_weighs_less_than_a_rare_one_even_in_a_title():
    tenant = make_tenant().tenant
    for thing in ("Changing", "Cancelling", "Tracking", "Paying for", "Splitting", "Repeating", "Reviewing", "Printing"):
        services.article_index(article_id=services.article_create(
            tenant=tenant, title=f"{thing} an order", body=f"{thing} an order takes a minute in your account.").pk)
    times = services.article_create(tenant=tenant, title="Delivery times", body="Parcels arrive within three days.")
    services.article_index(article_id=times.pk)
    # "order" is in eight titles, "arrive" in one text: the rare word decides.
    [first, *_] = retrieve(tenant_id=tenant.pk, message="When will my order arrive?", k=3)
    assert first.article_id == str(times.pk)


def test_past_the_floor_only_chunks_holding_the_rarest_words_are_ranked_unless_every_word_is_common():
    from knowledge.search.base import CANDIDATES, COMMON_FLOOR

    tenant = make_tenant().tenant
    n = max(COMMON_FLOOR, CANDIDATES) + 50
    body = "\n\n".join(f"# Part {i}\n\norder code{i}" for i in range(n))
    services.article_index(article_id=services.article_create(tenant=tenant, title="Orders", body=body).pk)
    # "order" is in every chunk: the question's rare word decides which chunks rank.
    [hit] = retrieve(tenant_id=tenant.pk, message="order code7", k=5)
    assert hit.text == "order code7"
    # A question of common words only still finds them.
    assert len(retrieve(tenant_id=tenant.pk, message="order", k=5)) == 5


VOCABULARY = ["refund", "order", "parcel", "delivery", "invoice", "warranty", "password", "account",
              "shipping", "return", "discount", "payment", "card", "lamp", "knife", "towel"]


def test_two_tenants_sharing_a_vocabulary_never_get_each_others_chunks_whatever_the_words():
    a, b = make_tenant().tenant, make_tenant().tenant
    for tenant, marker in ((a, "alpha"), (b, "beta")):
        for i, word in enumerate(VOCABULARY):
            body = f"{word} {VOCABULARY[(i + 1) % len(VOCABULARY)]} {marker} tenant{tenant.pk} " * 3
            services.article_index(article_id=services.article_create(
                tenant=tenant, title=f"{word.title()} help", body=body).pk)
    owned = {t.pk: set(Chunk.objects.filter(tenant=t).values_list("pk", flat=True)) for t in (a, b)}
    words = st.lists(st.sampled_from(VOCABULARY + ["alpha", "beta", f"tenant{a.pk}", f"tenant{b.pk}", "t", "tenant"]),
                     min_size=1, max_size=12)

    @given(words=words, noise=st.text(max_size=40), k=st.integers(1, 40))
    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(words, noise, k):
        for tenant in (a, b):
            hits = retrieve(tenant_id=tenant.pk, message=" ".join(words) + " " + noise, k=k)
            assert {h.chunk_id for h in hits} <= owned[tenant.pk]

    check()
    # The shared words do match in both: the isolation is the query's, not the data's.
    assert retrieve(tenant_id=a.pk, message="refund", k=5)
    assert retrieve(tenant_id=b.pk, message="refund", k=5)


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="PostgreSQL backend: runs when DATABASE_URL names PostgreSQL (as in CI)")
def test_postgres_retrieval_is_one_query_through_the_tenant_and_vector_gin_index():
    from django.test.utils import CaptureQueriesContext

    tenant, other = make_tenant().tenant, make_tenant().tenant
    import_help_centre(tenant)
    # Enough rows for the planner's choice to mean something: 3000 chunks of another tenant.
    bulk = services.article_create(tenant=other, title="Bulk", body="bulk")
    Chunk.objects.bulk_create([Chunk(tenant=other, article=bulk, ordinal=i, title="Bulk",
                                     text=f"order delivery refund parcel number {i}") for i in range(3000)])
    backend = backend_for()
    backend.index_article(article_id=bulk.pk, language="english")
    assert backend.vendor == "postgresql"
    with CaptureQueriesContext(connection) as queries:
        hits = backend.search(tenant_id=tenant.pk, terms=["klarna", "instalments"], k=3, min_score=0.0,
                              language="english")
    assert hits and {Chunk.objects.get(pk=h.chunk_id).tenant_id for h in hits} == {tenant.pk}
    [query] = [q["sql"] for q in queries.captured_queries]
    assert "ts_rank_cd" in query and '"knowledge_chunk"."tenant_id" =' in query
    # The statement binds its parameters on the server (a prepared statement): explained
    # here with the same parameters, bound by Django's client-side cursor.
    from knowledge.search import postgres

    params = {"tenant": tenant.pk, "words": ["klarna", "instalments"], "config": "english", "k": 3,
              "candidates": 1000, "ranked": 1000}
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_chunk")
        cursor.execute("EXPLAIN " + postgres._SQL, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "knowledge_chunk_tenant_search" in plan, plan


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="PostgreSQL backend: runs when DATABASE_URL names PostgreSQL (as in CI)")
def test_the_migration_to_lexeme_counts_rebuilds_what_indexing_counts():
    from importlib import import_module

    from knowledge.models import Term

    migration = import_module("knowledge.migrations.0003_term_lexemes")
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    # The vectors' revision counter (knowledge.dense, a later migration's) is not a count.
    indexed = dict(Term.objects.filter(tenant=tenant).exclude(word="#rev").values_list("word", "df"))
    assert indexed[""] == Chunk.objects.filter(tenant=tenant).count() and indexed["refund"] > 1
    with connection.cursor() as cursor:
        cursor.execute(migration.REBUILD)
    assert dict(Term.objects.filter(tenant=tenant).exclude(word="#rev").values_list("word", "df")) == indexed


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite backend: runs without DATABASE_URL "
                    "(and in the child run of the test below when PostgreSQL is configured)")
def test_sqlite_fts_rows_follow_the_chunk_rows_through_their_triggers():
    tenant = make_tenant().tenant
    article = services.article_create(tenant=tenant, title="Towels", body="Wash towels at 60 degrees.")
    services.article_index(article_id=article.pk)
    chunk = Chunk.objects.get(article=article)

    def fts_rows():
        with connection.cursor() as cursor:
            cursor.execute("SELECT rowid, tenant, body FROM knowledge_chunk_fts WHERE rowid = %s", [chunk.pk])
            return cursor.fetchall()

    assert fts_rows() == [(chunk.pk, f"t{tenant.pk}", "Wash towels at 60 degrees.")]
    Chunk.objects.filter(pk=chunk.pk).update(text="Wash towels at 40 degrees.")
    assert fts_rows() == [(chunk.pk, f"t{tenant.pk}", "Wash towels at 40 degrees.")]
    tenant.delete()  # cascades through the ORM, as any delete does
    assert fts_rows() == []


def test_the_sqlite_backend_passes_too_when_postgresql_is_configured():
    """CI runs on PostgreSQL: this runs the file above on SQLite's FTS5 in a child pytest
    (DATABASE_URL unset), so the embedded default's backend is tested there too."""
    if connection.vendor == "sqlite":
        pytest.skip("this session already runs on SQLite: every test above used the FTS5 backend")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(Path(__file__).relative_to(ROOT)), "-q", "-p", "no:cacheprovider",
         "-k", "not sqlite_backend_passes_too"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert "3 skipped" in result.stdout  # the PostgreSQL-only tests, and only they


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="PostgreSQL backend: runs when DATABASE_URL names PostgreSQL (as in CI)")
def test_a_chunks_full_text_vector_stays_in_its_row_and_its_embedding_goes_out_of_it():
    # Out of line, every candidate of a full-text query cost a TOAST fetch (migration 0007).
    with connection.cursor() as cursor:
        cursor.execute("SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'knowledge_chunk'::regclass"
                       " AND attname IN ('search_vector', 'embedding')")
        assert dict(cursor.fetchall()) == {"search_vector": "m", "embedding": "e"}
