"""A token's log probabilities in OpenAI's shape, as a model worker writes them into the
token record of a reply's stream (the web tier forwards them as they are).

One entry of `choices[].logprobs.content`:
    {"token": str, "logprob": float, "bytes": [int, ...],
     "top_logprobs": [{"token", "logprob", "bytes"}, ...]}
`bytes` are the token's own UTF-8 bytes (a token may hold part of a character: its
`token` then shows the missing bytes as \\x escapes, and only the bytes of consecutive
tokens join into the character). The bytes come from llguidance's reading of the
model's tokenizer.json, the same one the grammar masks use, which knows byte-level,
SentencePiece and byte-fallback tokens alike.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..engine.grammar import llg_tokenizer_json
from ..engine.sampling import TokenLogprobs

_lock = threading.Lock()
_tables: dict[str, TokenBytes] = {}


class TokenBytes:
    """Each token id's bytes, read once per model directory and kept per id asked."""

    def __init__(self, model_dir: str | Path, vocab: int):
        import llguidance

        source = llg_tokenizer_json((Path(model_dir) / "tokenizer.json").read_text())
        self._tok = llguidance.LLTokenizer(source, n_vocab=vocab)
        self._bytes: dict[int, bytes] = {}

    def of(self, token_id: int) -> bytes:
        found = self._bytes.get(token_id)
        if found is None:
            found = self._bytes[token_id] = bytes(self._tok.decode_bytes([token_id]))
        return found

    def entry(self, token_id: int, logprob: float) -> dict:
        raw = self.of(token_id)
        return {"token": raw.decode("utf-8", errors="backslashreplace"), "logprob": logprob, "bytes": list(raw)}


def token_bytes(model_dir: str | Path, vocab: int) -> TokenBytes:
    """The process's table for a model directory (built on first use)."""
    key = str(model_dir)
    with _lock:
        table = _tables.get(key)
        if table is None:
            table = _tables[key] = TokenBytes(model_dir, vocab)
        return table


def logprobs_entry(table: TokenBytes, token_id: int, lp: TokenLogprobs) -> dict:
    """The OpenAI content entry of a sampled token."""
    return {**table.entry(token_id, lp.logprob),
            "top_logprobs": [table.entry(t, v) for t, v in lp.top]}
