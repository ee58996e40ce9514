"""Turning generated token ids into text as they arrive, one increment per token.

This module owns the token → text step of streaming. Decoding tokens one at a time is
wrong twice over: a multi-byte UTF-8 character (emoji, CJK, many accented letters) can
span several byte-level tokens, and SentencePiece/BPE decoders drop or add a leading
space depending on where a decode starts. So, as vLLM and TGI do, each step decodes a
short window twice — from `prefix_offset` up to the last emitted token, and up to the new
one — and emits the difference; while the window ends in U+FFFD (an incomplete UTF-8
sequence), the text is held back until the character completes.

The output is the tokenizer's raw text: `clean_up_tokenization_spaces` (an old
English-only heuristic that rewrites " ." to ".") is off, because applying it to windows
could drop characters already emitted. Concatenated increments then equal
`tokenizer.decode(ids, skip_special_tokens=..., clean_up_tokenization_spaces=False)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REPLACEMENT_CHAR = "\ufffd"
# How many prompt tokens the first window reaches back: enough for the decoder to see
# the context that decides the first generated token's leading space.
PROMPT_CONTEXT_TOKENS = 5


class IncrementalDetokenizer:
    """Streams the text of generated tokens; one instance per sequence.

    `prompt_token_ids` give the first window its context (they are never emitted).
    """

    def __init__(
        self,
        tokenizer: Any,
        prompt_token_ids: Sequence[int] | None = None,
        *,
        skip_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self._ids: list[int] = list(prompt_token_ids or ())
        self._n_prompt = len(self._ids)
        # Window start: decoded only as context, its text was emitted before.
        self._prefix_offset = max(self._n_prompt - PROMPT_CONTEXT_TOKENS, 0)
        # Tokens before this have been emitted as text.
        self._read_offset = self._n_prompt
        self._emitted: list[str] = []

    @property
    def token_ids(self) -> list[int]:
        """The generated ids pushed so far (prompt excluded)."""
        return self._ids[self._n_prompt :]

    @property
    def text(self) -> str:
        """All text emitted so far."""
        return "".join(self._emitted)

    def push(self, token_id: int) -> str:
        """Add one generated token; returns the text it completes ("" while held back)."""
        self._ids.append(int(token_id))
        prefix_text, full_text = self._window()
        if len(full_text) <= len(prefix_text) or full_text.endswith(REPLACEMENT_CHAR):
            # Nothing visible yet (a special token skipped) or a character still
            # incomplete: wait for more tokens rather than emit a broken character.
            return ""
        return self._advance(full_text[len(prefix_text) :])

    def flush(self) -> str:
        """End of sequence: return whatever is held back, even an incomplete character
        (as U+FFFD, which is then what the model really produced)."""
        prefix_text, full_text = self._window()
        return self._advance(full_text[len(prefix_text) :])

    def _window(self) -> tuple[str, str]:
        window = self._ids[self._prefix_offset :]
        split = self._read_offset - self._prefix_offset
        return self._decode(window[:split]), self._decode(window)

    def _advance(self, delta: str) -> str:
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        if delta:
            self._emitted.append(delta)
        return delta

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return self.tokenizer.decode(
            ids,
            skip_special_tokens=self.skip_special_tokens,
            clean_up_tokenization_spaces=False,
        )
