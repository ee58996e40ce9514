"""The chat pipeline end to end: websocket → CPU tier → prefill tier → decode tier →
streamed tokens, across real processes."""

from __future__ import annotations

import json
import threading

import pytest
import redis as redis_lib
import websockets

from inference.text.prompting import build_prompt
from inference.wire import streams
from inference.wire.spec import load
from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import visitor_token_for
from tenants.models import ComputePool, Tenant, UsageRecord
from tenants.services import api_key_revoke
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket, tokens_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_reply_is_streamed_token_by_token_and_equals_hugging_face_greedy(platform, reference_model):
    import torch

    tenant = make_tenant(max_output_tokens=12)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        message_id, frames = chat.ask("What is the capital of France?")

    kinds = [f["type"] for f in frames]
    assert kinds[0] == "conversation" and kinds[1] == "start"
    assert kinds.count("end") == 1 and kinds[-1] == "end"
    tokens = tokens_of(frames, message_id)
    assert [t["index"] for t in tokens] == list(range(len(tokens)))

    tok, model = reference_model
    prompt = build_prompt(tok, system_prompt=tenant.tenant.system_prompt,
                          history=[{"role": "user", "content": "What is the capital of France?"}],
                          max_prompt_tokens=1536)
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt.token_ids]), max_new_tokens=12, do_sample=False,
                             attention_mask=torch.ones(1, prompt.n_tokens, dtype=torch.long))
    expected = [t for t in out[0, prompt.n_tokens:].tolist()]
    if expected and expected[-1] == tok.eos_token_id:
        expected = expected[:-1]  # the stop token ends the reply without being emitted
    records = streams.read_all(redis_lib.Redis.from_url(platform.env["REDIS_URL"]), message_id)
    recorded = [r["token_id"] for r in records if r["type"] == "token"]
    assert recorded == expected
    timings = records[-1]["timings"]  # the prefill engine's share is part of the time to first token
    assert 0 < timings["prefill_engine_ms"] < timings["ttft_ms"] < timings["duration_ms"]
    # The wait before the prefill forward (CPU tier, queues, batch) is part of it too.
    assert 0 < timings["queue_ms"] < timings["ttft_ms"]
    text = "".join(t["text"] for t in tokens)
    assert text == tok.decode(expected, skip_special_tokens=True)

    end = frames[-1]
    assert end["usage"]["completion_tokens"] == len(expected)
    assert end["usage"]["prompt_tokens"] == prompt.n_tokens
    msg = Message.objects.get(pk=message_id)
    assert msg.status == "done" and msg.content == text
    usage = UsageRecord.objects.get(message_id=message_id)
    assert usage.completion_tokens == len(expected) and usage.decode_worker.startswith("decode.shared@")
    assert usage.prefill_worker.startswith("prefill.shared@")
    assert usage.queue_ms >= timings["queue_ms"]  # and any wait for a decode slot


def test_a_follow_up_is_answered_from_the_conversation_so_far_with_the_current_system_prompt(platform,
                                                                                             model_dir):
    from django.conf import settings
    from transformers import AutoTokenizer

    tenant = make_tenant(max_output_tokens=6)
    r = redis_lib.Redis.from_url(platform.env["REDIS_URL"])
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        first_id, frames = chat.ask("My order 1234 has not arrived.")
        conversation = next(f["id"] for f in frames if f["type"] == "conversation")
        # An operator edits the system prompt while the socket is open: the save is
        # counted (tenants.changes), so the next message uses it.
        row = Tenant.objects.get(pk=tenant.tenant.pk)
        row.system_prompt = "You are Acme's support agent."
        row.save(update_fields=["system_prompt"])
        second_id, frames = chat.ask("Can you check again?", conversation=conversation)
    assert frames[-1]["type"] == "end"

    first_reply = Message.objects.get(pk=first_id).content
    history = [{"role": "user", "content": "My order 1234 has not arrived."},
               {"role": "assistant", "content": first_reply},
               {"role": "user", "content": "Can you check again?"}]
    expected = build_prompt(AutoTokenizer.from_pretrained(model_dir), system_prompt="You are Acme's support agent.",
                            history=[m for m in history if m["content"]],
                            max_prompt_tokens=min(tenant.tenant.quota.max_prompt_tokens,
                                                  settings.TANDEM_MAX_CONTEXT - 6))
    spec = load(r, second_id)
    assert spec.prompt_token_ids == expected.token_ids
    assert spec.prompt_messages == []  # the model tiers carry only the ids


