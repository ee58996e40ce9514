"""Tandem's own surfaces take a reply's sampling options: the widget socket in a
message's `sampling`, the conversation API as fields; a bad one is refused naming it and
nothing is queued; a good one shapes the reply."""

from __future__ import annotations

import httpx
import pytest

from tandem.chat.models import Message
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=24)


def test_the_socket_refuses_a_bad_sampling_option_naming_it_and_honours_a_good_one(platform, tenant):
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        chat.send({"type": "message", "text": "How do I reset my password?", "conversation": None,
                   "sampling": {"temperature": 5}})
        refused = chat.recv()
        assert refused["type"] == "error" and refused["code"] == "invalid_sampling"
        assert refused["param"] == "sampling.temperature"
        assert not Message.objects.filter(conversation__tenant=tenant.tenant).exists()

        chat.send({"type": "message", "text": "How do I reset my password?", "conversation": None,
                   "sampling": {"max_tokens": 3, "repetition_penalty": 1.2, "top_p": 0.9}})
        chat.recv_until(lambda f: f["type"] == "start")
        end = chat.recv_until(lambda f: f["type"] in ("end", "error"))[-1]
        assert end["type"] == "end" and end["finish_reason"] == "length", end
        assert end["usage"]["completion_tokens"] == 3

        chat.send({"type": "message", "text": "Hi", "conversation": None, "sampling": {"max_tokens": 25}})
        too_many = chat.recv()
        assert too_many["type"] == "error" and too_many["code"] == "max_tokens_too_large"


def test_the_conversation_api_takes_top_p_and_repetition_penalty_and_refuses_them_out_of_range(platform, tenant):
    auth = {"Authorization": f"Bearer {tenant.secret_key.plaintext}"}
    with httpx.Client(base_url=platform.base_url, timeout=120) as http:
        conv = http.post("/api/v1/conversations/", headers=auth, json={}).json()["id"]
        url = f"/api/v1/conversations/{conv}/messages/"
        refused = http.post(url, headers=auth, json={"content": "hi", "top_p": 0})
        too_big = http.post(url, headers=auth, json={"content": "hi", "repetition_penalty": 11})
        answered = http.post(url, headers=auth, json={"content": "hi", "max_tokens": 2, "top_p": 0.5,
                                                      "repetition_penalty": 1.3, "temperature": 0.7, "seed": 3})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "top_p"
    assert too_big.status_code == 400 and too_big.json()["error"]["param"] == "repetition_penalty"
    assert answered.status_code == 200, answered.text
    assert answered.json()["usage"]["completion_tokens"] <= 2
