"""Repetition control and logit bias: each penalty means what OpenAI (or vLLM) says it
means, a batch mixes penalised and plain rows, zero changes nothing bit for bit, and on
the default model a greedy reply that loops stops looping with a penalty."""

from __future__ import annotations

import pytest
import torch

from inference.engine.penalties import apply_penalties
from inference.engine.sampling import SamplingParams, make_generator, sample_tokens

from .conftest import PROMPTS, decode_request, prefill_one


def penalised(**kw) -> SamplingParams:
    return SamplingParams(temperature=0, **kw)


def test_frequency_penalty_subtracts_per_occurrence_and_presence_once():
    logits = torch.zeros(2, 6)
    out = apply_penalties(logits.clone(), [penalised(frequency_penalty=0.5), penalised(presence_penalty=0.25)],
                          [([], [1, 1, 1, 4]), ([], [2, 2, 5])])
    assert out[0].tolist() == [0, -1.5, 0, 0, -0.5, 0]
    assert out[1].tolist() == [0, 0, -0.25, 0, 0, -0.25]


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_prompt_and_output():
    logits = torch.tensor([[2.0, -2.0, 2.0, -2.0, 2.0]])
    out = apply_penalties(logits.clone(), [penalised(repetition_penalty=2.0)], [([0, 1], [1, 2])])
    assert out[0].tolist() == [1.0, -4.0, 1.0, -2.0, 2.0]  # 0,1 from the prompt, 2 from the output


def test_logit_bias_is_added_to_its_tokens_and_can_force_or_ban_one():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    p = penalised(logit_bias=[(0, 100.0), (1, -100.0)])
    assert int(sample_tokens(logits.clone(), [p], [None], [([], [])])[0]) == 0
    assert apply_penalties(logits.clone(), [p], [([], [])])[0].tolist() == [101.0, -97.0, 2.0]


def test_a_batch_without_penalties_is_returned_untouched_and_plain_rows_are_unchanged_beside_penalised_ones():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    plain = [SamplingParams(temperature=0), SamplingParams(temperature=0.8, seed=3)]
    assert apply_penalties(logits, plain, None) is logits
    mixed = [plain[0], penalised(frequency_penalty=2.0), plain[1]]
    argmax = int(logits[1].float().argmax())
    out = apply_penalties(logits, mixed, [([], []), ([], [argmax] * 3), ([], [7, 7])])
    assert out.dtype == torch.float32
    assert torch.equal(out[0], logits[0].float()) and torch.equal(out[2], logits[2].float())
    assert int(out[1].argmax()) != argmax  # 6.0 below where it was
    gens = [make_generator(p, 0) for p in mixed]
    again = [make_generator(p, 0) for p in plain]
    both = sample_tokens(logits, mixed, gens, [([], []), ([], [argmax] * 3), ([], [7, 7])])
    alone = sample_tokens(logits[[0, 2]], plain, [again[0], again[1]])
    assert both[[0, 2]].tolist() == alone.tolist()


@pytest.mark.parametrize("bad", [dict(frequency_penalty=2.5), dict(presence_penalty=-3),
                                 dict(repetition_penalty=0), dict(logit_bias=[(5, 101)])])
def test_out_of_range_penalties_are_refused(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_penalties_round_trip_through_the_wire_dict():
    p = SamplingParams(frequency_penalty=0.3, presence_penalty=0.1, repetition_penalty=1.2,
                       logit_bias=[(9, -5)])
    assert SamplingParams.from_dict(p.to_dict()) == p


def test_zero_penalties_give_the_same_tokens_in_prefill_decode_and_colocated(prefill_engine, make_decode,
                                                                            make_colocated):
    zero = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, frequency_penalty=0.0,
                          presence_penalty=0.0, repetition_penalty=1.0)
    plain = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    decode, colocated = make_decode(), make_colocated()
    runs = []
    for i, params in enumerate((plain, zero)):
        res = prefill_one(prefill_engine, f"p{i}", PROMPTS[8], params)
        tokens, _ = decode.submit(decode_request(res, PROMPTS[8], params)).result(timeout=60)
        runs.append([res.first_token, *tokens])
        runs.append(colocated.submit(f"c{i}", PROMPTS[8], params).result(timeout=60)[0])
    assert runs[0] == runs[1] == runs[2] == runs[3] and len(runs[0]) == 24


def test_a_penalty_travels_with_a_sequence_from_prefill_to_decode(prefill_engine, make_decode, make_colocated):
    """Disaggregated and colocated give the same penalised greedy tokens: the decode side
    sees the prompt (for repetition_penalty) and the first token like the colocated one."""
    # Below 1 the repetition penalty favours the prompt's tokens: the tiny random model
    # then repeats them, which the frequency penalty in turn pushes back against.
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, frequency_penalty=2.0,
                            repetition_penalty=0.05)
    res = prefill_one(prefill_engine, "pp", PROMPTS[9], params)
    tokens, end = make_decode().submit(decode_request(res, PROMPTS[9], params)).result(timeout=60)
    together, together_end = make_colocated().submit("cc", PROMPTS[9], params).result(timeout=60)
    plain = make_colocated().submit("np", PROMPTS[9], SamplingParams(temperature=0, max_tokens=24,
                                                                       ignore_eos=True)).result(timeout=60)[0]
    assert end.finish_reason == together_end.finish_reason == "length"
    assert [res.first_token, *tokens] == together and len(together) == 24
    assert together != plain and set(together) & set(PROMPTS[9])


def most_repeated_4gram(text: str) -> int:
    words = text.split()
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return max((grams.count(g) for g in set(grams)), default=0)


@pytest.fixture(scope="module")
def default_model():
    from inference.engine.config import EngineConfig
    from inference.engine.loader import load_model
    from inference.engine.prepare import DEFAULT_DIR, prepare_model
    from inference.text.tokenizer import ServedTokenizer

    model_dir = prepare_model(DEFAULT_DIR)
    # float32: the kernels match Hugging Face's, so greedy output is the same on any run
    # (bf16 picks its kernels by timing them on the machine).
    config = EngineConfig(model=model_dir, device="cpu", dtype="float32", max_batch=2)
    return ServedTokenizer.from_dir(model_dir), load_model(config), config


@pytest.mark.real_model
@pytest.mark.timeout(900)
def test_the_default_model_stops_looping_on_the_password_question_with_a_frequency_penalty(default_model):
    from inference.engine.colocated import ColocatedEngine

    tok, model, config = default_model
    messages = [{"role": "system", "content": "You are a helpful, concise customer-support assistant."},
                {"role": "user", "content": "How do I reset my password?"}]
    ids = tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                     add_special_tokens=False)
    engine = ColocatedEngine(model, config)
    try:
        # One after the other: each a one-row batch, as a lone widget reply is.
        plain, with_penalty = (
            tok.decode(engine.submit(rid, list(ids), SamplingParams(temperature=0, max_tokens=150, **kw))
                       .result(timeout=400)[0])
            for rid, kw in (("plain", {}), ("penalised", {"frequency_penalty": 0.5})))
    finally:
        engine.shutdown()
    assert most_repeated_4gram(plain) >= 3, plain  # "You'll be asked to enter your …" again and again
    assert most_repeated_4gram(with_penalty) < 3, with_penalty
