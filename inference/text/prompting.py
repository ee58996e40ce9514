"""Turning a conversation into prompt token ids that fit the model's context window.

This module owns prompt construction for the engine: the chat template (or a plain
fallback for tokenizers without one), and which history is left out when the
conversation is longer than the window. The caller (the CPU tier) supplies the tenant's
system prompt and the history; what a tenant or message *is* is not known here.

Truncation policy: the system prompt and the newest user message are always kept; the
oldest history goes first, a whole exchange at a time (a user message together with the
assistant replies that follow it), so the kept history still starts with a user turn and
roles keep alternating as templates expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HISTORY_ROLES = ("user", "assistant")

# The format used when the tokenizer has no chat template: plain labelled turns,
# separated by blank lines, ending with an open "Assistant:" for the model to continue.
FALLBACK_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}
FALLBACK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class PromptResult:
    token_ids: list[int]  # what prefill runs over, special tokens included
    n_tokens: int  # len(token_ids)
    # History messages left out to fit: whole exchanges, oldest first; 0 when all fit.
    dropped_turns: int


class PromptTooLong(ValueError):
    """Even the system prompt plus the newest message alone exceed the limit."""

    def __init__(
        self, *, n_tokens: int, max_prompt_tokens: int, system_tokens: int, message_tokens: int
    ):
        self.n_tokens = n_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.system_tokens = system_tokens
        self.message_tokens = message_tokens
        super().__init__(
            f"prompt needs {n_tokens} tokens with only the system prompt ({system_tokens} tokens) "
            f"and the newest message ({message_tokens} tokens); the limit is {max_prompt_tokens}"
        )


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens `text` takes on its own, without BOS or other special tokens."""
    return len(tokenizer.encode(text, add_special_tokens=False))


def build_prompt(
    tokenizer: Any,
    *,
    system_prompt: str | None,
    history: Sequence[dict[str, str]],
    max_prompt_tokens: int,
) -> PromptResult:
    """Render `history` (oldest first, ending with the new user message) as prompt ids.

    `system_prompt` None or "" means no system message (a template may then add its own
    default, as SmolLM2's does). Raises `PromptTooLong` when nothing can be dropped to
    fit, and `ValueError` for malformed history.
    """
    if max_prompt_tokens <= 0:
        raise ValueError(f"max_prompt_tokens must be positive, got {max_prompt_tokens}")
    _check_history(history)
    exchanges = _exchanges(history)
    # Only the newest exchange is fixed: it is the new user message alone, because an
    # exchange starts at every user message and the history ends with one.

    def encode_from(k: int) -> list[int]:
        kept = [m for exchange in exchanges[k:] for m in exchange]
        return _encode(tokenizer, system_prompt, kept)

    ids = encode_from(0)
    if len(ids) <= max_prompt_tokens:
        return PromptResult(token_ids=ids, n_tokens=len(ids), dropped_turns=0)
    last = len(exchanges) - 1
    fitted = encode_from(last) if last > 0 else ids
    if len(fitted) > max_prompt_tokens:
        raise PromptTooLong(
            n_tokens=len(fitted),
            max_prompt_tokens=max_prompt_tokens,
            system_tokens=count_tokens(tokenizer, system_prompt) if system_prompt else 0,
            message_tokens=count_tokens(tokenizer, history[-1]["content"]),
        )
    # Binary search for the fewest exchanges to drop: dropping k fails, dropping `best`
    # fits. Length only grows with kept history, so this finds the longest prompt that
    # fits in O(log n) renders instead of one render per exchange.
    lo, best = 0, last
    while best - lo > 1:
        mid = (lo + best) // 2
        candidate = encode_from(mid)
        if len(candidate) <= max_prompt_tokens:
            best, fitted = mid, candidate
        else:
            lo = mid
    dropped = sum(len(exchange) for exchange in exchanges[:best])
    return PromptResult(token_ids=fitted, n_tokens=len(fitted), dropped_turns=dropped)


def _check_history(history: Sequence[dict[str, str]]) -> None:
    if not history:
        raise ValueError("history must hold at least the new user message")
    for i, message in enumerate(history):
        role, content = message.get("role"), message.get("content")
        if role not in HISTORY_ROLES:
            hint = " (pass it as system_prompt)" if role == "system" else ""
            raise ValueError(
                f"history[{i}] has role {role!r}; expected one of {HISTORY_ROLES}{hint}"
            )
        if not isinstance(content, str):
            raise ValueError(f"history[{i}] content must be a string, got {type(content).__name__}")
    if history[-1]["role"] != "user":
        raise ValueError("the last history message must be the new user message")


def _exchanges(history: Sequence[dict[str, str]]) -> list[list[dict[str, str]]]:
    """Split history at every user message; replies before the first user message (a
    greeting) form an exchange of their own."""
    exchanges: list[list[dict[str, str]]] = []
    for message in history:
        if message["role"] == "user" or not exchanges:
            exchanges.append([])
        exchanges[-1].append({"role": message["role"], "content": message["content"]})
    return exchanges


def _encode(tokenizer: Any, system_prompt: str | None, messages: list[dict[str, str]]) -> list[int]:
    if system_prompt:
        messages = [{"role": "system", "content": system_prompt}, *messages]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # The template writes its own special tokens; adding BOS again would double it
        # (this is also what apply_chat_template(tokenize=True) does).
        return list(tokenizer.encode(text, add_special_tokens=False))
    return list(tokenizer.encode(fallback_text(messages), add_special_tokens=True))


def fallback_text(messages: Sequence[dict[str, str]]) -> str:
    """The no-template format, e.g. "System: Be brief.\\n\\nUser: Hi\\n\\nAssistant:"."""
    turns = [f"{FALLBACK_LABELS[m['role']]}: {m['content']}" for m in messages]
    turns.append(f"{FALLBACK_LABELS['assistant']}:")
    return FALLBACK_SEPARATOR.join(turns)
