"""Prompts follow the chat template and fit the window by leaving out the oldest exchanges."""

from __future__ import annotations

import copy

import pytest

from inference.text.prompting import PromptTooLong, build_prompt, count_tokens, fallback_text

SYSTEM = "You are the support assistant of Acme Widgets. Answer briefly."


def conversation(n_exchanges: int, new_message: str = "What is my order status?") -> list[dict]:
    history = []
    for i in range(n_exchanges):
        history.append(
            {"role": "user", "content": f"Question number {i}: tell me about widget {i}."}
        )
        history.append({"role": "assistant", "content": f"Answer number {i}: widget {i} is blue."})
    history.append({"role": "user", "content": new_message})
    return history


def template_ids(tokenizer, messages) -> list[int]:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)


def test_whole_conversation_is_the_chat_template_when_it_fits(tokenizer):
    history = conversation(3)
    result = build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=2048)
    expected = template_ids(tokenizer, [{"role": "system", "content": SYSTEM}, *history])
    assert result.token_ids == expected
    assert result.n_tokens == len(expected)
    assert result.dropped_turns == 0
    assert tokenizer.decode(result.token_ids).endswith("<|im_start|>assistant\n")


def test_without_a_system_prompt_the_template_decides(tokenizer):
    history = conversation(0)
    result = build_prompt(tokenizer, system_prompt=None, history=history, max_prompt_tokens=2048)
    assert result.token_ids == template_ids(tokenizer, history)


def test_oldest_exchanges_are_dropped_to_fit(tokenizer):
    history = conversation(10)
    full = build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=4096)
    limit = full.n_tokens - 60
    result = build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=limit)
    text = tokenizer.decode(result.token_ids)
    assert result.n_tokens == len(result.token_ids) <= limit
    assert result.dropped_turns > 0 and result.dropped_turns % 2 == 0
    assert SYSTEM in text and "What is my order status?" in text
    assert "Question number 0:" not in text and "Answer number 9:" in text
    kept = history[result.dropped_turns :]
    assert kept[0]["role"] == "user"  # roles still alternate from the start
    assert result.token_ids == template_ids(
        tokenizer, [{"role": "system", "content": SYSTEM}, *kept]
    )
    # As little as possible was dropped: one more exchange would not have fitted.
    one_more = history[result.dropped_turns - 2 :]
    assert len(template_ids(tokenizer, [{"role": "system", "content": SYSTEM}, *one_more])) > limit


def test_at_the_limit_only_the_system_prompt_and_new_message_remain(tokenizer):
    history = conversation(4)
    minimal = template_ids(tokenizer, [{"role": "system", "content": SYSTEM}, history[-1]])
    result = build_prompt(
        tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=len(minimal)
    )
    assert result.token_ids == minimal
    assert result.dropped_turns == 8


def test_a_leading_assistant_greeting_is_dropped_on_its_own(tokenizer):
    history = [
        {"role": "assistant", "content": "Hi! How can I help you today? " * 5},
        *conversation(1),
    ]
    system = [{"role": "system", "content": SYSTEM}]
    limit = len(template_ids(tokenizer, system + history[1:]))
    result = build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=limit)
    assert result.dropped_turns == 1
    assert result.token_ids == template_ids(tokenizer, system + history[1:])


def test_too_long_even_without_history_raises_with_the_counts(tokenizer):
    long_message = "Please help me with my order. " * 50
    history = conversation(2, new_message=long_message)
    with pytest.raises(PromptTooLong) as caught:
        build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=100)
    err = caught.value
    assert err.max_prompt_tokens == 100
    assert err.message_tokens == count_tokens(tokenizer, long_message) > 100
    assert err.system_tokens == count_tokens(tokenizer, SYSTEM)
    assert err.n_tokens > err.system_tokens + err.message_tokens  # template overhead
    assert "limit is 100" in str(err)


def test_count_tokens_counts_no_special_tokens(tokenizer):
    assert count_tokens(tokenizer, "Hello world") == 2
    assert count_tokens(tokenizer, "") == 0


def test_tokenizer_without_a_chat_template_uses_the_plain_format(tokenizer):
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    history = conversation(1, new_message="Where is it?")
    result = build_prompt(plain, system_prompt="Be brief.", history=history, max_prompt_tokens=512)
    expected = (
        "System: Be brief.\n\nUser: Question number 0: tell me about widget 0.\n\n"
        "Assistant: Answer number 0: widget 0 is blue.\n\nUser: Where is it?\n\nAssistant:"
    )
    assert fallback_text([{"role": "system", "content": "Be brief."}, *history]) == expected
    assert tokenizer.decode(result.token_ids, skip_special_tokens=True) == expected
    squeezed = build_prompt(plain, system_prompt="Be brief.", history=history, max_prompt_tokens=20)
    assert squeezed.dropped_turns == 2 and squeezed.n_tokens <= 20


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([], "at least the new user message"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            "must be the new user",
        ),
        ([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}], "system_prompt"),
        ([{"role": "user", "content": None}], "must be a string"),
    ],
)
def test_malformed_history_is_rejected(tokenizer, history, message):
    with pytest.raises(ValueError, match=message):
        build_prompt(tokenizer, system_prompt=None, history=history, max_prompt_tokens=100)
