"""Streamed text equals the full decode, never shows a broken character, and spaces right."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

from inference.text.detokenize import IncrementalDetokenizer

TEXTS = {
    "ascii": "Hello, world! How are you today? I'm fine -- thanks.",
    "accented": "Ça va ? Élève naïve, café crème, déjà vu à Zürich; ¿Qué tal, señor?",
    "emoji": "Great job 🎉👍🏽 see you soon 😀! Family: 👨‍👩‍👧",
    "cjk": "你好世界，今天天气很好。日本語のテキストも大丈夫です。한국어도요.",
    "whitespace": "a  b\n\n   c\td \n",
}


@pytest.fixture(scope="module")
def sentencepiece_tokenizer():
    """A Llama-style tokenizer built in memory: "▁" marks a space, bytes fall back to
    <0xNN> tokens, and the decoder strips the first leading space."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for word in ["▁Hello", "▁world", ",", "▁how", "▁are", "▁you", "?", "▁", "▁ok"]:
        vocab[word] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def stream(tokenizer, ids, **kwargs) -> list[str]:
    detok = IncrementalDetokenizer(tokenizer, **kwargs)
    return [detok.push(i) for i in ids] + [detok.flush()]


def raw_decode(tokenizer, ids, **kwargs) -> str:
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False, **kwargs)


@pytest.mark.parametrize("name", list(TEXTS))
def test_increments_concatenate_to_the_full_decode(tokenizer, name):
    ids = tokenizer.encode(TEXTS[name], add_special_tokens=False)
    increments = stream(tokenizer, ids)
    # Raw decode: the default clean-up would rewrite the French "va ?" to "va?".
    assert "".join(increments) == raw_decode(tokenizer, ids) == TEXTS[name]
    assert not any("\ufffd" in piece for piece in increments)
    assert increments[-1] == ""  # nothing was left held back


@pytest.mark.parametrize("name", ["emoji", "cjk"])
def test_multibyte_characters_are_held_back_until_complete(tokenizer, name):
    ids = tokenizer.encode(TEXTS[name], add_special_tokens=False)
    # The point of the exercise: one token at a time these texts decode to broken bytes.
    assert any("\ufffd" in tokenizer.decode([i]) for i in ids)
    increments = stream(tokenizer, ids)
    assert "" in increments[:-1]  # some token completed no character and was held
    assert "".join(increments) == TEXTS[name]


def test_a_sequence_cut_mid_character_flushes_what_the_model_produced(tokenizer):
    ids = tokenizer.encode("ok 😀", add_special_tokens=False)[:-1]
    detok = IncrementalDetokenizer(tokenizer)
    pushed = [detok.push(i) for i in ids]
    tail = detok.flush()
    assert not any("\ufffd" in piece for piece in pushed)
    assert tail.endswith("\ufffd")
    assert "".join(pushed) + tail == raw_decode(tokenizer, ids)


def test_prompt_context_is_used_but_never_emitted(tokenizer):
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=True
    )
    generated = tokenizer.encode(" Sure thing: café ☕ 你好", add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer, prompt_token_ids=prompt)
    text = "".join(detok.push(i) for i in generated) + detok.flush()
    full = raw_decode(tokenizer, prompt + generated, skip_special_tokens=True)
    assert text == full[len(raw_decode(tokenizer, prompt, skip_special_tokens=True)) :]
    assert text == " Sure thing: café ☕ 你好"
    assert detok.token_ids == generated and detok.text == text


def test_special_tokens_are_skipped_unless_asked_for(tokenizer):
    ids = tokenizer.encode("Done.", add_special_tokens=False) + [tokenizer.eos_token_id]
    assert "".join(stream(tokenizer, ids)) == "Done."
    kept = "".join(stream(tokenizer, ids, skip_special_tokens=False))
    assert kept == "Done." + tokenizer.eos_token


def test_spaces_before_punctuation_are_kept_as_generated(tokenizer):
    # decode()'s default clean-up would turn " ." into "." after the space was streamed.
    ids = tokenizer.encode("x . y , z ?", add_special_tokens=False)
    assert "".join(stream(tokenizer, ids)) == raw_decode(tokenizer, ids) == "x . y , z ?"


def test_sentencepiece_spaces_come_out_right(sentencepiece_tokenizer):
    tok = sentencepiece_tokenizer
    ids = tok.convert_tokens_to_ids(["▁Hello", ",", "▁how", "▁are", "▁you", "?", "▁world"])
    # Token by token, the decoder strips every token's leading space.
    assert "".join(tok.decode([i]) for i in ids) == "Hello,howareyou?world"
    increments = stream(tok, ids)
    assert "".join(increments) == tok.decode(ids) == "Hello, how are you? world"
    assert increments[2] == " how"


def test_sentencepiece_byte_fallback_is_held_back(sentencepiece_tokenizer):
    tok = sentencepiece_tokenizer
    pieces = ["▁ok", "▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "▁world"]
    ids = tok.convert_tokens_to_ids(pieces)
    increments = stream(tok, ids)
    assert increments[2:5] == ["", "", ""]
    assert increments[5] == "😀"
    assert "".join(increments) == tok.decode(ids) == "ok 😀 world"
