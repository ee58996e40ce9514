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
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .sampling import SamplingParams

History = tuple[Sequence[int], Sequence[int]]  # (prompt token ids, output token ids so far)


def apply_penalties(
    logits: torch.Tensor,  # [B, V], any float dtype
    params: Sequence[SamplingParams],
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
    params: Sequence[SamplingParams],
    histories: Sequence[History] | None,
) -> None:
    rows = [i for i, p in enumerate(params) if p.penalised]
    flat = out.view(-1)
    vocab = out.shape[-1]
    dev = out.device
    freq_idx: list[int] = []
    freq_val: list[float] = []
    pres_idx: list[int] = []
    pres_val: list[float] = []
    rep_idx: list[int] = []
    rep_val: list[float] = []
    bias_idx: list[int] = []
    bias_val: list[float] = []
    for r in rows:
        p = params[r]
        prompt, output = histories[r] if histories is not None else ((), ())
        base = r * vocab
        if p.logit_bias:
            for tok, bias in p.logit_bias:
                if 0 <= tok < vocab:
                    bias_idx.append(base + tok)
                    bias_val.append(bias)
        if p.frequency_penalty and output:
            freq_idx.extend(base + t for t in output)
            freq_val.extend([-p.frequency_penalty] * len(output))
        if p.presence_penalty and output:
            seen = set(output)
            pres_idx.extend(base + t for t in seen)
            pres_val.extend([-p.presence_penalty] * len(seen))
        if p.repetition_penalty != 1.0 and (prompt or output):
            seen = set(prompt)
            seen.update(output)
            rep_idx.extend(base + t for t in seen)
            rep_val.extend([p.repetition_penalty] * len(seen))
    if rep_idx:  # first, on the model's own logits, as vLLM does
        idx = torch.tensor(rep_idx, device=dev)
        penalty = torch.tensor(rep_val, device=dev)
        vals = flat[idx]
        flat[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    for idx, val in ((freq_idx, freq_val), (pres_idx, pres_val), (bias_idx, bias_val)):
        if idx:
            flat.index_add_(0, torch.tensor(idx, device=dev), torch.tensor(val, device=dev))
