"""Actions in the REST API's conversations, on the running platform (daphne, CPU,
prefill and decode workers on the real model) with an actions worker and a tenant's
endpoint on 127.0.0.1: a conversation message runs an action and its answer continues
with the result; one needing approval waits in the inbox until a person approves it;
`"actions": false` (and /v1/chat/completions) offers none. Calls are forced by trigger
phrases, as in test_live.py."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from inference.wire import keys
from inference.wire.connections import new_redis
from tandem.actions.models import ActionCall
from tandem.chat.models import Message
from tests.actions.live import action, refund_awaiting_approval
from tests.factories import make_tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_model]


@pytest.fixture
def http(platform):
    with httpx.Client(base_url=platform.base_url, timeout=180) as client:
        yield client


def auth(created) -> dict:
    return {"Authorization": f"Bearer {created.secret_key.plaintext}"}


def conversation(http, created, visitor_id: str = "customer-42") -> str:
    made = http.post("/api/v1/conversations/", headers=auth(created), json={"visitor_id": visitor_id})
    assert made.status_code == 201, made.text
    return made.json()["id"]


def transcript(http, created, cid: str) -> list[dict]:
    got = http.get(f"/api/v1/conversations/{cid}/messages/", headers=auth(created))
    assert got.status_code == 200, got.text
    return got.json()["data"]


def wait_for_event(conversation_id: str, matches, timeout_s: float = 120) -> dict:
    """The first of the conversation's live events (tandem.handoff.events, from its start)
    that `matches`, read with blocking XREADs."""
    client, key, after = new_redis(), keys.conversation_events(conversation_id), "0-0"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for _, entries in client.xread({key: after}, block=1000, count=100) or []:
            for entry_id, fields in entries:
                after = entry_id
                event = json.loads(fields[b"e"])
                if matches(event):
                    return event
    raise AssertionError(f"no matching event in {timeout_s} s")


def sse_chunks(text: str) -> list:
    lines = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_a_rest_message_runs_an_action_and_the_answer_continues_with_its_result(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, http):
    created = make_tenant(max_output_tokens=48)
    # Verified users only (the default): a REST conversation is the tenant's server's.
    action(created.tenant, endpoint)
    cid = conversation(http, created)
    answer = http.post(f"/api/v1/conversations/{cid}/messages/", headers=auth(created),
                       json={"content": "Where is my order A-17?"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    [choice] = body["choices"]
    assert choice["finish_reason"] in ("stop", "length") and choice["message"]["content"]
    assert "<tool_call>" not in choice["message"]["content"]
    [request] = endpoint.requests
    assert request.path.startswith("/orders/")
    assert request.headers["tandem-user"] == "customer-42" and request.headers["tandem-user-verified"] == "true"

    entries = transcript(http, created, cid)
    assert [m["role"] for m in entries] == ["user", "assistant", "tool", "assistant"]
    user, call, result, reply = entries
    assert call["finish_reason"] == "tool_calls" and call["content"].startswith("<tool_call>")
    [tool_call] = call["tool_calls"]
    assert tool_call["function"]["name"] == "order_status"
    assert json.loads(tool_call["function"]["arguments"]) == ActionCall.objects.get().arguments
    assert call["action"]["status"] == "succeeded" and call["action"]["name"] == "order_status"
    assert result["tool_call_id"] == tool_call["id"] and result["name"] == "order_status"
    assert "shipped" in result["content"]
    assert reply["content"] == choice["message"]["content"] and reply["status"] == "done"
    assert answer.headers["x-request-id"] == call["id"]  # the turn's first pass names the request
    # The answer's usage counts both passes: the call's and the continuation's.
    assert body["usage"]["completion_tokens"] == call["completion_tokens"] + reply["completion_tokens"]
    assert body["usage"]["prompt_tokens"] == call["prompt_tokens"] + reply["prompt_tokens"]


def test_a_rest_action_needing_approval_waits_in_the_inbox_and_approve_continues_the_stream(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, http, client):
    created = refund_awaiting_approval(endpoint, client)
    tenant = created.tenant
    cid = conversation(http, created)
    streamed: dict = {}

    def post():  # the answer waits for the approval: on a thread of its own
        with httpx.Client(base_url=platform.base_url, timeout=180) as own:
            got = own.post(f"/api/v1/conversations/{cid}/messages/", headers=auth(created),
                           json={"content": "Please refund order A-17", "stream": True})
            streamed.update(status=got.status_code, text=got.text)

    poster = threading.Thread(target=post)
    poster.start()
    wait_for_event(cid, lambda e: e.get("type") == "action" and e.get("state") == "awaiting_approval")
    call = ActionCall.objects.get(conversation_id=cid)
    assert call.status == "awaiting_approval" and endpoint.requests == []  # nothing runs before a person says so
    assert poster.is_alive() and not streamed  # the answer is still waiting
    waiting = [m["action"]["status"] for m in transcript(http, created, cid) if "action" in m]
    assert waiting == ["awaiting_approval"]
    inbox = client.get(f"/console/t/{tenant.slug}/approvals/", {"conversation": cid})
    assert b"refund_order" in inbox.content and b"Approve" in inbox.content
    assert client.post(f"/console/t/{tenant.slug}/approvals/{call.pk}/approve/").status_code == 302
    poster.join(timeout=180)
    assert not poster.is_alive()

    assert streamed["status"] == 200, streamed["text"]
    chunks = sse_chunks(streamed["text"])
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert text and "<tool_call>" not in text
    assert finishes in (["stop"], ["length"])  # one end: the continued answer's
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    assert len(endpoint.requests) == 1
    entries = transcript(http, created, cid)
    assert [m["role"] for m in entries] == ["user", "assistant", "tool", "assistant"]
    assert entries[1]["action"]["status"] == "succeeded" and "shipped" in entries[2]["content"]
    assert entries[3]["content"] == text
    assert ActionCall.objects.get(pk=call.pk).decided_by is not None


def test_actions_false_offers_none_and_chat_completions_is_never_offered_them(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, http):
    created = make_tenant(max_output_tokens=16)
    action(created.tenant, endpoint, who="anyone")
    cid = conversation(http, created)
    for wrong in ("no", 0, None, "false"):
        refused = http.post(f"/api/v1/conversations/{cid}/messages/", headers=auth(created),
                            json={"content": "Where is my order A-17?", "actions": wrong})
        assert refused.status_code == 400, (wrong, refused.text)
        assert refused.json()["error"]["param"] == "actions"
    answer = http.post(f"/api/v1/conversations/{cid}/messages/", headers=auth(created),
                       json={"content": "Where is my order A-17?", "actions": False})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["finish_reason"] in ("stop", "length")
    assert [m["role"] for m in transcript(http, created, cid)] == ["user", "assistant"]

    model = http.get("/v1/models", headers=auth(created)).json()["data"][0]["id"]
    completion = http.post("/v1/chat/completions", headers=auth(created), json={
        "model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "Where is my order A-17?"}]})
    assert completion.status_code == 200, completion.text
    assert completion.json()["choices"][0]["finish_reason"] in ("stop", "length")
    assert not Message.objects.filter(conversation__tenant=created.tenant, finish_reason="tool_calls").exists()
    assert not ActionCall.objects.filter(tenant=created.tenant).exists() and endpoint.requests == []
