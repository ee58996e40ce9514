"""The served model's tokenizer, for the tiers that count tokens without running the
model: the web tier (quota admission) and the CPU tier (building prompts). Loaded once
per process; no weights."""

from __future__ import annotations

import threading

from django.conf import settings

# Tokenizing a message alone can merge differently at its edges than inside the
# template; one token per message covers it, so the estimate stays an upper bound.
EDGE_MARGIN_PER_MESSAGE = 1


_lock = threading.Lock()
_tokenizer = None


def get_tokenizer():
    # A lock, not functools.cache: the first call imports transformers, and concurrent
    # first imports from several threads fail half-initialised.
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                from transformers import AutoTokenizer

                from ..engine.loader import resolve_model_dir

                _tokenizer = AutoTokenizer.from_pretrained(resolve_model_dir(settings.TANDEM_MODEL))
    return _tokenizer


_overhead: tuple[int, int] | None = None


def template_overhead() -> tuple[int, int]:
    """(fixed, per message): the tokens the model's chat template adds around messages,
    measured once on the real template rather than assumed (templates differ a lot)."""
    global _overhead
    if _overhead is None:
        tok = get_tokenizer()
        if not getattr(tok, "chat_template", None):
            _overhead = (8, 8)
        else:
            def rendered(n: int) -> int:
                msgs = [{"role": "system", "content": "x"}] + [
                    {"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(n)]
                return len(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True))

            x = len(tok("x", add_special_tokens=False)["input_ids"])
            one, three = rendered(1), rendered(3)
            per = (three - one) // 2 - x
            _overhead = (one - 2 * (x + per), per)
    return _overhead


def count_message_tokens(texts: list[str]) -> int:
    if not texts:
        return 0
    tok = get_tokenizer()
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    per = template_overhead()[1] + EDGE_MARGIN_PER_MESSAGE
    return sum(len(x) for x in ids) + per * len(texts)


def estimate_prompt_tokens(*, system_prompt: str, history: list[str], new: list[str], max_prompt_tokens: int) -> int:
    """What the CPU tier's prompt will cost, for the reservation made at admission: the
    system prompt and the new messages always count in full (they are never dropped);
    older history counts up to the prompt limit, since the CPU tier drops the oldest
    turns to fit it. The real count replaces this estimate when the request ends."""
    fixed = template_overhead()[0] + count_message_tokens([system_prompt, *new] if system_prompt else new)
    if fixed > max_prompt_tokens:
        return fixed
    return min(fixed + count_message_tokens(history), max_prompt_tokens)
