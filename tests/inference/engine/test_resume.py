"""A sequence resumed on another engine (its first worker died): given the tokens it had
produced and the KV recomputed from prompt + all but the last, it continues at the next
index with exactly the tokens an uninterrupted run produces, greedy or seeded, and the
output budget counts the tokens produced before."""

from __future__ import annotations

import pytest

from inference.engine.decode import DecodeRequest
from inference.engine.prefill import PrefillRequest
from inference.engine.sampling import SamplingParams

from .conftest import PROMPTS, decode_request, prefill_one

SAMPLINGS = {
    "greedy": SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),
    "seeded": SamplingParams(temperature=0.9, top_p=0.95, seed=1234, max_tokens=24, ignore_eos=True),
}


def _run(engine, request):
    handle = engine.submit(request)
    tokens, finish = handle.result(timeout=60)
    return tokens, finish


@pytest.mark.parametrize("kind", SAMPLINGS)
@pytest.mark.parametrize("cut", [1, 2, 9])
def test_a_sequence_resumed_from_its_streamed_tokens_continues_exactly(prefill_engine, make_decode, kind, cut):
    sampling = SAMPLINGS[kind]
    prompt = PROMPTS[6]
    first = prefill_one(prefill_engine, "whole", prompt, sampling)
    whole, finish = _run(make_decode(), decode_request(first, prompt, sampling))
    produced = [first.first_token, *whole]  # indices 0..23
    assert len(produced) == sampling.max_tokens and finish.finish_reason == "length"

    # The first worker died after streaming `cut` tokens; the next recomputes the KV.
    so_far = produced[:cut]
    (recomputed,) = prefill_engine.prefill([PrefillRequest("again", prompt + so_far[:-1], sampling)])
    seen = []
    resumed = make_decode().submit(DecodeRequest(
        "again", prompt, so_far[0], recomputed.kv, sampling, output_token_ids=so_far,
        on_token=lambda _r, index, token, _ts: seen.append((index, token))))
    rest, finish = resumed.result(timeout=60)

    assert so_far + rest == produced
    assert [i for i, _ in seen] == list(range(cut, sampling.max_tokens))  # next index on, no gap
    assert finish.finish_reason == "length" and finish.stats.output_tokens == sampling.max_tokens


def test_a_resumed_sequence_that_had_used_its_budget_ends_at_once(prefill_engine, make_decode):
    sampling = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    prompt = PROMPTS[3]
    so_far = [5, 6, 7]
    (kv,) = prefill_engine.prefill([PrefillRequest("full", prompt + so_far[:-1], sampling)])
    tokens, finish = _run(make_decode(), DecodeRequest("full", prompt, 5, kv.kv, sampling, output_token_ids=so_far))
    assert tokens == [] and finish.finish_reason == "length" and finish.stats.output_tokens == 3


def test_the_colocated_engine_resumes_a_sequence_the_same_way(prefill_engine, make_colocated):
    sampling = SAMPLINGS["seeded"]
    prompt = PROMPTS[4]
    engine = make_colocated()
    produced, _ = engine.submit("whole", prompt, sampling).result(timeout=60)
    so_far = produced[:5]
    (kv,) = prefill_engine.prefill([PrefillRequest("again", prompt + so_far[:-1], sampling)])
    rest, _ = engine.resume(DecodeRequest("again", prompt, so_far[0], kv.kv, sampling,
                                          output_token_ids=so_far)).result(timeout=60)
    assert so_far + rest == produced


def test_a_resumed_sequence_needs_the_kv_of_all_but_its_last_token(prefill_engine, make_decode):
    prompt = PROMPTS[2]
    result = prefill_one(prefill_engine, "short", prompt)
    with pytest.raises(ValueError, match="KV length"):
        make_decode().submit(DecodeRequest("short", prompt, 1, result.kv, SAMPLINGS["greedy"],
                                           output_token_ids=[1, 2, 3]))
