"""Logprobs from the batched sampler: they are the log-softmax of the distribution the
token was drawn from (penalties, mask and temperature in, top-k/top-p not), a greedy
token is the first of its top list, rows that do not ask cost nothing and change
nothing, and they reach the handle's events from prefill, decode and colocated alike.
Identical prompts in one prefill call are computed once."""

from __future__ import annotations

import math

import pytest
import torch

from inference.engine.prefill import PrefillRequest
from inference.engine.sampling import (
    LOGPROB_FLOOR,
    SamplingParams,
    make_generator,
    sample,
    sample_tokens,
)

from .conftest import PROMPTS, decode_request

GREEDY_LP = SamplingParams(temperature=0, max_tokens=8, logprobs=True, top_logprobs=5)


def test_a_greedy_rows_token_is_its_top_one_and_logprobs_are_the_log_softmax():
    logits = torch.randn(2, 40, generator=torch.Generator().manual_seed(1))
    got = sample(logits, [GREEDY_LP, SamplingParams(temperature=0)], [None, None])
    lp = got.logprobs[0]
    assert got.logprobs[1] is None
    expected = torch.log_softmax(logits[0], -1)
    token = int(got.tokens[0])
    assert lp.top[0][0] == token and lp.top[0][1] == lp.logprob
    assert math.isclose(lp.logprob, float(expected[token]), rel_tol=1e-6)
    assert [t for t, _ in lp.top] == expected.topk(5).indices.tolist()
    assert all(a[1] >= b[1] for a, b in zip(lp.top, lp.top[1:], strict=False))


def test_a_sampled_rows_logprobs_are_after_temperature_and_penalties():
    logits = torch.randn(1, 30, generator=torch.Generator().manual_seed(2))
    p = SamplingParams(temperature=0.5, seed=7, logprobs=True, top_logprobs=2, frequency_penalty=1.0)
    got = sample(logits, [p], [make_generator(p, 0)], [([], [3, 3])])
    adjusted = logits[0].clone()
    adjusted[3] -= 2.0
    expected = torch.log_softmax(adjusted / 0.5, -1)
    token = int(got.tokens[0])
    assert math.isclose(got.logprobs[0].logprob, float(expected[token]), rel_tol=1e-5)
    assert len(got.logprobs[0].top) == 2


def test_asking_for_logprobs_changes_no_token():
    logits = torch.randn(4, 64, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    plain = [SamplingParams(temperature=0.9, seed=s) for s in range(4)]
    asking = [SamplingParams(temperature=0.9, seed=s, logprobs=True, top_logprobs=3) for s in range(4)]
    a = sample_tokens(logits, plain, [make_generator(p, 0) for p in plain])
    b = sample(logits, asking, [make_generator(p, 0) for p in asking])
    assert a.tolist() == b.tokens.tolist()


def test_a_forbidden_token_reports_the_floor_not_minus_infinity():
    logits = torch.tensor([[0.0, float("-inf"), float("-inf")]])
    got = sample(logits, [SamplingParams(temperature=0, logprobs=True, top_logprobs=3)], [None])
    assert got.logprobs[0].top[0] == (0, 0.0)
    assert [v for _, v in got.logprobs[0].top[1:]] == [LOGPROB_FLOOR, LOGPROB_FLOOR]


@pytest.mark.parametrize("bad", [dict(top_logprobs=21, logprobs=True), dict(top_logprobs=2)])
def test_top_logprobs_out_of_range_or_without_logprobs_is_refused(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_logprobs_reach_the_events_of_prefill_and_decode_and_match_colocated(prefill_engine, make_decode,
                                                                               make_colocated):
    ids = PROMPTS[5]
    (first,) = prefill_engine.prefill([PrefillRequest("a", ids, GREEDY_LP)])
    assert first.first_logprobs is not None and first.first_logprobs.top[0][0] == first.first_token
    handle = make_decode().submit(decode_request(first, ids, GREEDY_LP))
    split = [(first.first_token, first.first_logprobs)] + [(ev.token_id, ev.logprobs) for ev in handle.events(30)]
    together = [(ev.token_id, ev.logprobs) for ev in make_colocated().submit("b", ids, GREEDY_LP).events(30)]
    assert [t for t, _ in split] == [t for t, _ in together]
    for (token, lp), (_, lp2) in zip(split, together, strict=True):
        assert lp.top[0] == (token, lp.logprob)
        assert math.isclose(lp.logprob, lp2.logprob, abs_tol=1e-4)


def test_identical_prompts_in_one_call_share_one_forward_row_and_sample_apart(prefill_engine):
    ids = PROMPTS[7]
    sampled = [SamplingParams(temperature=1.0, seed=s, max_tokens=4) for s in range(6)]
    results = prefill_engine.prefill([PrefillRequest(f"c{i}", ids, p, "t") for i, p in enumerate(sampled)]
                                     + [PrefillRequest("other", PROMPTS[6], sampled[0], "t")])
    assert [r.request_id for r in results] == [*(f"c{i}" for i in range(6)), "other"]
    assert all(r.kv is results[0].kv for r in results[1:6])  # computed once
    assert results[6].kv is not results[0].kv
    assert results[0].timings["batch_size"] == 2.0  # the unique prompts only
    assert [r.cached_tokens for r in results[:6]] == [0] + [len(ids)] * 5
    alone = [prefill_engine.prefill([PrefillRequest(f"d{i}", ids, p, None)])[0].first_token
             for i, p in enumerate(sampled)]
    assert [r.first_token for r in results[:6]] == alone
    assert len(set(alone)) > 1  # the seeds drew different tokens
