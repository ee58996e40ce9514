"""Grammar-constrained decoding: a row whose SamplingParams carry a grammar may only
sample tokens that keep its output inside that grammar (a JSON schema's language, a
tool call's shape).

Owns the matchers (llguidance's LLMatcher: a grammar's parse state over the tokens
produced so far) and the batched mask. llguidance was chosen over xgrammar by measuring
both on this project's default model (docs/api.md, "Structured outputs"): both mask a
step far below a decode step's time, and llguidance needs neither torch nor
transformers, so the web tier can check a schema with the same library the engine
enforces it with.

- Grammars: per engine, the model's tokenizer as llguidance sees it (built from
  tokenizer.json on the first constrained request) and a cache of compiled grammars, so
  a schema is compiled once and each sequence starts from a copy.
- A matcher's state is a function of the tokens produced so far: a sequence that
  arrives with tokens (a prefill's first token, a migrated reply's streamed ones) gets a
  matcher that has consumed them, so the state survives the hand-off and migration.
- mask_logits_: one bitmask row per constrained row per step, written by llguidance
  straight into a tensor, unpacked once and applied to those rows together; free rows
  in the same step are untouched.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

_CACHE_SIZE = 256  # compiled grammars kept per engine (one per distinct schema)


class GrammarError(ValueError):
    """A grammar llguidance cannot compile, or tokens it does not accept."""


class Grammars:
    def __init__(self, model_dir: str | Path, *, vocab: int, eos_ids: Iterable[int]):
        self.model_dir = Path(model_dir)
        self.vocab = vocab
        self.eos_ids = sorted(eos_ids)
        self._tokenizer = None
        self._compiled: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, model) -> Grammars:
        """For a loader.LoadedModel."""
        return cls(model.model_dir, vocab=model.model.shape.vocab, eos_ids=model.eos_token_ids)

    def _llg_tokenizer(self):
        import llguidance

        if self._tokenizer is None:
            source = llg_tokenizer_json((self.model_dir / "tokenizer.json").read_text())
            self._tokenizer = llguidance.LLTokenizer(source, n_vocab=self.vocab, eos_token=self.eos_ids)
        return self._tokenizer

    def matcher(self, grammar: str, tokens: Sequence[int] = ()):
        """A fresh matcher for `grammar` that has consumed `tokens` (the output so far)."""
        import llguidance

        with self._lock:
            pristine = self._compiled.get(grammar)
            if pristine is None:
                pristine = llguidance.LLMatcher(self._llg_tokenizer(), grammar, log_level=0)
                if pristine.is_error():
                    raise GrammarError(f"grammar does not compile: {pristine.get_error()}")
                self._compiled[grammar] = pristine
                if len(self._compiled) > _CACHE_SIZE:
                    self._compiled.popitem(last=False)
            else:
                self._compiled.move_to_end(grammar)
            m = pristine.deep_copy()
        if tokens and not m.consume_tokens([int(t) for t in tokens]):
            raise GrammarError(f"the output so far does not match its grammar: {m.get_error()}")
        return m


def llg_tokenizer_json(source: str) -> str:
    """tokenizer.json as llguidance must read it to know each token's bytes.

    A tokenizer converted from GGUF (the default model's) decodes with a Sequence of
    ByteFallback, Fuse, Replace and ByteLevel; llguidance takes such a Sequence for a
    SentencePiece one and reads a byte-level token such as "Ċ" (a newline) as the
    character itself, so a grammar let raw newlines into JSON strings. Byte-level
    pre-tokenization means byte-level tokens: the decoder is then plain ByteLevel."""
    data = json.loads(source)
    decoder = data.get("decoder") or {}
    if decoder.get("type") == "Sequence" and _has_byte_level(data.get("pre_tokenizer")):
        byte_level = [d for d in decoder.get("decoders", []) if d.get("type") == "ByteLevel"]
        if byte_level:
            data["decoder"] = byte_level[0]
            return json.dumps(data)
    return source


def _has_byte_level(part: dict | None) -> bool:
    if not part:
        return False
    if part.get("type") == "ByteLevel":
        return True
    return any(_has_byte_level(p) for p in part.get("pretokenizers", []))


def mask_logits_(logits: torch.Tensor, matchers: Sequence[object | None]) -> None:
    """Set to -inf, in place, every token a constrained row's grammar forbids next.
    `logits` [B, V] float32 and writable (sampling.adjusted_logits makes it so)."""
    rows = [i for i, m in enumerate(matchers) if m is not None]
    if not rows:
        return
    vocab = logits.shape[-1]
    words = (vocab + 31) // 32
    bitmask = torch.empty(len(rows), words, dtype=torch.int32)  # [R, W], bit j of word w: token 32w + j
    for j, r in enumerate(rows):
        matchers[r].unsafe_compute_mask_ptr(bitmask[j].data_ptr(), words * 4)
    # The inverted words unpacked: 1 where a token is forbidden, read as bool in place.
    forbid = np.unpackbits((~bitmask.numpy()).view(np.uint8), axis=1, bitorder="little")[:, :vocab].view(np.bool_)
    if logits.device.type == "cpu":
        # numpy's masked copy, row by row into the tensor's memory: several times faster
        # on a CPU than torch's masked_fill over the same rows.
        values = logits.numpy()  # [B, V], shares memory
        for j, r in enumerate(rows):
            np.copyto(values[r], -np.inf, where=forbid[j])
        return
    idx = torch.tensor(rows, device=logits.device)
    logits[idx] = logits[idx].masked_fill_(torch.from_numpy(forbid).to(logits.device), float("-inf"))


def consume(matchers: Sequence[object | None], tokens: Sequence[int]) -> None:
    """Advance each constrained row's matcher by the token it sampled."""
    for m, tok in zip(matchers, tokens, strict=True):
        if m is not None and not m.consume_token(int(tok)):
            raise GrammarError(f"sampled token {tok} outside the grammar: {m.get_error()}")
