"""Turning a conversation into prompt token ids that fit the model's context window.

This module owns prompt construction for the engine: the chat template (or a plain
fallback for tokenizers without one), the knowledge section, and what is left out when
the conversation is longer than the window. The caller (the CPU tier) supplies the
tenant's system prompt, the passages retrieved for the message (best first) and the
history; what a tenant, an article or a message *is* is not known here.

The tokenizer is the CPU tier's `inference.text.tokenizer.get_tokenizer()`: the model's
tokenizer.json through the `tokenizers` library and its chat template rendered by
`inference.text.chat_template`, the same renderer the web tier counts with, so both
tiers agree; a transformers tokenizer gives the same ids (tested token for token).

Layout: one system message holding the system prompt, then (when the tenant has
knowledge on) the grounding instruction and the knowledge section, then the history.
Everything up to the first passage is the same for every request of a tenant, so it
stays the prefix the prefix cache reuses.

Truncation policy: the system prompt and the newest user message are always kept. Then
passages, in rank order, while they fit within `knowledge_share` of the budget and the
budget itself: the lowest-ranked go first. Then the history, the oldest first, a whole
exchange at a time (a user message together with the assistant replies that follow it),
so the kept history still starts with a user turn and roles keep alternating as
templates expect.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HISTORY_ROLES = ("user", "assistant")

# The format used when the tokenizer has no chat template: plain labelled turns,
# separated by blank lines, ending with an open "Assistant:" for the model to continue.
FALLBACK_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}
FALLBACK_SEPARATOR = "\n\n"

# What a tenant with knowledge on gets after its system prompt, whatever was retrieved:
# a constant, so it belongs to the cacheable prefix.
KNOWLEDGE_INSTRUCTION = (
    "Answer the customer's question using the help-centre articles below. If they do not "
    "answer it, say that you do not know and offer to pass the question to the support team; "
    "never guess at policies, prices or dates."
)
KNOWLEDGE_HEADER = "Help-centre articles:"
# The widget's languages (widget/src/app/i18n.js) by their tags: the visitor's, which the
# assistant is asked to answer in.
LANGUAGES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian",
             "pt": "Portuguese", "nl": "Dutch"}
KNOWLEDGE_NONE = "(none match this message)"
# Of the prompt budget, the most the passages may take: the rest is for the history.
KNOWLEDGE_SHARE = 0.6


@dataclass(frozen=True)
class PromptResult:
    token_ids: list[int]  # what prefill runs over, special tokens included
    n_tokens: int  # len(token_ids)
    # History messages left out to fit: whole exchanges, oldest first; 0 when all fit.
    dropped_turns: int
    # Passages kept, the best-ranked first (those after them were dropped to fit).
    knowledge_used: int = 0


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


def language_instruction(locale: str) -> str:
    """The system prompt's line asking for the visitor's language; "" for a tag it does
    not know (the model then answers as the conversation goes)."""
    name = LANGUAGES.get((locale or "").split("-")[0].lower())
    return f"The customer's language is {name}: always answer in {name}." if name else ""


def knowledge_system_prompt(system_prompt: str | None, passages: Sequence[str]) -> str:
    """The system message of a tenant with knowledge on: its system prompt, the grounding
    instruction, then the numbered passages (or a line saying none matched)."""
    lines = [KNOWLEDGE_HEADER]
    if passages:
        lines += [f"[{i}] {p}" for i, p in enumerate(passages, 1)]
    else:
        lines.append(KNOWLEDGE_NONE)
    head = f"{system_prompt}\n\n{KNOWLEDGE_INSTRUCTION}" if system_prompt else KNOWLEDGE_INSTRUCTION
    return head + "\n\n" + "\n\n".join(lines)


def build_prompt(
    tokenizer: Any,
    *,
    system_prompt: str | None,
    history: Sequence[dict[str, str]],
    max_prompt_tokens: int,
    knowledge: Sequence[str] | None = None,
    knowledge_share: float = KNOWLEDGE_SHARE,
) -> PromptResult:
    """Render `history` (oldest first, ending with the new user message) as prompt ids.

    `system_prompt` None or "" means no system message (a template may then add its own
    default, as SmolLM2's does). `knowledge`: None when the tenant has it off; else the
    retrieved passages, best first (possibly none), which get the grounding instruction
    and as many passages as fit. Raises `PromptTooLong` when nothing can be dropped to
    fit, and `ValueError` for malformed history.
    """
    if max_prompt_tokens <= 0:
        raise ValueError(f"max_prompt_tokens must be positive, got {max_prompt_tokens}")
    _check_history(history)
    exchanges = _exchanges(history)
    # Only the newest exchange is fixed: it is the new user message alone, because an
    # exchange starts at every user message and the history ends with one.
    newest = exchanges[-1]

    used = 0
    if knowledge is not None:
        used = _passages_that_fit(tokenizer, system_prompt, knowledge, newest, max_prompt_tokens,
                                  knowledge_share, history[-1]["content"])

    def system_for(n: int) -> str | None:
        return system_prompt if knowledge is None else knowledge_system_prompt(system_prompt, knowledge[:n])

    system = system_for(used)

    def encode_from(k: int) -> list[int]:
        kept = [m for exchange in exchanges[k:] for m in exchange]
        return _encode(tokenizer, system, kept)

    ids = encode_from(0)
    if len(ids) <= max_prompt_tokens:
        return PromptResult(token_ids=ids, n_tokens=len(ids), dropped_turns=0, knowledge_used=used)
    last = len(exchanges) - 1
    fitted = encode_from(last) if last > 0 else ids
    # The passages were counted one by one; the render is what counts (a merge at a
    # boundary can cost a token): drop from the lowest rank until the newest message fits.
    while len(fitted) > max_prompt_tokens and used > 0:
        used -= 1
        system = system_for(used)
        fitted = encode_from(last)
    if len(fitted) > max_prompt_tokens:
        raise PromptTooLong(
            n_tokens=len(fitted),
            max_prompt_tokens=max_prompt_tokens,
            system_tokens=count_tokens(tokenizer, system) if system else 0,
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
    return PromptResult(token_ids=fitted, n_tokens=len(fitted), dropped_turns=dropped, knowledge_used=used)


def _passages_that_fit(tokenizer: Any, system_prompt: str | None, passages: Sequence[str],
                       newest: list[dict[str, str]], max_prompt_tokens: int, share: float,
                       message: str) -> int:
    """How many passages, from the best, fit beside the system prompt and the newest
    message, within `share` of the budget. Stops at the first that does not: a
    lower-ranked passage never takes the place of a higher-ranked one."""
    fixed = _encode(tokenizer, knowledge_system_prompt(system_prompt, []), newest)
    if len(fixed) > max_prompt_tokens:
        raise PromptTooLong(
            n_tokens=len(fixed), max_prompt_tokens=max_prompt_tokens,
            system_tokens=count_tokens(tokenizer, knowledge_system_prompt(system_prompt, [])),
            message_tokens=count_tokens(tokenizer, message),
        )
    room = min(max_prompt_tokens - len(fixed), int(max_prompt_tokens * share))
    spent = 0
    for i, cost in enumerate(_passage_costs(tokenizer, passages)):
        if spent + cost > room:
            return i
        spent += cost
    return len(passages)


def _passage_costs(tokenizer: Any, passages: Sequence[str]) -> list[int]:
    """Tokens each passage adds to the section (with its number and the blank line before
    it). One encode of them all where the tokenizer reports offsets (fast tokenizers),
    else one each."""
    pieces = [f"\n\n[{i}] {p}" for i, p in enumerate(passages, 1)]
    if not pieces:
        return []
    try:
        offsets = tokenizer("".join(pieces), add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    except (NotImplementedError, TypeError, KeyError, ValueError):
        return [count_tokens(tokenizer, p) for p in pieces]
    starts = [start for start, _ in offsets]
    costs, end, before = [], 0, 0
    for piece in pieces:
        end += len(piece)
        upto = bisect.bisect_left(starts, end)  # tokens that start inside this piece or before
        costs.append(upto - before)
        before = upto
    return costs


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