def test_two_tenants_chatting_at_once_never_see_each_others_tokens(platform):
    a, b = make_tenant(max_output_tokens=8), make_tenant(max_output_tokens=8)
    results = {}

    def chat_as(name, tenant, text):
        with chat_socket(platform, tenant.widget_key.plaintext) as chat:
            results[name] = chat.ask(text)

    threads = [threading.Thread(target=chat_as, args=("a", a, "Hello, I need help with my order.")),
               threading.Thread(target=chat_as, args=("b", b, "Tell me about your pricing."))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)

    (a_id, a_frames), (b_id, b_frames) = results["a"], results["b"]
    assert {f.get("message") for f in a_frames if "message" in f} == {a_id}
    assert {f.get("message") for f in b_frames if "message" in f} == {b_id}
    a_conv = next(f["id"] for f in a_frames if f["type"] == "conversation")
    assert Conversation.objects.get(pk=a_conv).tenant == a.tenant
    # b cannot continue a's conversation nor resume a's reply
    with chat_socket(platform, b.widget_key.plaintext) as chat:
        chat.send({"type": "message", "text": "hi", "conversation": a_conv})
        assert chat.recv()["code"] == "conversation_not_found"
        chat.send({"type": "resume", "message": a_id, "after": -1})
        assert chat.recv()["code"] == "message_not_found"


def test_cancel_mid_stream_stops_tokens_and_frees_the_decode_slot(platform):
    from tests.platform_fixtures import DECODE_SLOTS

    tenant = make_tenant(max_output_tokens=400)
    long_prompt = "Write a very long story about a dragon, with many chapters."
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        # Fill every decode slot with long replies, then queue one more.
        ids = []
        for _ in range(DECODE_SLOTS):
            chat.send({"type": "message", "text": long_prompt, "conversation": None})
            ids.append(chat.recv_until(lambda f: f["type"] == "start")[-1]["message"])
        for mid in ids:
            chat.recv_until(lambda f, m=mid: f["type"] == "token" and f["message"] == m and f["index"] >= 2)
        chat.send({"type": "message", "text": "Hi!", "conversation": None})
        waiting = chat.recv_until(lambda f: f["type"] == "start")[-1]["message"]

        chat.send({"type": "cancel", "message": ids[0]})
        frames = chat.recv_until(lambda f: f.get("message") == waiting and f["type"] in ("end", "error"),
                                 timeout=180)
    cancelled_end = [f for f in frames if f.get("message") == ids[0] and f["type"] == "end"]
    assert cancelled_end and cancelled_end[0]["finish_reason"] == "cancelled"
    after_end = frames[frames.index(cancelled_end[0]) + 1:]
    assert not [f for f in after_end if f.get("message") == ids[0]]
    assert frames[-1]["type"] == "end"  # the queued request got the freed slot and finished
    assert Message.objects.get(pk=ids[0]).status == "cancelled"
    assert Message.objects.get(pk=ids[0]).completion_tokens < 400
    # the other long reply is still running: cancel it so it does not hold the slot
    with chat_socket(platform, tenant.widget_key.plaintext, visitor=chat.visitor_token) as chat:
        chat.send({"type": "cancel", "message": ids[1]})
        chat.send({"type": "resume", "message": ids[1], "after": 10_000})
        chat.recv_until(lambda f: f["type"] == "end" and f["message"] == ids[1])


def test_reconnect_and_resume_delivers_every_later_token_exactly_once(platform):
    tenant = make_tenant(max_output_tokens=24)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        chat.send({"type": "message", "text": "Tell me a short story.", "conversation": None})
        message_id = chat.recv_until(lambda f: f["type"] == "start")[-1]["message"]
        first = chat.recv_until(lambda f: f["type"] == "token" and f["index"] == 3)
    seen = tokens_of(first, message_id)
    k = seen[-1]["index"]
    with chat_socket(platform, tenant.widget_key.plaintext, visitor=chat.visitor_token) as chat:
        chat.send({"type": "resume", "message": message_id, "after": k})
        rest = chat.recv_until(lambda f: f["type"] == "end")
    later = tokens_of(rest, message_id)
    indices = [t["index"] for t in later]
    assert indices == list(range(k + 1, k + 1 + len(indices)))
    full = "".join(t["text"] for t in seen + later)
    assert full == Message.objects.get(pk=message_id).content


def test_malformed_frames_get_error_frames_and_the_socket_keeps_working(platform):
    tenant = make_tenant(max_output_tokens=4)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        cases = [("not json", "invalid_json"), ("[1, 2]", "invalid_frame"),
                 (json.dumps({"type": "dance"}), "unknown_type"),
                 (json.dumps({"type": []}), "unknown_type"),
                 ("[" * 20000 + "]" * 20000, "invalid_json"),  # deeper than the parser goes
                 (json.dumps({"type": "message", "text": "   "}), "empty_message"),
                 (json.dumps({"type": "message", "text": 42}), "invalid_message"),
                 (json.dumps({"type": "message", "text": "x" * 20000}), "message_too_long"),
                 (json.dumps({"type": "resume", "message": "nope", "after": "x"}), "invalid_frame"),
                 (json.dumps({"type": "cancel", "message": "not-a-uuid"}), "message_not_found")]
        for raw, code in cases:
            chat.send(raw)
            frame = chat.recv()
            assert frame["type"] == "error" and frame["code"] == code, (raw[:40], frame)
        _, frames = chat.ask("Still there?")
        assert frames[-1]["type"] == "end"


