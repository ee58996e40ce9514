"""The edges of a request's life that a dead or slow worker creates: a reply already
failed is never finished afterwards, and a task redelivered after its worker died never
shows the reader a token twice."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from inference.pipeline.contracts import ReplyOutcome
from inference.pipeline.outcomes import request_fail, request_finish
from inference.wire import keys, streams
from inference.wire.connections import get_redis
from inference.wire.publisher import StreamPublisher
from inference.wire.spec import RequestSpec, Sampling
from tandem.chat.models import Conversation, Message
from tenants.models import UsageRecord
from tests.factories import make_tenant


def _finish(spec: RequestSpec) -> bool:
    return request_finish(spec=spec, outcome=ReplyOutcome(
        text="Late reply.", finish_reason="cancelled", prompt_tokens=40, cached_tokens=0, completion_tokens=0,
        ttft_ms=None, duration_ms=1.0, prefill_worker="prefill.test@host", decode_worker=""))


@pytest.mark.django_db
def test_a_reply_failed_while_it_waited_is_not_finished_by_a_worker_that_reaches_it_later():
    # The web tier gave up on a request that waited too long in the prefill queue (error
    # record sent, quota released); then a prefill worker picks it up, sees it cancelled
    # and ends it. The client was told it failed: no end record, no usage billed.
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = RequestSpec(request_id=str(reply.pk), tenant_id=tenant.pk, api_key_id=None,
                       conversation_id=str(conversation.pk), channel="widget", sampling=Sampling(max_tokens=8),
                       prefill_pool="shared", decode_pool="shared")

    assert request_fail(request_id=spec.request_id, code="timeout", message="Nobody came.") is True
    assert _finish(spec) is False
    assert request_fail(request_id=spec.request_id, code="timeout", message="Again.") is False

    reply.refresh_from_db()
    assert reply.status == "failed" and reply.error == "timeout: Nobody came." and reply.content == ""
    assert not UsageRecord.objects.filter(message_id=reply.pk).exists()
    assert [r["type"] for r in streams.read_all(get_redis(), spec.request_id)] == ["error"]


def test_a_token_index_written_twice_is_read_once():
    request_id = str(uuid.uuid4())
    client = get_redis()
    first, again = streams.token_record(1, " world", 2), streams.token_record(1, " there", 3)
    streams.publish(client, request_id, [
        streams.token_record(0, "Hello", 1), first,
        again,  # a decode task redelivered after its worker died starts over at index 1
        streams.token_record(2, "!", 4), streams.end_record("stop", {"completion_tokens": 3}),
    ])

    async def read(after: int) -> list[dict]:
        return [r async for batch in streams.tail(request_id, after_index=after) for r in batch]

    try:
        records = asyncio.run(read(-1))
        assert [(r["type"], r.get("index"), r.get("text")) for r in records] == [
            ("token", 0, "Hello"), ("token", 1, " world"), ("token", 2, "!"), ("end", None, None)]
        assert [r.get("index") for r in asyncio.run(read(0))] == [1, 2, None]  # a resume after 0
    finally:
        client.delete(keys.stream(request_id))


def test_a_batch_sent_while_redis_is_briefly_down_arrives_once_it_is_back(tmp_path):
    import threading

    import redis as redis_lib

    from devstack import embedded_redis
    from devstack.processes import free_port

    port = free_port()
    client = redis_lib.Redis.from_url(f"redis://127.0.0.1:{port}/0")
    publisher = StreamPublisher(client)
    request_id, sent = str(uuid.uuid4()), threading.Event()
    # Nothing listens on the port yet: the publisher's first send fails at once.
    publisher.put(request_id, streams.end_record("stop", {"completion_tokens": 1}), done=sent)
    server = embedded_redis.start(port=port, workdir=tmp_path)  # tens of ms to come up
    try:
        assert sent.wait(10)
        assert [r["type"] for r in streams.read_all(client, request_id)] == ["end"]
    finally:
        server.terminate()
        server.wait(timeout=10)
