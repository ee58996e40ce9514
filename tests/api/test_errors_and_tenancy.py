"""Raw HTTP against the live server: bad input gets the right status in OpenAI's error
envelope (never a 500), and one tenant's key never reaches another tenant's data."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def http(platform):
    with httpx.Client(base_url=platform.base_url, timeout=120) as client:
        yield client


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=8)


def auth(t):
    return {"Authorization": f"Bearer {t.secret_key.plaintext}"}


def model_id(http, t):
    return http.get("/v1/models", headers=auth(t)).json()["data"][0]["id"]


def assert_error(resp, status, code=None):
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    if code:
        assert body["error"]["code"] == code, body


def test_malformed_json_is_a_400(http, tenant):
    resp = http.post("/v1/chat/completions", content=b"{not json", headers={**auth(tenant), "Content-Type": "application/json"})
    assert_error(resp, 400, "invalid_json")


@pytest.mark.parametrize("body,param", [
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "M", "messages": []}, "messages"),
    ({"model": "M", "messages": "hello"}, "messages"),
    ({"model": "M", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "M", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}, "max_tokens"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "temperature": 9}, "temperature"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "n": 9}, "n"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 21, "logprobs": True},
     "top_logprobs"),
    ({"model": "M", "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}, "top_logprobs"),
    ({"model": "M", "messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
])
def test_wrong_types_and_shapes_are_400_with_the_param_named(http, tenant, body, param):
    if body.get("model") == "M":
        body["model"] = model_id(http, tenant)
    resp = http.post("/v1/chat/completions", json=body, headers=auth(tenant))
    assert_error(resp, 400)
    assert resp.json()["error"]["param"] == param


def test_an_empty_message_is_a_400_and_nothing_is_stored(http, tenant):
    resp = http.post("/v1/chat/completions", headers=auth(tenant),
                     json={"model": model_id(http, tenant), "messages": [{"role": "user", "content": "  \x00 "}]})
    assert_error(resp, 400, "empty_message")
    assert not Message.objects.filter(conversation__tenant=tenant.tenant).exists()


def test_a_huge_body_is_a_413(http, tenant):
    resp = http.post("/v1/chat/completions", headers=auth(tenant),
                     json={"model": "x", "messages": [{"role": "user", "content": "a" * 2_000_000}]})
    assert_error(resp, 413, "request_too_large")


def test_a_missing_or_malformed_authorization_header_is_a_401(http):
    assert_error(http.post("/v1/chat/completions", json={}), 401, "missing_api_key")
    assert_error(http.post("/v1/chat/completions", json={}, headers={"Authorization": "Token abc"}), 401)
    assert_error(http.get("/v1/models"), 401)


def test_max_tokens_above_the_tenants_limit_is_a_400(http, tenant):
    resp = http.post("/v1/chat/completions", headers=auth(tenant), json={
        "model": model_id(http, tenant), "max_tokens": 10_000, "messages": [{"role": "user", "content": "hi"}]})
    assert_error(resp, 400, "max_tokens_too_large")


def test_a_conversation_round_trip_over_the_api(http, tenant):
    conv = http.post("/api/v1/conversations/", headers=auth(tenant), json={"visitor_id": "v-1"})
    assert conv.status_code == 201
    cid = conv.json()["id"]
    reply = http.post(f"/api/v1/conversations/{cid}/messages/", headers=auth(tenant),
                      json={"content": "Hello there", "max_tokens": 6})
    assert reply.status_code == 200, reply.text
    text = reply.json()["choices"][0]["message"]["content"]
    transcript = http.get(f"/api/v1/conversations/{cid}/messages/", headers=auth(tenant)).json()["data"]
    assert [m["role"] for m in transcript] == ["user", "assistant"]
    assert transcript[1]["content"] == text and transcript[1]["status"] == "done"
    listed = http.get("/api/v1/conversations/", headers=auth(tenant)).json()["data"]
    assert [c["id"] for c in listed] == [cid]
    usage = http.get("/api/v1/usage/", headers=auth(tenant)).json()["data"]
    assert usage[0]["requests"] == 1 and usage[0]["completion_tokens"] == transcript[1]["completion_tokens"]


def test_another_tenants_conversation_and_usage_are_invisible(http, tenant):
    other = make_tenant()
    conv = Conversation.objects.create(tenant=other.tenant, channel="api")
    Message.objects.create(conversation=conv, role="user", content="secret")
    for path in (f"/api/v1/conversations/{conv.pk}/", f"/api/v1/conversations/{conv.pk}/messages/"):
        assert_error(http.get(path, headers=auth(tenant)), 404, "conversation_not_found")
    resp = http.post(f"/api/v1/conversations/{conv.pk}/messages/", headers=auth(tenant), json={"content": "hi"})
    assert_error(resp, 404, "conversation_not_found")
    assert http.get("/api/v1/conversations/", headers=auth(tenant)).json()["data"] == []
    assert_error(http.get(f"/api/v1/conversations/{uuid.uuid4()}/", headers=auth(tenant)), 404)
    assert_error(http.get("/api/v1/conversations/not-a-uuid/", headers=auth(tenant)), 404)
    assert http.get("/api/v1/usage/", headers=auth(tenant)).json()["data"] == []
    assert Message.objects.filter(conversation=conv).count() == 1


def test_usage_rejects_bad_dates(http, tenant):
    assert_error(http.get("/api/v1/usage/?from=yesterday", headers=auth(tenant)), 400)
    assert_error(http.get("/api/v1/usage/?from=2026-02-01&to=2026-01-01", headers=auth(tenant)), 400)


def test_a_streaming_client_that_disconnects_cancels_its_request(http, tenant, platform):
    t = make_tenant(max_output_tokens=400)
    with http.stream("POST", "/v1/chat/completions", headers=auth(t), json={
        "model": model_id(http, t), "stream": True, "max_tokens": 400, "temperature": 0,
        "messages": [{"role": "user", "content": "Write a very long story about the sea."}]}) as resp:
        assert resp.status_code == 200
        request_id = resp.headers["x-request-id"]
        for line in resp.iter_lines():
            if line.startswith("data: ") and '"content":"' in line and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                break
    # the server notices the disconnect, cancels, and the decode worker finishes it as cancelled
    from devstack.processes import wait_for

    msg = wait_for(lambda: Message.objects.filter(pk=request_id, status__in=["cancelled", "done"]).first(),
                   timeout=60, what="the request to end")
    assert msg.status == "cancelled"
    assert msg.completion_tokens < 400


@pytest.mark.parametrize("raw", [
    b'{"max_tokens": 1' + b"0" * 5000 + b"}",  # past Python's limit on an integer's digits
    b"[" * 100_000 + b"]" * 100_000,  # nested deeper than the parser goes
])
def test_json_that_parses_badly_is_a_400_not_a_500(http, tenant, raw):
    resp = http.post("/v1/chat/completions", content=raw, headers={**auth(tenant), "Content-Type": "application/json"})
    assert_error(resp, 400, "invalid_json")


def test_fields_the_database_or_the_engine_would_refuse_are_400s_naming_them(http, tenant):
    model = model_id(http, tenant)
    hello = [{"role": "user", "content": "hi"}]
    resp = http.post("/v1/chat/completions", headers=auth(tenant), json={"model": model, "messages": hello, "user": "u" * 200})
    assert_error(resp, 400)
    assert resp.json()["error"]["param"] == "user"
    conv = http.post("/api/v1/conversations/", headers=auth(tenant), json={}).json()["id"]
    resp = http.post(f"/api/v1/conversations/{conv}/messages/", headers=auth(tenant),
                     json={"content": "hi", "temperature": 1, "seed": 2**64})
    assert_error(resp, 400)
    assert resp.json()["error"]["param"] == "seed"
    resp = http.post(f"/api/v1/conversations/{conv}/messages/", headers=auth(tenant), json={"content": " \x00 "})
    assert_error(resp, 400, "empty_message")
    assert resp.json()["error"]["param"] == "content"  # this endpoint's own field
    assert not Message.objects.filter(conversation_id=conv).exists()


def test_a_streaming_client_that_leaves_before_its_first_token_cancels_its_request(http, platform, redis_client):
    import socket
    from urllib.parse import urlsplit

    from devstack.processes import wait_for
    from inference.wire import keys
    from tenants.models import ComputePool

    t = make_tenant(max_output_tokens=8)
    model = model_id(http, t)
    ghost, _ = ComputePool.objects.get_or_create(slug="ghost", role="prefill")  # no worker serves it
    t.tenant.allocation.prefill_pool = ghost
    t.tenant.allocation.save()
    body = json.dumps({"model": model, "stream": True, "messages": [{"role": "user", "content": "Anyone?"}]})
    url = urlsplit(platform.base_url)
    with socket.create_connection((url.hostname, url.port)) as conn:
        conn.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\n"
                      f"Authorization: Bearer {t.secret_key.plaintext}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        reply = wait_for(lambda: Message.objects.filter(conversation__tenant=t.tenant, role="assistant").first(),
                         timeout=30, what="the request to be accepted")
    # The socket is closed while the request waits for a worker (its stream has no token).
    wait_for(lambda: redis_client.exists(keys.cancel(str(reply.pk))), timeout=30, what="the cancel flag")
    reply.refresh_from_db()
    # Cancelled by the disconnect, not failed by the 8 s queue timeout. Whether the CPU
    # tier marked it "prefilling" depends on which tier finished the hand-off second.
    assert reply.status in ("queued", "prefilling")