def test_an_origin_not_on_the_list_and_a_revoked_key_are_refused(platform):
    tenant = make_tenant()
    with chat_socket(platform, tenant.widget_key.plaintext, origin="https://evil.example") as chat:
        assert chat.recv()["code"] == "origin_not_allowed"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            chat.recv(timeout=10)
        assert closed.value.rcvd.code == 4403
    api_key_revoke(api_key=tenant.widget_key.api_key)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        assert chat.recv()["code"] == "revoked_api_key"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            chat.recv(timeout=10)
        assert closed.value.rcvd.code == 4401


def test_a_key_revoked_while_its_socket_is_open_refuses_the_next_message(platform):
    tenant = make_tenant(max_output_tokens=3)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        _, frames = chat.ask("Hello!")
        assert frames[-1]["type"] == "end"
        conversation = next(f["id"] for f in frames if f["type"] == "conversation")
        stored = Message.objects.filter(conversation_id=conversation).count()
        api_key_revoke(api_key=tenant.widget_key.api_key)
        chat.send({"type": "message", "text": "Hello again!", "conversation": conversation})
        assert chat.recv()["code"] == "revoked_api_key"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            chat.recv(timeout=10)
        assert closed.value.rcvd.code == 4401
    assert Message.objects.filter(conversation_id=conversation).count() == stored  # nothing stored


def test_a_pool_with_no_live_worker_reports_queued_then_fails_after_a_bounded_wait(platform):
    tenant = make_tenant()
    ghost = ComputePool.objects.create(slug="ghost", role="prefill")
    tenant.tenant.allocation.prefill_pool = ghost
    tenant.tenant.allocation.save()
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        message_id, frames = chat.ask("Anyone there?")
    status = [f for f in frames if f["type"] == "status" and f["state"] == "queued"]
    assert status, frames
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "no_worker"
    assert Message.objects.get(pk=message_id).status == "failed"


def test_a_tenant_over_its_request_rate_gets_a_rate_limited_frame_and_loses_nothing(platform):
    tenant = make_tenant(requests_per_minute=1, max_output_tokens=4)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        first_id, frames = chat.ask("First question")
        conversation = next(f["id"] for f in frames if f["type"] == "conversation")
        chat.send({"type": "message", "text": "Second question", "conversation": conversation})
        refused = chat.recv()
    assert refused["type"] == "error" and refused["code"] == "rate_limited"
    assert refused["reason"] == "requests_per_minute"
    assert 0 < refused["retry_after"] <= 60
    # the refused message was not stored; the accepted one is complete
    contents = list(Message.objects.filter(conversation_id=conversation, role="user").values_list("content", flat=True))
    assert contents == ["First question"]
    assert Message.objects.get(pk=first_id).status == "done"


def test_a_reply_that_goes_silent_after_its_first_tokens_ends_in_a_timeout_error(platform):
    # The worker generating it died after token 0: nothing more comes. The platform's
    # TANDEM_STALL_TIMEOUT_S is 20 s.
    tenant = make_tenant()
    conversation = Conversation.objects.create(tenant=tenant.tenant, channel="widget", visitor_id="v-silent")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="decoding")
    r = redis_lib.Redis.from_url(platform.env["REDIS_URL"])
    streams.publish(r, str(reply.pk), [streams.token_record(0, "Hello", 1)])
    token = visitor_token_for(tenant=tenant.tenant, visitor_id="v-silent")
    with chat_socket(platform, tenant.widget_key.plaintext, visitor=token) as chat:
        chat.send({"type": "resume", "message": str(reply.pk), "after": -1})
        frames = chat.recv_until(lambda f: f["type"] in ("end", "error"), timeout=60)
    assert [f["type"] for f in frames] == ["token", "error"]
    assert frames[-1]["code"] == "timeout" and frames[-1]["message"] == str(reply.pk)
    reply.refresh_from_db()
    assert reply.status == "failed"
    assert r.exists(f"tandem:cancel:{reply.pk}")  # a worker that still holds it drops it


def test_resuming_a_reply_whose_stream_expired_is_answered_at_once(platform):
    tenant = make_tenant()
    conversation = Conversation.objects.create(tenant=tenant.tenant, channel="widget", visitor_id="v-old")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="done",
                                   content="Long answered.")
    token = visitor_token_for(tenant=tenant.tenant, visitor_id="v-old")
    with chat_socket(platform, tenant.widget_key.plaintext, visitor=token) as chat:
        chat.send({"type": "resume", "message": str(reply.pk), "after": 3})
        frame = chat.recv(timeout=5)  # well under the platform's 8 s queue timeout
        assert frame == {"type": "error", "code": "stream_expired", "message": str(reply.pk),
                         "detail": frame["detail"]}
        _, frames = chat.ask("Still there?")  # the socket keeps working
        assert frames[-1]["type"] == "end"


def test_a_key_revoked_while_its_socket_is_open_refuses_a_resume_too(platform):
    tenant = make_tenant(max_output_tokens=3)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        message_id, frames = chat.ask("Hello!")
        assert frames[-1]["type"] == "end"
        api_key_revoke(api_key=tenant.widget_key.api_key)
        chat.send({"type": "resume", "message": message_id, "after": -1})
        assert chat.recv()["code"] == "revoked_api_key"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            chat.recv(timeout=10)
        assert closed.value.rcvd.code == 4401
