"""Grounded replies on the running platform (daphne, CPU, prefill and decode workers, the
real model): the sources reach the websocket `end` frame, the REST completion (read
through the official client's `model_extra`), a stream's final chunk, and the transcript;
and an article created over REST is indexed by the CPU worker's Celery task."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from knowledge import services
from knowledge.models import Article
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket

from .conftest import import_help_centre

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "I was charged twice for my order"


@pytest.fixture
def grounded():
    created = make_tenant(max_output_tokens=8)
    articles = import_help_centre(created.tenant)
    return created, articles["orders/charged-twice.md"]


def test_the_websocket_end_frame_carries_the_sources(platform, grounded):
    created, charged = grounded
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        _, frames = chat.ask(QUESTION)
    [end] = [f for f in frames if f["type"] == "end"]
    assert end["sources"][0] == {"article_id": str(charged.pk), "title": charged.title, "url": charged.url,
                                 "section": end["sources"][0]["section"],
                                 "score": end["sources"][0]["score"]}
    assert 0 < end["sources"][0]["score"] < 1
    assert len(end["sources"]) <= 3


def test_rest_completions_carry_the_sources_in_model_extra_and_the_transcript_keeps_them(platform, grounded):
    created, charged = grounded
    client = openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=created.secret_key.plaintext,
                           max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    raw = client.chat.completions.with_raw_response.create(
        model=model, max_tokens=8, temperature=0, messages=[{"role": "user", "content": QUESTION}])
    completion = raw.parse()
    assert completion.choices[0].message.content is not None
    sources = completion.model_extra["sources"]
    assert sources[0]["article_id"] == str(charged.pk) and sources[0]["url"] == charged.url

    chunks = list(client.chat.completions.create(model=model, max_tokens=8, temperature=0, stream=True,
                                                 messages=[{"role": "user", "content": QUESTION}]))
    assert chunks[-1].model_extra["sources"][0]["article_id"] == str(charged.pk)
    assert all("sources" not in (c.model_extra or {}) for c in chunks[:-1])

    conversation = raw.headers["x-tandem-conversation"]
    transcript = httpx.get(f"{platform.base_url}/api/v1/conversations/{conversation}/messages/",
                           headers={"Authorization": f"Bearer {created.secret_key.plaintext}"}, timeout=30).json()
    by_role = {m["role"]: m for m in transcript["data"]}
    assert by_role["assistant"]["sources"] == sources
    assert by_role["user"]["sources"] == []


def test_a_tenant_with_knowledge_off_gets_no_sources(platform, grounded):
    created, _ = grounded
    services.settings_update(tenant=created.tenant, enabled=False)
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        _, frames = chat.ask(QUESTION)
    [end] = [f for f in frames if f["type"] == "end"]
    assert end["sources"] == []


def test_an_article_created_over_rest_is_indexed_by_the_cpu_workers_task(platform):
    created = make_tenant()
    resp = httpx.post(f"{platform.base_url}/api/v1/knowledge/articles/", timeout=30,
                      headers={"Authorization": f"Bearer {created.secret_key.plaintext}"},
                      json={"title": "Zeppelin rides", "body": "Our zeppelin rides leave at dawn."})
    assert resp.status_code == 201 and resp.json()["status"] == "pending"
    deadline = time.monotonic() + 60
    article = Article.objects.get(pk=resp.json()["id"])
    while article.status == Article.Status.PENDING and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the row the worker writes, as a client polls the API
        article.refresh_from_db()
    assert article.status == Article.Status.INDEXED and article.chunk_count == 1
