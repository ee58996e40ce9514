"""Grammar-constrained decoding: a constrained row only ever samples tokens its grammar
allows, so even the tiny model's random weights write JSON that validates against the
schema; free rows in the same step are untouched; and the grammar's state survives the
prefill -> decode hand-off and a resume from streamed tokens (a migration)."""

from __future__ import annotations

import json

import jsonschema
import llguidance
import pytest
import torch

from inference.engine.decode import DecodeRequest
from inference.engine.grammar import GrammarError, Grammars, mask_logits_
from inference.engine.prefill import PrefillRequest
from inference.engine.sampling import SamplingParams, sample_tokens

from .conftest import PROMPTS, decode_request, prefill_one

SCHEMA = {"type": "object", "properties": {
    "answer": {"type": "string", "maxLength": 12}, "confidence": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["billing", "login", "other"]}, "maxItems": 3}},
    "required": ["answer", "confidence", "tags"], "additionalProperties": False}
# As the web tier compiles a response_format (tandem.api.structured).
GRAMMAR = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA, overrides={"whitespace_pattern": "[ ]?"})


def constrained(**kw) -> SamplingParams:
    return SamplingParams(**{"temperature": 0, "max_tokens": 60, "grammar": GRAMMAR, **kw})


@pytest.fixture(scope="module")
def grammars(tiny) -> Grammars:
    return Grammars.for_model(tiny)


def decode_text(tiny, tokens) -> str:
    return tiny.tokenizer.decode(tokens)


def test_the_mask_forbids_exactly_what_the_grammar_does_and_leaves_free_rows_alone(grammars, tiny):
    yes_no = llguidance.LLMatcher.grammar_from_regex("(yes|no)")
    matcher = grammars.matcher(yes_no)
    logits = torch.randn(2, tiny.model.shape.vocab, generator=torch.Generator().manual_seed(1))
    before = logits.clone()
    mask_logits_(logits, [matcher, None])
    allowed = [tiny.tokenizer.decode([t]) for t in torch.isfinite(logits[0]).nonzero().flatten().tolist()]
    assert "yes" in allowed and "no" in allowed
    assert all(text and ("yes".startswith(text) or "no".startswith(text)) for text in allowed)
    assert torch.equal(logits[1], before[1])


def test_a_bad_grammar_and_tokens_outside_one_are_refused(grammars, tiny):
    with pytest.raises(GrammarError):
        grammars.matcher('{"grammars": [{"json_schema": {"type": "bogus"}}]}')
    not_json = tiny.tokenizer.encode("hello", add_special_tokens=False)
    with pytest.raises(GrammarError):
        grammars.matcher(GRAMMAR, not_json)


def test_the_matcher_reads_byte_level_tokens_as_their_bytes(grammars, tiny):
    """"Ċ" is the default model's newline token: inside a JSON string it is a raw control
    character (refused), not the letter Ċ; and a space token after a colon is a space."""
    any_object = llguidance.LLMatcher.grammar_from_json_schema({"type": "object"})
    encode = lambda text: tiny.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    with pytest.raises(GrammarError):
        grammars.matcher(any_object, encode('{"a\n'))
    assert grammars.matcher(any_object, encode('{"a": "é ü", "b": [1, 2]}')).is_accepting()


def test_the_same_schema_is_compiled_once(grammars):
    grammars.matcher(GRAMMAR)
    compiled = dict(grammars._compiled)
    grammars.matcher(GRAMMAR)
    assert grammars._compiled[GRAMMAR] is compiled[GRAMMAR]


def test_constrained_and_free_rows_share_a_batch_and_every_constrained_reply_validates(make_colocated, tiny):
    engine = make_colocated(max_batch=4)
    params = [constrained(), constrained(temperature=1.0, seed=3), SamplingParams(temperature=0, max_tokens=60),
              constrained(temperature=0.8, top_p=0.9, seed=9)]
    handles = [engine.submit(f"r{i}", PROMPTS[i + 3], p) for i, p in enumerate(params)]
    outputs = [h.result(timeout=120) for h in handles]
    for i, (tokens, finish) in enumerate(outputs):
        if i == 2:
            continue
        assert finish.finish_reason == "stop", decode_text(tiny, tokens)  # the grammar ended it, not max_tokens
        jsonschema.validate(json.loads(decode_text(tiny, tokens)), SCHEMA)
    free_alone = make_colocated().submit("alone", PROMPTS[5], SamplingParams(temperature=0, max_tokens=60))
    assert free_alone.result(timeout=120)[0] == outputs[2][0]


def test_the_grammar_state_survives_the_hand_off_and_a_resume_from_streamed_tokens(
        prefill_engine, make_decode, make_colocated, tiny):
    params = constrained()
    prompt = PROMPTS[7]
    together, _ = make_colocated().submit("c", prompt, params).result(timeout=120)
    first = prefill_one(prefill_engine, "p", prompt, params)
    rest, _ = make_decode().submit(decode_request(first, prompt, params)).result(timeout=120)
    assert [first.first_token, *rest] == together
    # The first decode worker died after streaming 7 tokens; another one recomputes the
    # KV and its matcher replays them.
    so_far = together[:7]
    (recomputed,) = prefill_engine.prefill([PrefillRequest("again", prompt + so_far[:-1], params)])
    resumed, finish = make_decode().submit(DecodeRequest(
        "again", prompt, so_far[0], recomputed.kv, params, output_token_ids=so_far)).result(timeout=120)
    assert so_far + resumed == together and finish.finish_reason == "stop"
    jsonschema.validate(json.loads(decode_text(tiny, together)), SCHEMA)


def test_sample_tokens_advances_each_constrained_rows_matcher(grammars, tiny):
    matcher = grammars.matcher(llguidance.LLMatcher.grammar_from_regex("ok"))
    logits = torch.zeros(1, tiny.model.shape.vocab)
    tokens = []
    for _ in range(4):
        tok = int(sample_tokens(logits, [SamplingParams(temperature=0)], [None], None, [matcher])[0])
        tokens.append(tok)
        if matcher.is_stopped():
            break
    assert tiny.tokenizer.decode(tokens[:-1] if tokens[-1] in tiny.eos_token_ids else tokens) == "ok"
