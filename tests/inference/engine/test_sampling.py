"""Sampling picks from the distribution it is asked to, and a seed pins the output down
wherever the tokens are produced."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from inference.engine.sampling import SamplingParams, make_generator, sample_tokens

from .conftest import PROMPTS, decode_request, prefill_one

SEEDED = SamplingParams(temperature=0.9, top_p=0.95, top_k=50, seed=1234, max_tokens=20, ignore_eos=True)


def draw(logits: torch.Tensor, params: SamplingParams, n: int, seed: int = 0) -> list[int]:
    g = make_generator(SamplingParams(**{**params.to_dict(), "seed": seed}), tokens_done=0)
    return [int(sample_tokens(logits[None], [params], [g])[0]) for _ in range(n)]


def test_greedy_rows_take_the_argmax_beside_sampled_rows():
    logits = torch.randn(4, 100, generator=torch.Generator().manual_seed(0))
    params = [SamplingParams(temperature=0), SamplingParams(temperature=1.0, seed=1),
              SamplingParams(temperature=0.7, top_k=1), SamplingParams(temperature=0)]
    gens = [make_generator(p, 0) for p in params]
    out = sample_tokens(logits, params, gens)
    argmax = logits.argmax(-1)
    assert out[0] == argmax[0] and out[2] == argmax[2] and out[3] == argmax[3]
    assert gens[0] is None and gens[2] is None  # greedy rows draw nothing


def test_temperature_sampling_follows_the_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    counts = Counter(draw(logits, SamplingParams(temperature=1.0), 4000))
    expected = torch.softmax(logits, -1)
    for token in range(4):
        assert abs(counts[token] / 4000 - float(expected[token])) < 0.03


def test_top_k_and_top_p_never_leave_their_candidates():
    logits = torch.tensor([3.0, 2.9, 2.8, 0.0, -1.0, -2.0])
    assert set(draw(logits, SamplingParams(temperature=2.0, top_k=2), 500)) == {0, 1}
    # Softmax at T=1: 0.34, 0.31, 0.28, ... -> top_p 0.6 keeps exactly the first two.
    assert set(draw(logits, SamplingParams(temperature=1.0, top_p=0.6), 500)) == {0, 1}


def test_a_nucleus_wider_than_the_candidate_shortlist_is_still_exact():
    # Flat over 1000 tokens: top_p=0.5 keeps ~500, far beyond the top-k shortlist.
    logits = torch.zeros(1000)
    logits[:500] = 0.01  # the nucleus is exactly these 500
    tokens = draw(logits, SamplingParams(temperature=1.0, top_p=0.5), 400)
    assert max(tokens) < 500 and len(set(tokens)) > 100


def test_the_same_seed_draws_the_same_tokens_and_another_seed_does_not():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(3))
    params = SamplingParams(temperature=1.5)
    assert draw(logits, params, 30, seed=7) == draw(logits, params, 30, seed=7)
    assert draw(logits, params, 30, seed=7) != draw(logits, params, 30, seed=8)


def test_sampling_params_round_trip_and_validation():
    p = SamplingParams(temperature=0.5, top_p=0.9, top_k=40, seed=3, max_tokens=7, stop_token_ids=[5, 6])
    assert SamplingParams.from_dict(p.to_dict()) == p and p.stop_token_ids == (5, 6)
    for bad in (dict(temperature=-1), dict(top_p=0), dict(top_k=-1), dict(max_tokens=0)):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def run_disaggregated(prefill_engine, decode, rid, token_ids, sampling):
    res = prefill_one(prefill_engine, rid, token_ids, sampling)
    tokens, _ = decode.submit(decode_request(res, token_ids, sampling)).result(timeout=30)
    return [res.first_token, *tokens]


def test_seeded_output_is_reproducible_across_runs_batches_and_engine_modes(
    prefill_engine, make_decode, make_colocated
):
    decode = make_decode()
    alone = run_disaggregated(prefill_engine, decode, "a", PROMPTS[7], SEEDED)
    assert run_disaggregated(prefill_engine, decode, "b", PROMPTS[7], SEEDED) == alone
    # Beside other sequences (a different batch), and in the colocated engine.
    others = [decode.submit(decode_request(prefill_one(prefill_engine, f"o{i}", PROMPTS[i], SEEDED),
                                           PROMPTS[i], SEEDED)) for i in (3, 9)]
    assert run_disaggregated(prefill_engine, decode, "c", PROMPTS[7], SEEDED) == alone
    for h in others:
        h.result(timeout=30)
    colocated = make_colocated()
    tokens, _ = colocated.submit("d", PROMPTS[7], SEEDED).result(timeout=30)
    assert tokens == alone
    reseeded = SamplingParams(**{**SEEDED.to_dict(), "seed": 99})
    assert run_disaggregated(prefill_engine, decode, "e", PROMPTS[7], reseeded) != alone
