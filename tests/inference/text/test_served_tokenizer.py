"""The web and CPU tiers' tokenizer (`tokenizers` + a Jinja chat template, no
transformers) gives what transformers gives on the default model, token for token:
encodings, offsets, decodes, rendered chat templates and whole prompts."""

from __future__ import annotations

import pytest

from inference.text.prompting import build_prompt

from .conftest import MODEL_DIR

TEXTS = [
    "Hello world",
    "",
    " ",
    "  leading spaces,\n\ttabs and\r\nWindows line ends  ",
    "naïve café — ünïcödé 日本語 한국어 🤖🎉 ﬁ",
    "Prices: $1,234.56 (or €1.234,56); 10% off — don't miss it's best!",
    "<|im_start|>user\nspecial tokens typed by a visitor<|im_end|>\n",
    "<script>alert('x')</script> {{ jinja }} {% raw %}",
    "a" * 300,
]

SYSTEM = "You are the support assistant of Acme Widgets. Answer briefly."
CONVERSATIONS = {
    "one user message": [{"role": "user", "content": "Hi!"}],
    "a system message": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is my order?"}],
    "several turns": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "I was charged twice — can you refund one?"},
        {"role": "assistant", "content": "Sure. Which order number?"},
        {"role": "user", "content": "#4512, placed on 3 May"},
    ],
    "several turns without a system message": [
        {"role": "user", "content": "¿Hablas español?"},
        {"role": "assistant", "content": "Sí."},
        {"role": "user", "content": "日本語は？"},
    ],
    "an assistant greeting first": [
        {"role": "assistant", "content": "Hi, I'm the bot."},
        {"role": "user", "content": "Hi bot"},
    ],
    "empty and markup contents": [
        {"role": "system", "content": ""},
        {"role": "user", "content": "<|im_end|> {{ messages }} \n\n  "},
    ],
}


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("special", [False, True])
def test_encoding_matches_transformers(served_tokenizer, hf_tokenizer, text, special):
    assert served_tokenizer.encode(text, add_special_tokens=special) == hf_tokenizer.encode(
        text, add_special_tokens=special)


def test_batch_encoding_and_offsets_match_transformers(served_tokenizer, hf_tokenizer):
    served = served_tokenizer(TEXTS, add_special_tokens=False, return_offsets_mapping=True)
    hf = hf_tokenizer(TEXTS, add_special_tokens=False, return_offsets_mapping=True)
    assert served["input_ids"] == hf["input_ids"]
    assert [list(map(tuple, o)) for o in served["offset_mapping"]] == [list(map(tuple, o)) for o in hf["offset_mapping"]]


@pytest.mark.parametrize("skip", [False, True])
def test_decoding_matches_transformers_with_its_space_clean_up(served_tokenizer, hf_tokenizer, skip):
    ids = hf_tokenizer.apply_chat_template(CONVERSATIONS["several turns"], add_generation_prompt=True)
    ids += hf_tokenizer.encode(" ".join(TEXTS), add_special_tokens=False) + [hf_tokenizer.eos_token_id]
    assert served_tokenizer.decode(ids, skip_special_tokens=skip) == hf_tokenizer.decode(ids, skip_special_tokens=skip)
    assert served_tokenizer.decode(ids, clean_up_tokenization_spaces=False) == hf_tokenizer.decode(
        ids, clean_up_tokenization_spaces=False)


def test_special_tokens_are_the_ones_transformers_reports(served_tokenizer, hf_tokenizer):
    assert served_tokenizer.special_tokens == hf_tokenizer.special_tokens_map
    assert (served_tokenizer.bos_token_id, served_tokenizer.eos_token_id) == (
        hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id)


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_chat_template_renders_as_transformers_does(served_tokenizer, hf_tokenizer, name, generation_prompt):
    messages = CONVERSATIONS[name]
    text = served_tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)
    assert text == hf_tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)
    ids = served_tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
    assert ids == hf_tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)


def history(n: int) -> list[dict]:
    turns = []
    for i in range(n):
        turns += [{"role": "user", "content": f"Question {i}: what about widget {i}, and its price?"},
                  {"role": "assistant", "content": f"Widget {i} costs {i * 3} euros — it's blue."}]
    return [*turns, {"role": "user", "content": "And shipping to Zürich?"}]


PASSAGES = [f"Article {i} › Shipping\n" + " ".join([f"fact{i}"] * 30) for i in range(1, 5)]


@pytest.mark.parametrize(("system_prompt", "turns", "limit", "knowledge"), [
    (SYSTEM, 3, 2048, None),
    (None, 3, 2048, None),
    (SYSTEM, 30, 300, None),
    (SYSTEM, 4, 2048, PASSAGES),
    (SYSTEM, 10, 250, PASSAGES),
    ("", 0, 2048, []),
])
def test_cpu_tier_prompts_are_token_for_token_those_of_transformers(
        served_tokenizer, hf_tokenizer, system_prompt, turns, limit, knowledge):
    kwargs = dict(system_prompt=system_prompt, history=history(turns), max_prompt_tokens=limit, knowledge=knowledge)
    served, hf = build_prompt(served_tokenizer, **kwargs), build_prompt(hf_tokenizer, **kwargs)
    assert served == hf
    assert served.n_tokens <= limit


def test_the_process_tokenizer_is_the_served_one_for_the_configured_model(settings):
    from inference.text import tokenizer as module

    settings.TANDEM_MODEL = str(MODEL_DIR)
    module._tokenizer = None
    try:
        assert isinstance(module.get_tokenizer(), module.ServedTokenizer)
        assert module.get_tokenizer() is module.get_tokenizer()
    finally:
        module._tokenizer = None


def test_a_model_without_tokenizer_json_is_a_clear_error(tmp_path):
    from inference.text.tokenizer import ServedTokenizer

    with pytest.raises(FileNotFoundError, match="tokenizer.json does not exist"):
        ServedTokenizer.from_dir(tmp_path)
