"""The prefix cache reuses a prompt's computed prefix within a tenant, never across
tenants or models, and a hit changes nothing in the output."""

from __future__ import annotations

import torch

from inference.engine.prefill import PrefillEngine, PrefillRequest
from inference.engine.prefix_cache import PrefixCache, SharedPrefix

from .conftest import GREEDY, decode_request, prompt, tiny_config

BLOCK = 4


def kv_for(n: int, fill: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    k = torch.arange(n, dtype=torch.float32).view(1, 1, n, 1).expand(2, 1, n, 3).clone() * fill
    return k, -k


def test_a_shared_prefix_hits_across_salts_and_nothing_after_it_does():
    cache = PrefixCache(fingerprint="m1", max_tokens=256, block_size=BLOCK)
    system = list(range(100, 109))  # 9 tokens: two whole blocks may be shared
    shared = SharedPrefix(salt="tenant", tokens=len(system))
    visitor_a = system + [1, 2, 3, 4, 5, 6, 7, 8, 9]
    cache.insert(visitor_a, "conv-a", *kv_for(len(visitor_a)), shared)
    # Another conversation that starts with the same system prompt reuses its whole blocks...
    hit = cache.lookup(system + [50, 51, 52, 53, 54], "conv-b", shared)
    assert hit is not None and hit.tokens == 8
    # ...and guessing conversation A's own words gains nothing beyond them.
    guess = cache.lookup(visitor_a + [0], "conv-b", shared)
    assert guess is not None and guess.tokens == 8
    # Within conversation A, the whole prompt hits, shared blocks and its own.
    mine = cache.lookup(visitor_a + [0], "conv-a", shared)
    assert mine is not None and mine.tokens == 16
    # The shared blocks are the tenant salt's: a request under that salt alone hits them.
    assert cache.lookup(system + [0], "tenant").tokens == 8


def test_a_prefix_hits_within_its_salt_and_misses_across_salts_and_models():
    cache = PrefixCache(fingerprint="m1", max_tokens=64, block_size=BLOCK)
    tokens = list(range(10))
    cache.insert(tokens, "tenant-a", *kv_for(10))
    hit = cache.lookup(tokens + [99, 98], "tenant-a")
    assert hit is not None and hit.tokens == 8  # two full blocks
    torch.testing.assert_close(hit.k, kv_for(10)[0][:, :, :8])
    assert cache.lookup(tokens + [99], "tenant-b") is None
    assert cache.lookup(tokens + [99], None) is None
    other_model = PrefixCache(fingerprint="m2", max_tokens=64, block_size=BLOCK)
    assert other_model.lookup(tokens, "tenant-a") is None
    assert cache.stats().hits == 1 and cache.stats().misses == 2


def test_a_hit_covers_only_the_matching_blocks_and_leaves_a_token_to_compute():
    cache = PrefixCache(fingerprint="m", max_tokens=64, block_size=BLOCK)
    tokens = list(range(12))
    cache.insert(tokens, "s", *kv_for(12))
    assert cache.lookup(tokens[:6] + [77] * 6, "s").tokens == 4  # diverges in block two
    assert cache.lookup(tokens, "s").tokens == 8  # not 12: the last token must be computed
    assert cache.lookup([5] + tokens[1:], "s") is None  # differs in the first block


def test_eviction_is_lru_within_the_token_budget_and_takes_children_before_parents():
    cache = PrefixCache(fingerprint="m", max_tokens=3 * BLOCK, block_size=BLOCK)
    a = list(range(100, 112))  # three blocks
    cache.insert(a, "s", *kv_for(12))
    b = list(range(200, 205))  # one more block: evicts a's deepest block, not its root
    cache.insert(b, "s", *kv_for(5))
    assert cache.stats().tokens == 3 * BLOCK
    assert cache.lookup(a + [1], "s").tokens == 8
    assert cache.lookup(b + [1], "s").tokens == 4


def test_prefill_with_a_hit_computes_only_the_suffix_and_gives_the_same_output(
    tiny, tiny_dir, make_decode, tiny_reference
):
    cached = PrefillEngine(tiny, tiny_config(tiny_dir, prefix_cache_tokens=1024, prefix_block=16))
    system = prompt(42, 40)  # a tenant's system prompt: two full 16-token blocks
    first = system + prompt(1, 9)[1:]
    second = system + prompt(2, 13)[1:]
    decode = make_decode()

    def run(rid, tokens, salt):
        (res,) = cached.prefill([PrefillRequest(rid, tokens, GREEDY, salt)])
        out, _ = decode.submit(decode_request(res, tokens)).result(timeout=30)
        return res, [res.first_token, *out]

    r1, out1 = run("one", first, "tenant-a")
    r2, out2 = run("two", second, "tenant-a")
    r3, out3 = run("three", second, "tenant-b")
    assert (r1.cached_tokens, r2.cached_tokens, r3.cached_tokens) == (0, 32, 0)
    assert out1 == tiny_reference(first) and out2 == tiny_reference(second) == out3
    torch.testing.assert_close(r2.kv.k, r3.kv.k, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(r2.kv.v, r3.kv.v, rtol=1e-4, atol=1e-5)
