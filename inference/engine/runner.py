"""The runner: executes the scheduler's StepPlan on the model, and decides nothing.

Owns the decode batch (batch.py: rows, their KV cache in capacity classes) and the
prefill forward of prompt pieces (each after the KV it already has), with sampling. One
step of a plan: its joins enter the batch; the batch runs one decode forward, every row
sampling one token; then the prefill chunks run as one forward, and the prompts they
complete sample their first token (index 0). Such a prompt joins the batch at the start
of the next step (the scheduler lists it in that plan's joins), so its second token comes
one decode forward after its first, as every other row's does.

Failures are reported per sequence (StepOutput.errors) so that the loop ends only those:
a KV that cannot join, a prefill forward (its prompts), a decode forward (its rows).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field

import torch

from .batch import DecodeBatch
from .kv import KVCache
from .model import DecoderModel
from .prefix_cache import PrefixCache
from .sampling import SamplingParams, TokenLogprobs, sample
from .scheduler import PrefillChunk, StepPlan
from .sequence import Sequence

Past = tuple[torch.Tensor, torch.Tensor]  # k, v [L, Hkv, P, D]


@dataclass
class StepOutput:
    # The token each sequence sampled this step: a decode row's next one, or the first
    # (index 0) of a prompt this step's prefill completed.
    tokens: dict[Sequence, int] = field(default_factory=dict)
    # The logprobs of those tokens, for the sequences that asked for them.
    logprobs: dict[Sequence, TokenLogprobs] = field(default_factory=dict)
    # Sequences this step failed, with the error; nothing else of theirs ran.
    errors: list[tuple[Sequence, Exception]] = field(default_factory=list)
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


@dataclass(frozen=True)
class PrefillOutput:
    kvs: list[Past]  # per row: past + piece, k and v [L, Hkv, P + n, D] on the model's device
    first_tokens: list[int | None]  # per row: the sampled token where one was asked for
    first_logprobs: list[TokenLogprobs | None]  # per row: that token's, where asked for


def prefill_steps(
    model: DecoderModel,
    pieces: list[list[int]],
    pasts: list[Past | None],
    sampling: list[tuple[SamplingParams, torch.Generator | None] | None],
    prompts: list[list[int]] | None = None,
    matchers: list[object | None] | None = None,
    sample_rows: list[int] | None = None,
) -> Generator[None, None, PrefillOutput]:
    """One prefill forward over prompt pieces (each after its past KV), pausing after
    each layer (see DecoderModel.forward_steps); rows with sampling parameters sample a
    token from their last position's logits. `prompts`: each row's whole prompt, for
    the penalties that look back on it (None: the pieces are whole prompts); `matchers`:
    each row's grammar matcher or None, which consumes the token it samples.

    `sample_rows`: several samplers per piece (identical prompts computed once: n
    choices of one request). Then `sampling`, `prompts` and `matchers` are per sampler,
    sample_rows[j] is the piece sampler j draws from, and first_tokens / first_logprobs
    are per sampler; `kvs` stay per piece."""
    kvs, logits = yield from model.prefill_steps(pieces, pasts)  # [B, V]
    src = sample_rows if sample_rows is not None else list(range(len(pieces)))
    rows = [j for j, s in enumerate(sampling) if s is not None]
    firsts: list[int | None] = [None] * len(sampling)
    first_lps: list[TokenLogprobs | None] = [None] * len(sampling)
    if rows:
        chosen = [sampling[j] for j in rows]
        whole = prompts if prompts is not None else [pieces[r] for r in src]
        picked = sample(logits[torch.tensor([src[j] for j in rows], device=logits.device)],
                        [s[0] for s in chosen], [s[1] for s in chosen],  # type: ignore[index]
                        [(whole[j], []) for j in rows],
                        [matchers[j] for j in rows] if matchers is not None else None)
        for j, tok, lp in zip(rows, picked.tokens.tolist(), picked.logprobs, strict=True):
            firsts[j], first_lps[j] = tok, lp
    return PrefillOutput(kvs, firsts, first_lps)


class ModelRunner:
    def __init__(self, model: DecoderModel, *, fingerprint: str, max_batch: int, max_context: int,
                 prefix_cache: PrefixCache | None = None):
        self.model = model
        self.fingerprint = fingerprint
        self.batch = DecodeBatch(model, max_batch=max_batch, max_context=max_context)
        self.prefix_cache = prefix_cache

    # The decode batch, as the loop and the tests see it.
    @property
    def seqs(self) -> list[Sequence]:
        return self.batch.seqs

    @property
    def size(self) -> int:
        return self.batch.size

    @property
    def classes(self) -> dict:
        return self.batch.classes

    def remove(self, seqs: set[Sequence]) -> list[Sequence]:
        return self.batch.remove_seqs(seqs)

    def lookup(self, seq: Sequence) -> None:
        """A prefix-cache hit for an admitted prompt becomes its KV so far."""
        if self.prefix_cache is None or seq.prompt is None:
            return
        hit = self.prefix_cache.lookup(seq.prompt, seq.cache_salt, seq.cache_shared)
        if hit is not None:
            seq.kv = KVCache(hit.k, hit.v, self.fingerprint)
            seq.prefilled = seq.cached_tokens = hit.tokens

    def execute(self, plan: StepPlan) -> StepOutput:
        out = StepOutput()
        for seq in plan.joins:
            self.join(seq, out)  # a failed one is in out.errors and not in the batch
        if self.batch.size:
            t = time.perf_counter()
            try:
                for seq, token, lp in self.batch.step():
                    out.tokens[seq] = token
                    if lp is not None:
                        out.logprobs[seq] = lp
            except Exception as exc:  # every row fails; the prompts below still run
                out.errors.extend((s, exc) for s in self.batch.seqs)
            out.decode_ms = (time.perf_counter() - t) * 1e3
        if plan.prefill:
            t = time.perf_counter()
            try:
                self._prefill(plan.prefill, out)
            except Exception as exc:  # these prompts fail; the running streams go on
                out.errors.extend((c.seq, exc) for c in plan.prefill)
            out.prefill_ms = (time.perf_counter() - t) * 1e3
        return out

    def join(self, seq: Sequence, out: StepOutput) -> None:
        """Into the batch with its prompt KV, or an error for it alone (a KV that does
        not fit the model, no memory for a larger cache)."""
        kv, seq.kv = seq.kv, None
        assert kv is not None
        try:
            self.batch.join(seq, kv)
        except Exception as exc:
            out.errors.append((seq, exc))

    def _prefill(self, chunks: tuple[PrefillChunk, ...], out: StepOutput) -> None:
        pieces, pasts = [], []
        for c in chunks:
            assert c.seq.prompt is not None and c.start == c.seq.prefilled
            pieces.append(c.seq.prompt[c.start : c.start + c.num_tokens])
            pasts.append((c.seq.kv.k, c.seq.kv.v) if c.seq.kv is not None else None)
        sampling = [(c.seq.sampling, c.seq.generator) if c.completes else None for c in chunks]
        result = _run(prefill_steps(self.model, pieces, pasts, sampling, [c.seq.prompt for c in chunks],
                                    [c.seq.matcher for c in chunks]))
        for c, (k, v), first, lp in zip(chunks, result.kvs, result.first_tokens, result.first_logprobs,
                                        strict=True):
            seq = c.seq
            seq.kv = KVCache(k, v, self.fingerprint)
            seq.prefilled += c.num_tokens
            if c.completes:
                assert first is not None and seq.prompt is not None
                if self.prefix_cache is not None:
                    self.prefix_cache.insert(seq.prompt, seq.cache_salt, k, v, seq.cache_shared)
                out.tokens[seq] = first
                if lp is not None:
                    out.logprobs[seq] = lp


def _run(steps: Generator[None, None, PrefillOutput]) -> PrefillOutput:
    from .model import run_to_end

    return run_to_end(steps)
