"""The official `openai` client, unchanged, against a live Tandem with real workers."""

from __future__ import annotations

import openai
import pytest

from tandem.chat.models import Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=32)


def client_for(platform, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=key, max_retries=0, timeout=120)


def served_model(client) -> str:
    return client.models.list().data[0].id


def test_a_plain_completion_returns_the_reply_and_its_usage(platform, tenant):
    client = client_for(platform, tenant.secret_key.plaintext)
    model = served_model(client)
    completion = client.chat.completions.create(
        model=model, max_tokens=12, temperature=0,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens >= 1
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert stored.content == choice.message.content


def test_streaming_gives_role_then_content_then_finish_and_equals_the_plain_answer(platform, tenant):
    client = client_for(platform, tenant.secret_key.plaintext)
    model = served_model(client)
    args = dict(model=model, max_tokens=16, temperature=0,
                messages=[{"role": "user", "content": "Name three colours."}])
    plain = client.chat.completions.create(**args).choices[0].message.content
    chunks = list(client.chat.completions.create(**args, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == plain  # greedy: the same tokens either way


def test_streaming_with_include_usage_ends_with_a_usage_chunk(platform, tenant):
    client = client_for(platform, tenant.secret_key.plaintext)
    chunks = list(client.chat.completions.create(
        model=served_model(client), max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True}, messages=[{"role": "user", "content": "Hi!"}],
    ))
    last = chunks[-1]
    assert last.choices == []
    stored = Message.objects.get(role="assistant", conversation__tenant=tenant.tenant)
    assert last.usage.completion_tokens == stored.completion_tokens >= 1
    assert last.usage.prompt_tokens == stored.prompt_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_a_bad_key_raises_authentication_error(platform):
    client = client_for(platform, "sk_not-a-real-key")
    with pytest.raises(openai.AuthenticationError) as exc:
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code == 401
    assert exc.value.body["code"] == "invalid_api_key"


def test_an_unknown_model_raises_not_found(platform, tenant):
    client = client_for(platform, tenant.secret_key.plaintext)
    with pytest.raises(openai.NotFoundError) as exc:
        client.chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "hi"}])
    assert exc.value.body["code"] == "model_not_found"


def test_over_the_request_rate_the_client_raises_rate_limit_error_with_headers(platform):
    tenant = make_tenant(requests_per_minute=1, max_output_tokens=4)
    client = client_for(platform, tenant.secret_key.plaintext)
    model = served_model(client)
    raw = client.chat.completions.with_raw_response.create(
        model=model, max_tokens=2, messages=[{"role": "user", "content": "one"}])
    assert raw.headers["x-ratelimit-limit-requests"] == "1"
    assert raw.headers["x-ratelimit-remaining-requests"] == "0"
    with pytest.raises(openai.RateLimitError) as exc:
        client.chat.completions.create(model=model, max_tokens=2, messages=[{"role": "user", "content": "two"}])
    headers = exc.value.response.headers
    assert 1 <= int(headers["retry-after"]) <= 60
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert "x-ratelimit-reset-tokens" in headers
