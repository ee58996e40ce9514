"""Nothing a client sends is silently dropped: every field of OpenAI's chat-completions
request is honoured or refused with a 400 naming it, inside messages too."""

from __future__ import annotations

import httpx
import openai
import pytest

from tandem.chat.models import Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=8)


@pytest.fixture
def client(platform, tenant):
    return openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=tenant.secret_key.plaintext,
                         max_retries=0, timeout=120)


@pytest.fixture
def model(client):
    return client.models.list().data[0].id


@pytest.mark.parametrize("extra,param,code", [
    ({"temprature": 0.5}, "temprature", "unknown_parameter"),
    ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio", "unsupported_parameter"),
    ({"functions": [{"name": "f"}]}, "functions", "unsupported_parameter"),
    ({"reasoning_effort": "high"}, "reasoning_effort", "unsupported_parameter"),
    ({"store": True}, "store", "unsupported_parameter"),
    ({"modalities": ["text", "audio"]}, "modalities", "unsupported_parameter"),
    ({"stream_options": {"include_usage": True, "colour": "red"}}, "stream_options.colour", "unknown_parameter"),
    ({"messages": [{"role": "user", "content": "hi", "mood": "happy"}]}, "messages[0].mood", "unknown_parameter"),
    ({"messages": [{"role": "assistant", "content": "x", "refusal": "no"}, *HELLO]}, "messages[0].refusal",
     "unsupported_parameter"),
])
def test_a_field_that_would_be_dropped_is_a_400_naming_it(client, model, tenant, extra, param, code):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=model, messages=extra.pop("messages", HELLO), extra_body=extra)
    assert exc.value.status_code == 400
    assert exc.value.body["param"] == param and exc.value.body["code"] == code
    assert exc.value.body["type"] == "invalid_request_error"
    assert not Message.objects.filter(conversation__tenant=tenant.tenant).exists()


def test_fields_at_their_off_values_and_the_vllm_extensions_are_accepted(client, model, tenant):
    completion = client.chat.completions.create(
        model=model, messages=HELLO, max_tokens=4, temperature=0.7, store=False, metadata={},
        service_tier="auto", modalities=["text"], n=1, logprobs=False, safety_identifier="visitor-9",
        extra_body={"top_k": 1},
    )
    assert completion.choices[0].message.content
    stored = Message.objects.get(conversation__tenant=tenant.tenant, role="assistant")
    assert stored.conversation.visitor_id == "visitor-9"


def test_a_message_echoed_back_from_a_completion_is_accepted(client, model):
    first = client.chat.completions.create(model=model, messages=HELLO, max_tokens=4, temperature=0)
    echoed = first.choices[0].message.model_dump()  # refusal, audio, tool_calls … all None
    second = client.chat.completions.create(
        model=model, max_tokens=4, temperature=0, messages=[*HELLO, echoed, {"role": "user", "content": "and?"}])
    assert second.choices[0].message.content


def test_raw_http_gets_the_same_refusal_as_the_client(platform, tenant, model):
    with httpx.Client(base_url=platform.base_url, timeout=60) as http:
        resp = http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {tenant.secret_key.plaintext}"},
                         json={"model": model, "messages": HELLO, "web_search_options": {}})
    assert resp.status_code == 400
    assert resp.json()["error"] == {
        "message": "'web_search_options' is not supported by this deployment.",
        "type": "invalid_request_error", "param": "web_search_options", "code": "unsupported_parameter"}


def test_the_conversation_api_refuses_a_field_it_does_not_know_and_takes_penalties(platform, tenant):
    auth = {"Authorization": f"Bearer {tenant.secret_key.plaintext}"}
    with httpx.Client(base_url=platform.base_url, timeout=120) as http:
        conv = http.post("/api/v1/conversations/", headers=auth, json={}).json()["id"]
        refused = http.post(f"/api/v1/conversations/{conv}/messages/", headers=auth,
                            json={"content": "hi", "tools": []})
        answered = http.post(f"/api/v1/conversations/{conv}/messages/", headers=auth,
                             json={"content": "hi", "max_tokens": 4, "frequency_penalty": 0, "presence_penalty": 0.5})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "tools" and refused.json()["error"]["code"] == "unknown_parameter"
    assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"]
