"""logprobs / top_logprobs and n through the official client against the live platform
(prefill and decode workers): a greedy token is the first of its alternatives with the
same logprob, streamed and plain answers carry the same entries, n gives n choices
indexed 0..n-1 (streamed chunks carry theirs) with the prompt counted once."""

from __future__ import annotations

import uuid

import openai
import pytest

from tandem.chat.models import Message
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
ASK = [{"role": "user", "content": "How do I reset my password?"}]


@pytest.fixture
def tenant():
    return make_tenant(max_output_tokens=16)


@pytest.fixture
def client(platform, tenant):
    return openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=tenant.secret_key.plaintext,
                         max_retries=0, timeout=120)


@pytest.fixture
def model(client):
    return client.models.list().data[0].id


def test_greedy_logprobs_name_the_chosen_token_first_and_stream_the_same(client, model):
    args = dict(model=model, messages=ASK, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3)
    plain = client.chat.completions.create(**args).choices[0]
    content = plain.logprobs.content
    assert len(content) == 8 and plain.finish_reason == "length"
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == entry.logprob <= 0
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob >= entry.top_logprobs[2].logprob
    # The tokens' bytes spell the reply.
    assert bytes(b for e in content for b in e.bytes).decode() == plain.message.content

    chunks = list(client.chat.completions.create(**args, stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in content]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in content], abs=1e-4)
    assert [[t.token for t in e.top_logprobs] for e in streamed] == [[t.token for t in e.top_logprobs]
                                                                     for e in content]
    # Each chunk carries the entries of the text it carries.
    for c in chunks:
        if c.choices and c.choices[0].logprobs:
            assert "".join(e.token for e in c.choices[0].logprobs.content) == c.choices[0].delta.content


def test_without_logprobs_a_choice_has_none(client, model):
    assert client.chat.completions.create(model=model, messages=ASK, max_tokens=2).choices[0].logprobs is None


def test_n_choices_are_indexed_and_count_the_prompt_once(client, model, tenant):
    one = client.chat.completions.create(model=model, messages=ASK, max_tokens=6, temperature=0)
    many = client.chat.completions.create(model=model, messages=ASK, max_tokens=6, temperature=1.0, seed=11, n=3)
    assert [c.index for c in many.choices] == [0, 1, 2]
    assert many.usage.prompt_tokens == one.usage.prompt_tokens
    assert len({c.message.content for c in many.choices}) > 1  # seed, seed + 1, seed + 2 differ
    replies = Message.objects.filter(conversation__tenant=tenant.tenant, role="assistant")
    assert replies.count() == 4
    first = uuid.UUID(one.id.removeprefix("chatcmpl-"))
    assert many.usage.completion_tokens == sum(m.completion_tokens for m in replies.exclude(pk=first))
    assert many.usage.total_tokens == many.usage.prompt_tokens + many.usage.completion_tokens

    chunks = list(client.chat.completions.create(model=model, messages=ASK, max_tokens=6, temperature=1.0,
                                                 seed=11, n=3, stream=True))
    texts = {i: "".join(c.choices[0].delta.content or "" for c in chunks if c.choices[0].index == i)
             for i in range(3)}
    assert texts == {c.index: c.message.content for c in many.choices}
    finished = [c.choices[0].index for c in chunks if c.choices[0].finish_reason]
    assert sorted(finished) == [0, 1, 2]
