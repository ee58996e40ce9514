"""The CPU tier grounds the prompt: with the tenant's retrieval settings in the spec, its
database reads are retrieval's (scoped to the tenant), the passages go into the
prompt after the system prompt, and the sources travel on in the spec; with knowledge
off it reads nothing. The prefill queue belongs to a pool no worker serves."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inference.pipeline.cpu import preprocess_request
from inference.pipeline.submit import request_stored
from inference.text.prompting import KNOWLEDGE_INSTRUCTION
from inference.text.tokenizer import get_tokenizer
from inference.wire.connections import get_redis
from inference.wire.spec import RequestSpec, Sampling, load, save
from knowledge.selectors import retrieval_spec
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

from .conftest import import_help_centre

pytestmark = pytest.mark.django_db


def is_read(sql: str) -> bool:
    # A read may open with its common table expressions (PostgreSQL's retrieval does).
    return sql.lstrip().upper().startswith(("SELECT", "WITH"))


@pytest.fixture
def pool():
    slug = f"knowledge-cpu-{uuid.uuid4().hex[:8]}"
    yield slug
    client = get_redis()
    for key in client.scan_iter(match=f"prefill.{slug}*"):
        client.delete(key)


def submit(pool, tenant, text: str, retrieval: dict) -> RequestSpec:
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = RequestSpec(
        request_id=str(reply.pk), tenant_id=tenant.pk, api_key_id=None, conversation_id=str(conversation.pk),
        channel="widget", sampling=Sampling(max_tokens=16), prefill_pool=pool, decode_pool=pool,
        system_prompt="You are Demo Co.'s assistant.", max_prompt_tokens=1536,
        prompt_messages=[{"role": "user", "content": text}], retrieval=retrieval,
    )
    save(get_redis(), spec)
    request_stored(request_id=spec.request_id, committed=True)
    return spec


def test_the_cpu_tier_retrieves_with_one_query_and_grounds_the_prompt_with_its_sources(pool):
    tenant = make_tenant().tenant
    articles = import_help_centre(tenant)
    other = make_tenant().tenant
    import_help_centre(other)  # the same words, another tenant
    spec = submit(pool, tenant, "I was charged twice for my order", retrieval_spec(tenant))
    assert spec.retrieval == {"k": 3, "min_score": 0.2, "language": "english", "mode": "hybrid"}

    with CaptureQueriesContext(connection) as queries:
        assert preprocess_request(spec.request_id) == f"prefill.{pool}"
    # The full-text query, the tenant's vector revision (one row), and on the tenant's
    # first question its vectors; each scoped to the tenant.
    selects = [q["sql"] for q in queries.captured_queries if is_read(q["sql"])]
    assert 1 <= len(selects) <= 4 and any("knowledge_chunk" in sql for sql in selects)
    assert all("tenant_id" in sql for sql in selects)

    stored = load(get_redis(), spec.request_id)
    charged = articles["orders/charged-twice.md"]
    assert stored.sources[0] == {"article_id": str(charged.pk), "title": charged.title, "url": charged.url,
                                 "section": stored.sources[0]["section"],
                                 "score": stored.sources[0]["score"]}
    mine = {str(a.pk) for a in articles.values()}
    assert 1 <= len(stored.sources) <= 3 and all(s["article_id"] in mine for s in stored.sources)
    prompt = get_tokenizer().decode(stored.prompt_token_ids)
    assert prompt.index("Demo Co.'s assistant") < prompt.index(KNOWLEDGE_INSTRUCTION) < prompt.index(
        "authorisation hold") < prompt.index("<|im_start|>user\nI was charged twice for my order")


def test_with_knowledge_off_the_cpu_tier_reads_no_database_and_cites_nothing(pool):
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    spec = submit(pool, tenant, "I was charged twice for my order", retrieval={})
    with CaptureQueriesContext(connection) as queries:
        assert preprocess_request(spec.request_id) == f"prefill.{pool}"
    assert not [q for q in queries.captured_queries if is_read(q["sql"])]
    stored = load(get_redis(), spec.request_id)
    assert stored.sources == []
    assert KNOWLEDGE_INSTRUCTION not in get_tokenizer().decode(stored.prompt_token_ids)


def test_a_question_nothing_matches_gets_the_instruction_and_no_sources(pool):
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    spec = submit(pool, tenant, "What is the capital of Mongolia?", retrieval_spec(tenant))
    preprocess_request(spec.request_id)
    stored = load(get_redis(), spec.request_id)
    assert stored.sources == []
    assert KNOWLEDGE_INSTRUCTION in get_tokenizer().decode(stored.prompt_token_ids)


def test_a_tenant_gets_retrieval_in_its_spec_from_its_first_indexed_article_until_it_turns_it_off():
    from knowledge import services

    tenant = make_tenant().tenant
    assert retrieval_spec(tenant) == {}  # no knowledge yet: prompts as before, no read in the CPU tier
    article = services.article_create(tenant=tenant, title="Hours", body="Open at nine.")
    services.article_index(article_id=article.pk)
    fresh = type(tenant).objects.get(pk=tenant.pk)
    assert retrieval_spec(fresh) == {"k": 3, "min_score": 0.2, "language": "english", "mode": "hybrid"}
    services.settings_update(tenant=fresh, enabled=False)
    assert retrieval_spec(type(tenant).objects.get(pk=tenant.pk)) == {}


def test_saving_the_settings_counts_as_a_tenant_change_for_open_websockets(django_capture_on_commit_callbacks):
    from knowledge import services
    from tenants import changes

    tenant = make_tenant().tenant
    before = changes.version()
    with django_capture_on_commit_callbacks(execute=True):
        services.settings_update(tenant=tenant, top_k=5)
    assert changes.version() > before
