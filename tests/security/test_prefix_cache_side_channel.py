"""No prefix-cache side channel between visitors of one tenant (issue 19, finding 2).

A visitor who guesses another visitor's words must learn nothing from the cache: the
same probe gets the same cached tokens whether the guess is right or wrong. The prompts
here are the CPU tier's own (real tokenizer, salts as it sets them); the cache is the
engine's PrefixCache, fed the KV each prompt would leave."""

from __future__ import annotations

import uuid

import pytest
import torch

from inference.engine.prefix_cache import PrefixCache
from inference.pipeline.cpu import preprocess_request
from inference.pipeline.edges import cache_shared
from inference.pipeline.submit import request_stored
from inference.wire.connections import get_redis
from inference.wire.spec import RequestSpec, Sampling, load, save
from tandem.chat.consumers import _frame

SYSTEM = ("You are the support assistant of Acme Bank. Be brief and polite, never ask for a card "
          "number, and send visitors to the branch page for opening hours. " * 3)
BLOCK = 32


@pytest.fixture
def pool():
    slug = f"side-channel-{uuid.uuid4().hex[:8]}"
    yield slug
    client = get_redis()
    for key in client.scan_iter(match=f"prefill.{slug}*"):
        client.delete(key)


def prompt_of(pool: str, text: str, *, channel: str = "widget", conversation: str | None = None,
              history: list[dict] | None = None) -> RequestSpec:
    """The spec the CPU tier hands to prefill for `text` in a conversation of tenant 7."""
    spec = RequestSpec(
        request_id=str(uuid.uuid4()), tenant_id=7, api_key_id=None,
        conversation_id=conversation or str(uuid.uuid4()), channel=channel, sampling=Sampling(max_tokens=16),
        prefill_pool=pool, decode_pool=pool, system_prompt=SYSTEM, max_prompt_tokens=1024,
        prompt_messages=[*(history or []), {"role": "user", "content": text}])
    save(get_redis(), spec)
    request_stored(request_id=spec.request_id, committed=True)
    preprocess_request(spec.request_id)
    return load(get_redis(), spec.request_id)


def prefill(cache: PrefixCache, spec: RequestSpec) -> int:
    """What the engine does with the prompt: look it up (the cached tokens it would
    report), then remember its KV."""
    shared = cache_shared(spec)  # what the model tiers pass with the salt
    hit = cache.lookup(spec.prompt_token_ids, spec.cache_salt, shared)
    n = len(spec.prompt_token_ids)
    cache.insert(spec.prompt_token_ids, spec.cache_salt, torch.zeros(1, 1, n, 1), torch.zeros(1, 1, n, 1), shared)
    return hit.tokens if hit else 0


SECRET = "Hello, my online banking PIN is 4817 and it stopped working after the update yesterday. "


@pytest.mark.django_db
def test_a_right_and_a_wrong_guess_of_another_visitors_text_get_the_same_cached_tokens(pool):
    cache = PrefixCache(fingerprint="m", max_tokens=1 << 16, block_size=BLOCK)
    prefill(cache, prompt_of(pool, SECRET * 3))  # the victim's conversation
    right = prefill(cache, prompt_of(pool, SECRET * 3))
    wrong = prefill(cache, prompt_of(pool, SECRET.replace("4817", "1234") * 3))
    assert right == wrong


@pytest.mark.django_db
def test_the_cache_still_hits_within_a_conversation_and_keeps_the_system_prompt_shared(pool):
    cache = PrefixCache(fingerprint="m", max_tokens=1 << 16, block_size=BLOCK)
    conv = str(uuid.uuid4())
    first = prompt_of(pool, SECRET, conversation=conv)
    prefill(cache, first)
    follow_up = prompt_of(pool, "Can you help?", conversation=conv, history=[
        {"role": "user", "content": SECRET}, {"role": "assistant", "content": "Of course."}])
    assert prefill(cache, follow_up) >= (len(first.prompt_token_ids) // BLOCK - 1) * BLOCK
    # The tenant's own prefix (its system prompt) is shared by every conversation: another
    # visitor's new conversation hits exactly its whole blocks, and nothing after them.
    other = prompt_of(pool, "Something else entirely")
    assert first.cache_shared_salt == other.cache_shared_salt == "tenant:7"
    assert first.cache_shared_tokens == other.cache_shared_tokens > 40
    assert first.prompt_token_ids[:first.cache_shared_tokens] == other.prompt_token_ids[:other.cache_shared_tokens]
    assert prefill(cache, other) == (other.cache_shared_tokens // BLOCK) * BLOCK > 0
    # REST (the tenant's own server, with its secret key) shares across its conversations.
    prefill(cache, prompt_of(pool, SECRET, channel="api"))
    assert prefill(cache, prompt_of(pool, "Another question", channel="api")) >= BLOCK


def test_a_widget_reply_frame_carries_no_cached_token_count():
    usage = {"prompt_tokens": 90, "completion_tokens": 3, "total_tokens": 93,
             "prompt_tokens_details": {"cached_tokens": 64}}
    frame = _frame("r1", {"type": "end", "finish_reason": "stop", "usage": usage})
    assert frame["usage"] == {"prompt_tokens": 90, "completion_tokens": 3, "total_tokens": 93}
    assert "cached" not in str(frame)
