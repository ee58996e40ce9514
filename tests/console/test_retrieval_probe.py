"""Test retrieval is answered by the CPU tier (issue 31: questions are embedded on the
CPU tier only): the web process, here the test process behind Django's test client,
never loads the question encoder for it, and says so when no CPU worker answers."""

from __future__ import annotations

import uuid
from collections import OrderedDict

import pytest

from knowledge import embedding, probe
from knowledge import services as knowledge

A = "/console/t/alpha"


@pytest.mark.django_db(transaction=True)
def test_the_web_process_never_loads_the_encoder_for_test_retrieval(platform, client, world, monkeypatch):
    assert embedding.available()  # or hybrid retrieval would not embed anywhere
    for title, body in (("Shipping times", "Parcels leave our warehouse within two days."),
                        ("Returns", "Send an item back within 30 days for a refund.")):
        knowledge.article_index(article_id=knowledge.article_create(tenant=world.a.tenant, title=title, body=body).pk)
    # Indexing here (the CPU tier's task, run in-process) loaded it: this process starts
    # the page as a web process does, with no encoder and no question embedded.
    monkeypatch.setattr(embedding, "_encoder", None)
    monkeypatch.setattr(embedding, "_cache", OrderedDict())
    client.force_login(world.viewer_a)
    question = "When does my parcel leave?"
    resp = client.get(f"{A}/knowledge/test/", {"q": question})
    assert resp.status_code == 200
    ranked = resp.content.decode().split('aria-label="Ranked passages"')[1]
    assert "Shipping times" in ranked
    assert embedding._encoder is None and question not in embedding._cache


@pytest.mark.django_db
def test_test_retrieval_says_when_no_cpu_worker_answered_in_time(client, world, settings, monkeypatch,
                                                                  redis_client):
    queue = f"test-unconsumed-{uuid.uuid4().hex}"  # a queue no worker serves, whatever runs
    monkeypatch.setattr(probe, "PROBE_QUEUE", queue)
    settings.TANDEM_KNOWLEDGE_PROBE_WAIT_S = 0.3
    client.force_login(world.viewer_a)
    try:
        resp = client.get(f"{A}/knowledge/test/", {"q": "When does my parcel leave?"})
    finally:
        for key in redis_client.scan_iter(f"*{queue}*"):
            redis_client.delete(key)
    html = resp.content.decode()
    assert resp.status_code == 503
    assert "The CPU tier did not answer within 0.3 s." in html and "is a CPU worker running?" in html
    assert 'value="When does my parcel leave?"' in html  # the form kept
    assert 'aria-label="Ranked passages"' not in html
