"""Test retrieval is answered by the CPU tier (issue 31: questions are embedded on the
CPU tier only): the web process, here the test process behind Django's test client,
never loads the question encoder for it, and says so when no CPU worker answers."""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict

import httpx
import pytest
import redis

from devstack.processes import extra_web
from inference.wire.broker import priority_lists
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


@pytest.mark.django_db(transaction=True)
def test_a_page_waiting_on_the_cpu_tier_holds_no_database_connection(platform, client, world):
    """On a web process whose pool has one connection, other pages are served while a
    Test retrieval waits for the CPU tier. The process is given a Redis database of its
    own that no worker reads, so the probe waits its whole TANDEM_KNOWLEDGE_PROBE_WAIT_S."""
    base, index = platform.env["REDIS_URL"].rsplit("/", 1)
    silent = f"{base}/{(int(index or 0) + 1) % 16}"
    broker = redis.Redis.from_url(silent)
    client.force_login(world.viewer_a)
    cookies = {"sessionid": client.cookies["sessionid"].value}
    env = {"REDIS_URL": silent, "CELERY_BROKER_URL": silent, "DB_POOL_SIZE": "1", "DB_POOL_WAIT_S": "3",
           "TANDEM_KNOWLEDGE_PROBE_WAIT_S": "8"}

    async def both(web: str) -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=web, timeout=60, cookies=cookies) as http:
            waiting = asyncio.ensure_future(http.get(f"{A}/knowledge/test/", params={"q": "Where is my parcel?"}))
            # The probe's task is in the broker: the page now waits for its answer.
            while not any(broker.llen(name) for name in priority_lists(probe.PROBE_QUEUE)):
                assert not waiting.done(), waiting.result().status_code
                await asyncio.sleep(0.05)
            other = await http.get(f"{A}/knowledge/")
            return await waiting, other

    try:
        with extra_web(platform, **env) as web:
            probed, other = asyncio.run(both(web))
    finally:
        broker.flushdb()
    assert other.status_code == 200, other.status_code  # not a 503 after the pool's 3 s wait
    assert probed.status_code == 503 and "did not answer within 8" in probed.text
