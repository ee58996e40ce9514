"""Sampling: the per-sequence parameters and choosing the next token for a batch of rows.

Owns SamplingParams (a plain, serialisable contract that travels from the CPU tier to
prefill and decode) and the batched sampler. Reproducibility: a seeded sequence draws
exactly one uniform number per output token from its own CPU torch.Generator, so token i
always uses draw i, whichever batch it shares and whichever worker (prefill or decode)
produces it. Stop strings are not handled here; the caller passes a stop checker.

Log probabilities (SamplingParams.logprobs / top_logprobs) are those of the distribution
the token was drawn from, before truncation: the model's logits after penalties,
logit_bias and the grammar mask, divided by the temperature (1 for a greedy row), then
log-softmaxed over the whole vocabulary. top_k / top_p truncation is not applied to
them (it would make most of the vocabulary -inf). A greedy row's token is therefore the
first of its top_logprobs. A token the grammar forbids reports LOGPROB_FLOOR, as OpenAI
reports -9999.0 for a token too unlikely to say (JSON has no -infinity).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .grammar import consume, mask_logits_
from .penalties import History, penalise_

# Candidates examined for top-k / top-p before falling back to a full sort of a row: a
# full sort of a whole vocabulary per row is far slower on a CPU than topk(64).
_CANDIDATES = 64
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1  # what torch.Generator.manual_seed accepts, signed
TOP_LOGPROBS_MAX = 20  # OpenAI's bound on top_logprobs
LOGPROB_FLOOR = -9999.0


@dataclass
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0  # nucleus mass kept; 1.0 = off
    top_k: int = 0  # 0 = off
    seed: int | None = None  # None = a fresh random seed per sequence
    max_tokens: int = 256  # output tokens in all, the prefill's first token included
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)  # besides the model's EOS
    ignore_eos: bool = False
    # Repetition control and bias (penalties.py has their definitions); the defaults are off.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = field(default_factory=tuple)  # (token id, bias)
    # An llguidance grammar (grammar.py) the output must stay inside; None = free.
    grammar: str | None = None
    # Report each output token's log probability, and the `top_logprobs` most likely
    # alternatives at its position (0..20); see the module docstring for which ones.
    logprobs: bool = False
    top_logprobs: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0 or self.max_tokens < 1:
            raise ValueError(f"invalid sampling parameters {self}")
        if not (-2 <= self.frequency_penalty <= 2 and -2 <= self.presence_penalty <= 2
                and 0 < self.repetition_penalty <= 10):
            raise ValueError(f"invalid penalties {self}")
        self.logit_bias = tuple((int(t), float(b)) for t, b in self.logit_bias)
        if any(not -100 <= b <= 100 or t < 0 for t, b in self.logit_bias):
            raise ValueError(f"invalid logit_bias {self.logit_bias}")
        # Checked here, not when the generator is made inside a batched forward, where it
        # would fail every prompt in the batch (other tenants' included).
        if self.seed is not None and not SEED_MIN <= self.seed <= SEED_MAX:
            raise ValueError(f"seed {self.seed} is outside [{SEED_MIN}, {SEED_MAX}]")
        self.stop_token_ids = tuple(int(t) for t in self.stop_token_ids)
        if not 0 <= self.top_logprobs <= TOP_LOGPROBS_MAX or (self.top_logprobs and not self.logprobs):
            raise ValueError(f"top_logprobs {self.top_logprobs} needs logprobs and 0..{TOP_LOGPROBS_MAX}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    @property
    def penalised(self) -> bool:
        """Whether the logits change before sampling (penalties.apply_penalties)."""
        return bool(self.frequency_penalty or self.presence_penalty or self.repetition_penalty != 1.0
                    or self.logit_bias)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop_token_ids"] = list(self.stop_token_ids)
        d["logit_bias"] = [list(pair) for pair in self.logit_bias]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SamplingParams:
        return cls(**d)


def make_generator(params: SamplingParams, tokens_done: int) -> torch.Generator | None:
    """The generator for a sequence that has already produced `tokens_done` tokens."""
    if params.greedy:
        return None
    g = torch.Generator(device="cpu")
    g.manual_seed(params.seed if params.seed is not None else secrets.randbits(63))
    if tokens_done:
        torch.rand(tokens_done, generator=g)  # skip the draws earlier tokens used
    return g


@dataclass(frozen=True)
class TokenLogprobs:
    """A sampled token's log probability and its position's most likely tokens."""

    logprob: float
    top: tuple[tuple[int, float], ...] = ()  # (token id, logprob), most likely first


@dataclass(frozen=True)
class Sampled:
    tokens: torch.Tensor  # [B] int64
    logprobs: list[TokenLogprobs | None]  # per row; None where the row did not ask


def sample_tokens(
    logits: torch.Tensor,  # [B, V], any float dtype (the model's)
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    histories: Sequence[History] | None = None,  # per row (prompt ids, output ids): for penalties
    matchers: Sequence[object | None] | None = None,  # per row: its grammar's matcher, or None
) -> torch.Tensor:  # [B] int64, on logits' device
    """The next token of each row; a constrained row's matcher consumes the one it got."""
    return sample(logits, params, generators, histories, matchers).tokens


def sample(
    logits: torch.Tensor,  # [B, V], any float dtype (the model's)
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    histories: Sequence[History] | None = None,
    matchers: Sequence[object | None] | None = None,
) -> Sampled:
    """sample_tokens, with the log probabilities of the rows that ask for them."""
    logits = adjusted_logits(logits, params, histories, matchers)
    tokens = _pick(logits, params, generators)
    if matchers is not None and any(m is not None for m in matchers):
        consume(matchers, tokens.tolist())
    return Sampled(tokens, token_logprobs(logits, params, tokens))


