"""The CPU tier builds the prompt from the request's spec alone (no database reads on the
way to the first token), sends the request on once and only after the web tier's rows
are committed (whichever of the two finishes second sends it), and fails bad input.

The prefill queue here belongs to a pool no worker serves, so whatever is enqueued stays
there to be counted (and is deleted afterwards)."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inference.pipeline.cpu import preprocess_request
from inference.pipeline.submit import request_stored
from inference.text.prompting import build_prompt
from inference.text.tokenizer import get_tokenizer
from inference.wire import broker, keys, streams
from inference.wire.connections import get_redis
from inference.wire.spec import RequestSpec, Sampling, load, save
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

SYSTEM = "You are the support assistant of Acme."


@pytest.fixture
def pool():
    slug = f"cpu-tier-test-{uuid.uuid4().hex[:8]}"
    yield slug
    client = get_redis()
    for key in client.scan_iter(match=f"prefill.{slug}*"):
        client.delete(key)


def queued(pool: str) -> int:
    """Tasks waiting on the pool's prefill queue, across Celery's priority lists."""
    client = get_redis()
    return sum(client.llen(key) for key in client.scan_iter(match=f"prefill.{pool}*"))


def make_spec(pool: str, messages: list[dict], *, tenant_id: int = 1, request_id: str | None = None,
              max_prompt_tokens: int = 1024, max_tokens: int = 16, stored: bool = True) -> RequestSpec:
    spec = RequestSpec(
        request_id=request_id or str(uuid.uuid4()), tenant_id=tenant_id, api_key_id=None,
        conversation_id=str(uuid.uuid4()), channel="widget", sampling=Sampling(max_tokens=max_tokens),
        prefill_pool=pool, decode_pool=pool, system_prompt=SYSTEM, max_prompt_tokens=max_prompt_tokens,
        prompt_messages=messages,
    )
    save(get_redis(), spec)
    if stored:
        request_stored(request_id=spec.request_id, committed=True)  # as the web tier does after its COMMIT
    return spec


@pytest.mark.django_db
def test_a_follow_up_is_built_from_the_spec_alone_and_sent_on_to_its_prefill_pool(pool):
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = make_spec(pool, [
        {"role": "user", "content": "My parcel is late."},
        {"role": "system", "content": "Answer in one sentence."},  # an integrator's own instruction
        {"role": "assistant", "content": "Sorry to hear that! What is the order number?"},
        {"role": "assistant", "content": ""},  # a reply with no text is left out
        {"role": "user", "content": "  It is 1234.\x07 "},
    ], tenant_id=tenant.pk, request_id=str(reply.pk))

    with CaptureQueriesContext(connection) as queries:
        assert preprocess_request(spec.request_id) == f"prefill.{pool}"

    # No database reads: the one query is the status update, made after the request was
    # sent on (its report completed the hand-off, the web tier having reported first).
    [update] = [q["sql"] for q in queries.captured_queries]
    assert update.startswith('UPDATE "chat_message" SET "status"')
    reply.refresh_from_db()
    assert reply.status == "prefilling"

    expected = build_prompt(get_tokenizer(), system_prompt=f"{SYSTEM}\n\nAnswer in one sentence.", history=[
        {"role": "user", "content": "My parcel is late."},
        {"role": "assistant", "content": "Sorry to hear that! What is the order number?"},
        {"role": "user", "content": "It is 1234."},
    ], max_prompt_tokens=min(1024, settings.TANDEM_MAX_CONTEXT - 16))
    stored = load(get_redis(), spec.request_id)
    assert stored.prompt_token_ids == expected.token_ids
    # A widget prompt is cached per conversation; the tenant's prefix is marked shareable.
    assert stored.cache_salt == f"tenant:{tenant.pk}:conversation:{spec.conversation_id}"
    assert stored.cache_shared_salt == f"tenant:{tenant.pk}"
    assert (stored.system_prompt, stored.prompt_messages) == ("", [])  # later tiers carry only the ids
    [status] = streams.read_all(get_redis(), spec.request_id)
    assert status["type"] == "status" and status["state"] == "prefilling"
    assert queued(pool) == 1


@pytest.mark.django_db
def test_a_status_never_moves_back_and_a_redelivered_task_sends_nothing_twice(pool):
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    # The prefill tier may report "decoding" before the CPU tier reports "prefilling".
    reply = Message.objects.create(conversation=conversation, role="assistant", status="decoding")
    spec = make_spec(pool, [{"role": "user", "content": "Hello"}], tenant_id=tenant.pk, request_id=str(reply.pk))
    assert preprocess_request(spec.request_id) == f"prefill.{pool}"
    assert preprocess_request(spec.request_id) is None
    assert queued(pool) == 1
    reply.refresh_from_db()
    assert reply.status == "decoding"


@pytest.mark.django_db
@pytest.mark.parametrize("messages,limit,code", [
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], 1024, "invalid_message"),
    ([{"role": "user", "content": "\x00\x07"}], 1024, "empty_message"),
    ([{"role": "user", "content": "Please help me with my order. " * 20}], 24, "prompt_too_long"),
])
def test_bad_input_fails_the_request_and_sends_nothing_on(pool, messages, limit, code):
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = make_spec(pool, messages, tenant_id=tenant.pk, request_id=str(reply.pk), max_prompt_tokens=limit)

    assert preprocess_request(spec.request_id) is None

    reply.refresh_from_db()
    assert reply.status == "failed" and reply.error.startswith(f"{code}:")
    [error] = streams.read_all(get_redis(), spec.request_id)
    assert error["type"] == "error" and error["code"] == code
    assert queued(pool) == 0


def test_nothing_is_sent_on_until_the_web_tier_reports_its_commit(pool):
    # The CPU tier finishes first: it stores the prompt and goes on to other work; the web
    # tier's report of its commit completes the pair and sends the request on.
    spec = make_spec(pool, [{"role": "user", "content": "Hello"}], stored=False)
    assert preprocess_request(spec.request_id) == f"prefill.{pool}"
    assert queued(pool) == 0
    assert load(get_redis(), spec.request_id).prompt_token_ids  # ready for the prefill tier
    request_stored(request_id=spec.request_id, committed=True)
    assert queued(pool) == 1


def test_a_rolled_back_submission_is_dropped_without_touching_the_database(pool):
    # No django_db mark: a request_fail (a database write) would fail this test.
    for web_first in (True, False):
        spec = make_spec(pool, [{"role": "user", "content": "Hello"}], stored=False)
        if web_first:
            request_stored(request_id=spec.request_id, committed=False)
        preprocess_request(spec.request_id)
        if not web_first:
            request_stored(request_id=spec.request_id, committed=False)
        assert queued(pool) == 0
        # Nothing reads the request again: its spec, stream and listener lease are gone.
        client = get_redis()
        assert not client.exists(keys.request(spec.request_id), keys.stream(spec.request_id),
                                 keys.listener(spec.request_id))


@pytest.mark.django_db
def test_a_bad_request_is_failed_by_the_web_tiers_report_when_it_commits_last(pool):
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = make_spec(pool, [{"role": "user", "content": "\x00\x07"}], tenant_id=tenant.pk,
                     request_id=str(reply.pk), stored=False)
    assert preprocess_request(spec.request_id) is None
    reply.refresh_from_db()
    assert reply.status == "queued"  # the CPU tier touched no row
    request_stored(request_id=spec.request_id, committed=True)
    reply.refresh_from_db()
    assert reply.status == "failed" and reply.error.startswith("empty_message:")
    [error] = streams.read_all(get_redis(), spec.request_id)
    assert error["type"] == "error" and error["code"] == "empty_message"


def test_a_repeated_report_never_sends_the_request_on_twice(pool):
    from inference.pipeline import rendezvous

    spec = make_spec(pool, [{"role": "user", "content": "Hello"}])  # the web tier reported first
    ready = rendezvous.cpu_ready(task=broker.PREFILL, queue=f"prefill.{pool}", priority=4)
    rendezvous.report(get_redis(), spec.request_id, ready)
    rendezvous.report(get_redis(), spec.request_id, ready)  # a redelivered task's report
    request_stored(request_id=spec.request_id, committed=True)  # and a repeated web report
    assert queued(pool) == 1


def test_a_request_whose_worker_died_before_sending_it_on_is_sent_by_the_redelivered_task(pool):
    import json

    from inference.pipeline import rendezvous

    spec = make_spec(pool, [{"role": "user", "content": "Hello"}])  # the web tier has reported
    # The first run stored the prompt and its report (one transaction), then its worker
    # died before the send: the pair is complete, and nothing was sent.
    client = get_redis()
    spec.prompt_token_ids = [1, 2, 3]
    save(client, spec)
    ready = rendezvous.cpu_ready(task=broker.PREFILL, queue=f"prefill.{pool}", priority=4)
    client.rpush(keys.rendezvous(spec.request_id), json.dumps(ready))
    assert queued(pool) == 0

    assert preprocess_request(spec.request_id) is None  # the redelivered task
    assert queued(pool) == 1
    assert preprocess_request(spec.request_id) is None  # once more: the send is recorded
    assert queued(pool) == 1
