"""Retrieval asked of the CPU tier (knowledge.probe): the session platform's CPU worker
answers with what `selectors.retrieve` returns, for the tenant the caller names; and a
probe nobody takes is None once the wait is over."""

from __future__ import annotations

import uuid

import pytest

from knowledge import probe, selectors
from knowledge import services as knowledge
from tests.factories import make_tenant


def indexed(tenant, title: str, body: str) -> None:
    knowledge.article_index(article_id=knowledge.article_create(tenant=tenant, title=title, body=body).pk)


@pytest.mark.django_db(transaction=True)
def test_a_cpu_worker_answers_a_probe_with_the_tenants_own_ranking(platform):
    a, b = make_tenant().tenant, make_tenant().tenant
    indexed(a, "Shipping times", "Parcels leave our warehouse within two days.")
    indexed(a, "Returns", "Send an item back within 30 days for a refund.")
    indexed(b, "Bravo shipping", "Bravo parcels leave within two days.")
    question = "When does my parcel leave?"
    hits = probe.probe(tenant_id=a.pk, question=question, k=10, language="english", mode="hybrid")
    assert hits is not None and [h.title for h in hits][:1] == ["Shipping times"]
    assert {h.title for h in hits} <= {"Shipping times", "Returns"}
    # The same hits, scores included, as this process retrieves them (JSON keeps a float's value).
    assert hits == selectors.retrieve(tenant_id=a.pk, message=question, k=10, min_score=0.0, language="english",
                                      mode="hybrid")
    assert [h.title for h in probe.probe(tenant_id=b.pk, question=question, k=10, language="english",
                                         mode="bm25")] == ["Bravo shipping"]


@pytest.mark.django_db
def test_a_probe_nobody_takes_is_none_after_the_wait(settings, monkeypatch, redis_client):
    queue = f"test-unconsumed-{uuid.uuid4().hex}"
    monkeypatch.setattr(probe, "PROBE_QUEUE", queue)
    settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S = 0.2
    try:
        assert probe.probe(tenant_id=1, question="anything", k=3, language="english", mode="bm25") is None
        assert any(queue in k.decode() for k in redis_client.scan_iter(f"*{queue}*"))  # sent, and left there
    finally:
        for key in redis_client.scan_iter(f"*{queue}*"):
            redis_client.delete(key)