def token_logprobs(
    logits: torch.Tensor,  # [B, V], as adjusted_logits returns them
    params: Sequence[SamplingParams],
    tokens: torch.Tensor,  # [B] the tokens sampled
) -> list[TokenLogprobs | None]:
    """Each asking row's token logprob and top alternatives, in one batched pass over
    those rows only (a batch that asks for none costs nothing)."""
    rows = [i for i, p in enumerate(params) if p.logprobs]
    out: list[TokenLogprobs | None] = [None] * len(params)
    if not rows:
        return out
    dev = logits.device
    idx = torch.tensor(rows, device=dev)
    temp = torch.tensor([params[i].temperature or 1.0 for i in rows], device=dev)[:, None]
    lp = torch.log_softmax(logits[idx].float() / temp, dim=-1)  # [R, V]
    chosen = lp.gather(1, tokens[idx][:, None])[:, 0].clamp_(min=LOGPROB_FLOOR).tolist()  # [R]
    k = max(params[i].top_logprobs for i in rows)
    top_vals: list[list[float]] = [[] for _ in rows]
    top_ids: list[list[int]] = [[] for _ in rows]
    if k:
        vals, ids = lp.topk(k, dim=-1)  # [R, k], sorted descending
        top_vals, top_ids = vals.clamp_(min=LOGPROB_FLOOR).tolist(), ids.tolist()
    for j, i in enumerate(rows):
        n = params[i].top_logprobs
        out[i] = TokenLogprobs(chosen[j], tuple(zip(top_ids[j][:n], top_vals[j][:n], strict=True)))
    return out


def adjusted_logits(logits: torch.Tensor, params: Sequence[SamplingParams],
                    histories: Sequence[History] | None,
                    matchers: Sequence[object | None] | None) -> torch.Tensor:
    """The logits after penalties and grammar masks: `logits` itself when no row has
    either (bit for bit what it was), else one float32 copy changed in place."""
    constrained = matchers is not None and any(m is not None for m in matchers)
    if not constrained and not any(p.penalised for p in params):
        return logits
    # A copy: the model's output may be an inference-mode tensor (not writable here),
    # and float32 keeps small penalties exact; other rows convert without change.
    out = logits.to(torch.float32, copy=True)
    penalise_(out, params, histories)
    if constrained:
        mask_logits_(out, matchers)  # type: ignore[arg-type]
    return out


def _pick(
    logits: torch.Tensor,  # [B, V]
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
) -> torch.Tensor:  # [B] int64
    # Greedy rows are done here, sampled rows overwritten below. max() rather than
    # argmax(): same first-maximum index, several times faster on a CPU.
    tokens = logits.max(dim=-1).indices
    rows = [i for i, p in enumerate(params) if not p.greedy]
    if not rows:
        return tokens
    dev = logits.device
    # One uniform per sampled row, from that row's own generator (CPU, so identical on
    # any device).
    u = torch.cat([torch.rand(1, generator=generators[i]) for i in rows]).to(dev)  # [R]
    idx = torch.tensor(rows, device=dev)
    temp = torch.tensor([params[i].temperature for i in rows], device=dev)[:, None]
    probs = torch.softmax(logits[idx].float() / temp, dim=-1)  # [R, V] float32
    top_k = [params[i].top_k for i in rows]
    top_p = torch.tensor([params[i].top_p for i in rows], device=dev)
    truncated = [k > 0 or params[i].top_p < 1 for k, i in zip(top_k, rows, strict=True)]

    chosen = torch.empty(len(rows), dtype=torch.long, device=dev)
    full_rows = [r for r, t in enumerate(truncated) if not t]
    if full_rows:  # plain temperature sampling: inverse CDF over the whole vocabulary
        fr = torch.tensor(full_rows, device=dev)
        chosen[fr] = _inverse_cdf(probs[fr], u[fr])
    trunc_rows = [r for r, t in enumerate(truncated) if t]
    if trunc_rows:
        tr = torch.tensor(trunc_rows, device=dev)
        k_cap = min(probs.shape[-1], max(_CANDIDATES, *(top_k[r] for r in trunc_rows)))
        vals, cand = probs[tr].topk(k_cap, dim=-1)  # [R', K] sorted descending
        k_lim = torch.tensor([top_k[r] or k_cap for r in trunc_rows], device=dev)[:, None]
        rank = torch.arange(k_cap, device=dev)[None, :]
        cum = vals.cumsum(-1)
        # Keep a candidate while the mass before it is under top_p (the first always).
        keep = (rank < k_lim) & ((cum - vals) < top_p[tr][:, None])
        picked = cand.gather(1, _inverse_cdf(vals * keep, u[tr])[:, None])[:, 0]
        # A nucleus wider than the candidates (flat distribution, no top_k) needs the
        # exact answer from a full sort of that row; rare at the temperatures used.
        wide = (cum[:, -1] < top_p[tr]) & (k_lim[:, 0] >= k_cap) & (k_cap < probs.shape[-1])
        for j in wide.nonzero().flatten().tolist():
            r = trunc_rows[j]
            svals, sidx = probs[r].sort(descending=True)
            scum = svals.cumsum(-1)
            skeep = (scum - svals) < top_p[r]
            picked[j] = sidx[_inverse_cdf((svals * skeep)[None], u[r : r + 1])[0]]
        chosen[tr] = picked
    tokens[idx] = chosen
    return tokens


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index drawn from each row of non-negative `weights` [R, N] with uniforms u [R]."""
    cdf = weights.cumsum(-1)  # [R, N]
    target = (u * cdf[:, -1])[:, None]  # [R, 1]
    # right=True: the first index whose CDF exceeds the target never has zero weight.
    pos = torch.searchsorted(cdf, target, right=True)[:, 0]
    return pos.clamp_(max=weights.shape[-1] - 1)
