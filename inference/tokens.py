"""The served model's tokenizer, for the tiers that count tokens without running the
model: the web tier (quota admission) and the CPU tier (building prompts). Loaded once
per process; no weights."""

from __future__ import annotations

import threading

from django.conf import settings

# Chat-template tokens around each message (<|im_start|>role\n … <|im_end|>\n).
TEMPLATE_TOKENS_PER_MESSAGE = 5


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

                from .engine.loader import resolve_model_dir

                _tokenizer = AutoTokenizer.from_pretrained(resolve_model_dir(settings.TANDEM_MODEL))
    return _tokenizer


def count_message_tokens(texts: list[str]) -> int:
    if not texts:
        return 0
    tok = get_tokenizer()
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    return sum(len(x) for x in ids) + TEMPLATE_TOKENS_PER_MESSAGE * len(texts)


def estimate_prompt_tokens(*, system_prompt: str, history: list[str], new: list[str], max_prompt_tokens: int) -> int:
    """What the CPU tier's prompt will cost, for the reservation made at admission: the
    system prompt and the new messages always count in full (they are never dropped);
    older history counts up to the prompt limit, since the CPU tier drops the oldest
    turns to fit it. The real count replaces this estimate when the request ends."""
    fixed = count_message_tokens([system_prompt, *new] if system_prompt else new)
    if fixed > max_prompt_tokens:
        return fixed
    return min(fixed + count_message_tokens(history), max_prompt_tokens)
