"""The knowledge section of a prompt: after the system prompt (which stays the prefix the
cache reuses), before the history; passages fit the budget, the lowest-ranked dropped
first; the grounding instruction is there whenever the tenant has knowledge on."""

from __future__ import annotations

import pytest

from inference.text.prompting import (
    KNOWLEDGE_INSTRUCTION,
    KNOWLEDGE_NONE,
    PromptTooLong,
    build_prompt,
    count_tokens,
)

SYSTEM = "You are the support assistant of Demo Co."
PASSAGES = [f"Article {i} › Section\n" + " ".join([f"fact{i}"] * 40) for i in range(1, 6)]
HISTORY = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
           {"role": "user", "content": "I was charged twice."}]


def render(tokenizer, ids) -> str:
    return tokenizer.decode(ids)


def test_the_system_prompt_comes_first_then_the_knowledge_then_the_history(tokenizer):
    result = build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY, max_prompt_tokens=2000,
                          knowledge=PASSAGES[:2])
    text = render(tokenizer, result.token_ids)
    assert result.knowledge_used == 2
    at = [text.index(s) for s in (SYSTEM, KNOWLEDGE_INSTRUCTION, "[1] Article 1", "[2] Article 2", "Hello! How",
                                  "I was charged twice.")]
    assert at == sorted(at)
    assert "[3]" not in text


def test_every_prompt_of_a_tenant_starts_with_the_same_tokens_whatever_was_retrieved(tokenizer):
    def ids(knowledge, history):
        return build_prompt(tokenizer, system_prompt=SYSTEM, history=history, max_prompt_tokens=2000,
                            knowledge=knowledge).token_ids

    prompts = [ids(PASSAGES[:2], HISTORY), ids(PASSAGES[3:], HISTORY[-1:]), ids([], HISTORY)]
    # SmolLM2's template: the system message's head, the tenant's prompt, the instruction.
    head = tokenizer.encode(f"<|im_start|>system\n{SYSTEM}\n\n{KNOWLEDGE_INSTRUCTION}\n\nHelp-centre articles:",
                            add_special_tokens=False)
    for p in prompts:
        shared = next((i for i, (x, y) in enumerate(zip(p, prompts[0], strict=False)) if x != y), len(p))
        assert shared >= len(head) - 1  # at most the last token merges with what follows


def test_passages_are_dropped_lowest_ranked_first_to_fit_the_budget(tokenizer):
    full = build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY[-1:], max_prompt_tokens=4000,
                        knowledge=PASSAGES)
    assert full.knowledge_used == 5
    per_passage = count_tokens(tokenizer, PASSAGES[0])
    budget = full.n_tokens - 2 * per_passage  # room for three
    fitted = build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY[-1:], max_prompt_tokens=budget,
                          knowledge=PASSAGES, knowledge_share=1.0)
    assert fitted.knowledge_used == 3 and fitted.n_tokens <= budget
    text = render(tokenizer, fitted.token_ids)
    assert "fact1" in text and "fact3" in text and "fact4" not in text and "fact5" not in text
    assert SYSTEM in text and "I was charged twice." in text


def test_passages_take_at_most_their_share_and_leave_the_rest_to_the_history(tokenizer):
    long_history = []
    for i in range(30):
        long_history += [{"role": "user", "content": f"question {i} " * 10}, {"role": "assistant", "content": f"answer {i} " * 10}]
    long_history.append({"role": "user", "content": "And now?"})
    result = build_prompt(tokenizer, system_prompt=SYSTEM, history=long_history, max_prompt_tokens=600,
                          knowledge=PASSAGES, knowledge_share=0.5)
    assert result.n_tokens <= 600
    assert 1 <= result.knowledge_used < 5  # some passages, not all: half the budget is theirs
    assert result.dropped_turns > 0
    assert "question 29" in render(tokenizer, result.token_ids)  # the newest history is kept


def test_with_knowledge_on_and_nothing_retrieved_the_instruction_still_says_to_not_guess(tokenizer):
    text = render(tokenizer, build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY[-1:],
                                          max_prompt_tokens=1000, knowledge=[]).token_ids)
    assert KNOWLEDGE_INSTRUCTION in text and KNOWLEDGE_NONE in text
    assert "say that you do not know" in KNOWLEDGE_INSTRUCTION


def test_with_knowledge_off_the_prompt_is_as_before(tokenizer):
    off = build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY, max_prompt_tokens=1000)
    assert KNOWLEDGE_INSTRUCTION not in render(tokenizer, off.token_ids) and off.knowledge_used == 0


def test_a_budget_too_small_for_the_system_prompt_and_message_raises(tokenizer):
    with pytest.raises(PromptTooLong):
        build_prompt(tokenizer, system_prompt=SYSTEM, history=HISTORY[-1:], max_prompt_tokens=40, knowledge=PASSAGES)
