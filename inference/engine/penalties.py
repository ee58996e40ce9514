"""Repetition control and logit bias, applied to a batch's logits before sampling.

Owns the three penalties as OpenAI and vLLM define them, so that a client's values mean
what they mean there:
- frequency_penalty (OpenAI, -2..2): subtract penalty x (times the token was generated);
- presence_penalty (OpenAI, -2..2): subtract penalty once from every generated token;
- repetition_penalty (vLLM/CTRL, > 0, 1 = off): a token of the prompt or the output has
  its logit divided by the penalty when positive and multiplied when negative;
and logit_bias (OpenAI, -100..100 per token id): added as is.

Batched over rows with flat indices into the [B, V] logits (index_add_ and one gather /
scatter), so the work is proportional to the tokens the penalised rows have seen, not to
B x V. A batch with no penalised row is returned untouched (the same tensor), which keeps
outputs bit for bit what they were without this step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch


class PenaltyParams(Protocol):
    """What this module reads of a row's sampling parameters (sampling.SamplingParams has
    them; a protocol keeps sampling.py, which calls this module, out of its imports)."""

    penalised: bool
    frequency_penalty: float
    presence_penalty: float
    repetition_penalty: float
    logit_bias: Sequence[tuple[int, float]]  # (token id, bias)

History = tuple[Sequence[int], Sequence[int]]  # (prompt token ids, output token ids so far)


def apply_penalties(
    logits: torch.Tensor,  # [B, V], any float dtype
    params: Sequence[PenaltyParams],
    histories: Sequence[History] | None,
) -> torch.Tensor:  # [B, V]: `logits` itself, or a float32 copy with the penalties applied
    if not any(p.penalised for p in params):
        return logits
    # A float32 copy: a bf16 logit near 20 moves in steps of 0.125, coarser than most
    # penalties, and the model's output may be an inference-mode tensor, which cannot be
    # changed in place here. Rows without penalties convert exactly: their choice stays.
    out = logits.to(torch.float32, copy=True)
    penalise_(out, params, histories)
    return out


def penalise_(
    out: torch.Tensor,  # [B, V] float32, writable: changed in place
    params: Sequence[PenaltyParams],
    histories: Sequence[History] | None,
) -> None:
    rows = [i for i, p in enumerate(params) if p.penalised]
    if not rows:
        return
    flat = out.view(-1)  # [B * V]
    vocab = out.shape[-1]
    dev = out.device
    empty: History = ((), ())
    hist = [histories[r] if histories is not None else empty for r in rows]
    # Every token a penalised row has seen, as flat indices row * V + token, built with
    # one list and a few tensor ops: Python touches each token id once.
    rep_rows = [j for j, r in enumerate(rows) if params[r].repetition_penalty != 1.0]
    if rep_rows:  # first, on the model's own logits, as vLLM does
        idx = _flat_unique([rows[j] for j in rep_rows], [(*hist[j][0], *hist[j][1]) for j in rep_rows], vocab, dev)
        penalty = torch.tensor([params[r].repetition_penalty for r in range(len(params))], device=dev)[idx // vocab]
        vals = flat[idx]
        flat[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    freq_rows = [j for j, r in enumerate(rows) if params[rows[j]].frequency_penalty and hist[j][1]]
    if freq_rows:
        idx = _flat([rows[j] for j in freq_rows], [hist[j][1] for j in freq_rows], vocab, dev)
        freq = torch.tensor([params[r].frequency_penalty for r in range(len(params))], device=dev)
        flat.index_add_(0, idx, -freq[idx // vocab])
    pres_rows = [j for j, r in enumerate(rows) if params[rows[j]].presence_penalty and hist[j][1]]
    if pres_rows:
        idx = _flat_unique([rows[j] for j in pres_rows], [hist[j][1] for j in pres_rows], vocab, dev)
        pres = torch.tensor([params[r].presence_penalty for r in range(len(params))], device=dev)
        flat.index_add_(0, idx, -pres[idx // vocab])
    bias = [(r * vocab + t, b) for r in rows for t, b in params[r].logit_bias if 0 <= t < vocab]
    if bias:
        flat.index_add_(0, torch.tensor([i for i, _ in bias], device=dev),
                        torch.tensor([b for _, b in bias], device=dev, dtype=out.dtype))


def _flat(rows: list[int], tokens: list[Sequence[int]], vocab: int, dev) -> torch.Tensor:
    """Flat indices row * vocab + token of each row's tokens (repeats kept)."""
    ids = torch.tensor([t for ts in tokens for t in ts], dtype=torch.long, device=dev)
    base = torch.tensor(rows, dtype=torch.long, device=dev) * vocab
    return ids + base.repeat_interleave(torch.tensor([len(ts) for ts in tokens], device=dev))


def _flat_unique(rows: list[int], tokens: list[Sequence[int]], vocab: int, dev) -> torch.Tensor:
    return torch.unique(_flat(rows, tokens, vocab, dev))
