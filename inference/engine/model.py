"""The decoder model: a batched Llama-style forward in plain torch over Hugging Face weights.

Owns the weights (fused for fewer, larger matmuls) and the forward pass. It does not own
any KV cache: callers pass their caches in (CacheGroup) and the forward writes the new positions'
keys and values into it. One forward serves prefill (many tokens per row, optionally
after a cached prefix) and decode (one token per row), because both are "append S tokens
at per-row positions, attend causally to everything before them".

HF's own forward is not used per step: at small batches a 135M-parameter model pays for
every op it dispatches, so the forward is written for few ops per layer (12 on the bf16
CPU path): q, k and v in one matmul; RoPE applied to the whole q|k|v block at once (the v
heads rotate by angle 0); keys and values stored as one cache tensor, written by one
index_put. The matmuls are linear.py's: on bf16 CPUs oneDNN-packed weights with the
RMSNorm scale folded in and the residual add, SiLU and gating fused in; int8 weights
through FBGEMM (fp32 activations). fp32 follows HF's numerics closely enough that greedy
output matches token for token. Where our CPU kernels build (kernels/, kernels="auto"), a
decode forward's attention (one new token per row, with its RoPE and KV write) runs on
decode_attention.c instead of torch's SDPA, which prefill always uses, a one-row
bf16 matmul on row_linear.c instead of oneDNN, and an fp32 or bf16 matmul of a few rows on
the GGUF blocks the weights came from (block_linear.c, gguf.py) instead of torch's.

Cache layout: [L, B, 2 Hkv, T, D], heads 0..Hkv-1 keys, Hkv..2Hkv-1 values.
Shapes: B rows, S new tokens per row, T cache positions attended, L layers, H query heads,
Hkv key/value heads, G = H // Hkv, D head dim, E hidden size, F MLP size, V vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.nn.functional as F

from .kernels import block_linear, decode_attention, row_linear
from .kernels.block_linear import Blocks
from .linear import Linear, choose_kind, mlp, rows_faster_on_few

# A causal prefill longer than two of these runs SDPA per chunk of this many queries, each
# against the keys up to its end: SDPA's CPU kernel skips little above the diagonal by
# itself (its key blocks are long), so the chunks skip the rest.
CAUSAL_CHUNK = 64

log = logging.getLogger(__name__)

# Our CPU kernels: "auto" where they build, "ours" (the decode attention kernel must build)
# or "torch" (torch's own ops only).
KERNELS = ("auto", "ours", "torch")

R = TypeVar("R")


@dataclass(frozen=True)
class ModelShape:
    num_layers: int  # L
    hidden: int  # E
    num_heads: int  # H
    num_kv_heads: int  # Hkv
    head_dim: int  # D
    vocab: int  # V
    rms_eps: float


@dataclass(frozen=True)
class CacheGroup:
    """Rows [start, start + n) of a forward's batch, whose KV cache is `cache`
    [L, n, 2 Hkv, T', D] and whose queries attend over its positions [0, kv_len); every
    position written by the forward must be < kv_len <= T'. Rows of different lengths in
    different groups attend only as far as their own group needs."""

    cache: torch.Tensor
    start: int
    kv_len: int


@dataclass(frozen=True)
class Causal:
    """Attention that is plain causal from position 0 (a prompt with no cached past): in
    query chunks (s0, s1, additive mask [s1 - s0, s1]), or whole where there are none."""

    chunks: tuple[tuple[int, int, torch.Tensor], ...] = ()


@dataclass
class LayerWeights:
    ln_attn: torch.Tensor | None  # [E]; None when folded into qkv
    qkv: Linear  # [(H + 2 Hkv) D, E]: q, k and v projections in one matmul
    o: Linear  # [E, H D] (+ bias with Llama attention_bias)
    ln_mlp: torch.Tensor | None  # [E]; None when folded into gate/up
    gate_up: Linear  # [2 F, E]: gate and up projections
    down: Linear  # [E, F]


def few_row_blocks(device: torch.device, dtype: torch.dtype, weights: str, kernels: str) -> block_linear.BlockLinear | None:
    """The block kernel, where a model of these settings runs its few-row matmuls on the
    GGUF blocks (a CPU, the dtype's own weights, fp32, or bf16 on AVX512-BF16); else None."""
    if kernels == "torch" or weights != "native" or torch.device(device).type != "cpu" \
            or dtype not in (torch.float32, torch.bfloat16):
        return None
    kernel = block_linear.load()
    return kernel if kernel is not None and (dtype == torch.float32 or kernel.bf16) else None


class DecoderModel:
    def __init__(self, hf_model: Any, *, device: torch.device, dtype: torch.dtype, max_context: int,
                 weights: str = "native", kernels: str = "auto", blocks: dict[str, Blocks] | None = None,
                 block_rows: int | None = None):
        """`dtype`: activations, KV cache and (unless `weights` is "int8") weights; int8
        weights take fp32 activations (see linear.py). `kernels`: one of KERNELS.
        `blocks`: the GGUF blocks of the weights, by HF weight name (gguf.load_blocks),
        for few-row matmuls on the block kernel. `block_rows`: for bf16, the most rows
        those run on the blocks; None: timed against oneDNN over every matmul, here."""
        cfg = hf_model.config
        self.device = torch.device(device)
        if weights == "int8" and dtype != torch.float32:
            raise ValueError("int8 weights run with float32 activations")
        self.dtype = dtype
        self.weights = weights
        self.max_context = max_context
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.shape = s = ModelShape(
            num_layers=cfg.num_hidden_layers, hidden=cfg.hidden_size, num_heads=cfg.num_attention_heads,
            num_kv_heads=cfg.num_key_value_heads, head_dim=head_dim, vocab=cfg.vocab_size,
            rms_eps=cfg.rms_norm_eps,
        )
        if kernels not in KERNELS:
            raise ValueError(f"unknown kernels {kernels!r}")
        self.linear_kind = kind = choose_kind(self.device, dtype, weights)
        blocks = blocks or {}
        block_kernel = few_row_blocks(self.device, dtype, weights, kernels) if blocks else None
        row_kernel = None
        # Folding the RMSNorm scale into the next matmul saves an op per norm; done only
        # where the kernel already gives up bit-parity with HF (bf16 CPU, int8).
        fold = kind != "plain"
        # mk reads row_kernel and block_kernel when called: a rebuild below takes new ones.
        def mk(w: torch.Tensor, b: torch.Tensor | None = None, ln: torch.Tensor | None = None,
               halves: bool = False, names: tuple[str, ...] = ()) -> Linear:
            parts = [blocks.get(f"{n}.weight") for n in names] if block_kernel is not None else []
            fused = Blocks.cat(parts) if parts and all(parts) else None  # type: ignore[arg-type]
            return Linear.build(w, b, ln if fold else None, device=self.device, dtype=dtype, kind=kind,
                                halves=halves, row_kernel=row_kernel, block_kernel=block_kernel, blocks=fused)

        inner = hf_model.model
        self.embed = self._w(inner.embed_tokens.weight)  # [V, E]
        self.norm = None if fold else self._w(inner.norm.weight)  # [E]
        if kernels != "torch" and kind == "packed" and block_kernel is None:
            row_kernel = row_linear.load()
        self._build_matmuls(hf_model, mk, fold)
        if block_kernel is not None and dtype == torch.bfloat16 and block_rows is None:
            block_rows = rows_faster_on_few(self.linears(), dtype, block_kernel.max_rows)
            log.info("bf16 matmuls of up to %d rows run on the GGUF blocks (timed against oneDNN here)", block_rows)
            if block_rows == 0:  # not even one row: the one-row kernel's bf16 copy after all
                block_kernel = None
                row_kernel = row_linear.load() if kernels != "torch" and kind == "packed" else None
                self._build_matmuls(hf_model, mk, fold)
        for lin in self.linears():
            if lin.few is not None and block_rows is not None and isinstance(lin.few.w, Blocks):
                lin.few.max_rows = block_rows
        self.block_rows = (block_rows if block_rows is not None else block_kernel.max_rows) if block_kernel else 0
        # RoPE tables for every position, computed as HF does (fp32, then cast), from the
        # model's own rotary module so any scaling it implements (llama3, yarn, ...) applies.
        rotary = inner.rotary_emb
        inv_freq = rotary.inv_freq.detach().float().cpu()  # [D/2]
        freqs = torch.arange(max_context, dtype=torch.float32)[:, None] * inv_freq[None, :]  # [P, D/2]
        emb = torch.cat([freqs, freqs], dim=-1)  # [P, D]
        scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.cos = self._w(emb.cos() * scale)  # [P, D]
        # rotate_half(x) * sin == roll(x, D/2) * (sin with its first half negated): one op
        # fewer, and exact (negation is).
        sin = self._w(emb.sin() * scale)
        self.sin_signed = torch.cat([-sin[:, : head_dim // 2], sin[:, head_dim // 2 :]], dim=-1)  # [P, D]
        self.scale = head_dim**-0.5
        n_qk, n_v = s.num_heads + s.num_kv_heads, s.num_kv_heads
        self._rope_id = (torch.ones(n_v, head_dim, device=self.device, dtype=dtype),
                         torch.zeros(n_v, head_dim, device=self.device, dtype=dtype))  # v: angle 0
        self._n_qk = n_qk
        self.decode_attention = self._choose_attention(kernels)

    def _build_matmuls(self, hf_model: Any, mk: Callable[..., Linear], fold: bool) -> None:
        """Every layer's matmuls and the LM head, on the kernels `mk` builds them with."""
        inner = hf_model.model
        self.layers = []
        for i, layer in enumerate(inner.layers):
            att, mlp = layer.self_attn, layer.mlp
            at, ml = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
            ln1, ln2 = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
            biases = [p.bias for p in (att.q_proj, att.k_proj, att.v_proj)]
            b_qkv = torch.cat(biases) if all(b is not None for b in biases) else None
            self.layers.append(LayerWeights(
                ln_attn=None if fold else self._w(ln1),
                qkv=mk(torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]), b_qkv, ln1,
                       names=(f"{at}.q_proj", f"{at}.k_proj", f"{at}.v_proj")),
                o=mk(att.o_proj.weight, att.o_proj.bias, names=(f"{at}.o_proj",)),
                ln_mlp=None if fold else self._w(ln2),
                gate_up=mk(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), None, ln2, halves=True,
                           names=(f"{ml}.gate_proj", f"{ml}.up_proj")),
                down=mk(mlp.down_proj.weight, names=(f"{ml}.down_proj",)),
            ))
        self.lm_head = mk(hf_model.lm_head.weight, None, inner.norm.weight, names=("lm_head",))  # [V, E]

    def linears(self) -> list[Linear]:
        """Every matmul of a forward, in the order it runs them."""
        return [lin for lw in self.layers for lin in (lw.qkv, lw.o, lw.gate_up, lw.down)] + [self.lm_head]

    def _choose_attention(self, kernels: str) -> decode_attention.DecodeAttention | None:
        if kernels == "torch":
            return None
        kernel = decode_attention.load() if self.device.type == "cpu" else None
        if kernel is not None and kernel.supports(self.dtype, self.device):
            return kernel
        if kernels == "ours":
            raise RuntimeError(f"the decode attention kernel cannot run here ({self.device}, {self.dtype})")
        return None

    @property
    def kv_bytes_per_token(self) -> int:
        """KV cache bytes one token holds in this model's dtype (all layers, keys and values)."""
        s = self.shape
        return s.num_layers * 2 * s.num_kv_heads * s.head_dim * self.dtype.itemsize

    def _w(self, t: torch.Tensor) -> torch.Tensor:
        return t.detach().to(device=self.device, dtype=self.dtype).contiguous()

    def new_kv(self, rows: int, length: int, *, zero: bool = True) -> torch.Tensor:
        """A cache [L, rows, 2 Hkv, length, D]. Zeroed by default because masked positions
        still enter attention's weighted sum with weight 0, and 0 * NaN = NaN; with
        zero=False the caller must write or zero every position a forward may read."""
        s = self.shape
        size = (s.num_layers, rows, 2 * s.num_kv_heads, length, s.head_dim)
        make = torch.zeros if zero else torch.empty
        return make(size, device=self.device, dtype=self.dtype)

    def forward(
        self,
        input_ids: torch.Tensor,  # [B, S] int64
        positions: torch.Tensor,  # [B, S] int64: each token's absolute position = its KV index
        groups: list[CacheGroup],  # consecutive row ranges covering the batch, each with its cache
        logit_index: torch.Tensor,  # [B] int64: which of the S tokens each row wants logits for
    ) -> torch.Tensor:  # [B, V] in the model dtype ([B, K, V] for a logit_index of [B, K])
        return run_to_end(self.forward_steps(input_ids, positions, groups, logit_index))

    @torch.inference_mode()
    def forward_steps(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        groups: list[CacheGroup],
        logit_index: torch.Tensor,
        from_start: bool = False,
    ) -> Generator[None, None, torch.Tensor]:
        """`forward`, pausing after each layer: a scheduler can run another forward in
        between (a prefill batcher letting one tenant's prompt overtake another's long
        forward). Returns the logits when exhausted.

        `from_start`: every row's tokens are at positions 0..n-1 (no cached past) and any
        padding after them, so attention is plain causal over the sequence index: SDPA's
        is_causal, which skips the blocks above the diagonal, instead of an explicit mask."""
        s = self.shape
        B, S = input_ids.shape
        H, Hkv, D, G = s.num_heads, s.num_kv_heads, s.head_dim, s.num_heads // s.num_kv_heads
        rows = torch.arange(B, device=self.device)
        kernel = self.decode_attention if S == 1 else None
        if kernel is None:
            causal = self._causal(S) if from_start else None
            attn = [self._attention_inputs(g, positions, G, causal) for g in groups]
            cos, sin = self._rope_tables(positions)  # [B, S, H + 2 Hkv, D] each
        else:  # each group's positions; one output that every layer's kernel calls overwrite
            pos = [positions[g.start : g.start + g.cache.shape[1], 0].contiguous() for g in groups]
            out = torch.empty(B, Hkv, G, D, device=self.device, dtype=self.dtype)

        x = F.embedding(input_ids, self.embed)  # [B, S, E]
        norm, eps = self._rms_norm, s.rms_eps
        for i, lw in enumerate(self.layers):
            qkv = lw.qkv.normed(x, norm, lw.ln_attn, eps)  # [B, S, (H + 2 Hkv) D]
            if kernel is not None:  # RoPE, KV write and attention in one call per group
                qkv = qkv.view(B, H + 2 * Hkv, D)
                for g, p in zip(groups, pos, strict=True):
                    span = slice(g.start, g.start + g.cache.shape[1])
                    kernel(qkv[span], self.cos, self.sin_signed, p, g.cache[i], out[span], H, self.scale)
                o = out.view(B, 1, H * D)
            else:
                o = self._attend(i, qkv.view(B, S, H + 2 * Hkv, D), groups, attn, cos, sin)
            x = lw.o.add(o, x)  # x + o W_o^T  [B, S, E]
            x = mlp(lw.gate_up, lw.down, x, norm, lw.ln_mlp, eps)  # x + (silu(h W_g^T) * h W_u^T) W_d^T
            yield
        if logit_index.dim() == 2:  # [B, K]: several positions per row (teacher forcing)
            rows = rows[:, None]
        last = x[rows, logit_index]  # [B, E] (or [B, K, E]): only the positions whose logits are wanted
        return self.lm_head.normed(last, norm, self.norm, eps)  # [B, V], model dtype

    def _attend(self, i: int, qkv: torch.Tensor, groups: list[CacheGroup],
                attn: list[tuple[slice, torch.Tensor | Causal, torch.Tensor]], cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
        """Layer i's attention on torch's ops (prefill, or decode without the kernel):
        RoPE, the KV write and SDPA for each group, with its mask or causal.
        qkv [B, S, H + 2 Hkv, D] -> [B, S, H D]."""
        s = self.shape
        B, S = qkv.shape[:2]
        H, Hkv, D, G = s.num_heads, s.num_kv_heads, s.head_dim, s.num_heads // s.num_kv_heads
        # RoPE on q and k: x cos + roll(x, D/2) sin', with the halves swapped by a flip.
        swapped = qkv.view(B, S, H + 2 * Hkv, 2, D // 2).flip(-2).view(B, S, H + 2 * Hkv, D)
        qkv = torch.addcmul(qkv * cos, swapped, sin)
        outs = []
        for g, (span, mask, write_at) in zip(groups, attn, strict=True):
            kv = g.cache[i]  # [n, 2 Hkv, T', D]
            kv.view(-1, D).index_copy_(0, write_at, qkv[span, :, H:].reshape(-1, D))  # keys, values
            n = kv.shape[0]
            if isinstance(mask, Causal):  # heads unfolded, G query heads per KV head
                outs.append(self._causal_attention(qkv[span, :, :H].transpose(1, 2), kv[:, :Hkv, : g.kv_len],
                                                   kv[:, Hkv:, : g.kv_len], mask))  # [n, H, S, D]
                continue
            if S == 1:
                q = qkv[span, 0, :H].view(n, Hkv, G, D)  # query heads grouped by their KV head
            else:  # [n, S, H, D] -> [n, Hkv, G * S, D]
                q = qkv[span, :, :H].transpose(1, 2).reshape(n, Hkv, G * S, D)
            outs.append(F.scaled_dot_product_attention(
                q, kv[:, :Hkv, : g.kv_len], kv[:, Hkv:, : g.kv_len], attn_mask=mask, scale=self.scale
            ))  # [n, Hkv, G * S, D]
        o = outs[0] if len(outs) == 1 else torch.cat(outs)  # [B, Hkv, G * S, D] ([B, H, S, D] causal)
        if isinstance(attn[0][1], Causal):
            return o.transpose(1, 2).reshape(B, S, H * D)
        if S == 1:
            return o.view(B, 1, H * D)
        return o.view(B, H, S, D).transpose(1, 2).reshape(B, S, H * D)

    def _causal(self, S: int) -> Causal:
        if S <= 2 * CAUSAL_CHUNK:
            return Causal()
        chunks = []
        for s0 in range(0, S, CAUSAL_CHUNK):
            s1 = min(S, s0 + CAUSAL_CHUNK)
            above = torch.arange(s1, device=self.device)[None, :] > torch.arange(s0, s1, device=self.device)[:, None]
            mask = torch.zeros(above.shape, device=self.device, dtype=self.dtype).masked_fill_(above, float("-inf"))
            chunks.append((s0, s1, mask))
        return Causal(tuple(chunks))

    def _causal_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: Causal) -> torch.Tensor:
        """q [n, H, S, D] at positions 0..S-1, k and v [n, Hkv, T >= S, D] -> [n, H, S, D]."""
        if not causal.chunks:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale, enable_gqa=True)
        return torch.cat([
            F.scaled_dot_product_attention(q[:, :, s0:s1], k[:, :, :s1], v[:, :, :s1], attn_mask=mask,
                                           scale=self.scale, enable_gqa=True)
            for s0, s1, mask in causal.chunks
        ], dim=2)

    def _attention_inputs(
        self, g: CacheGroup, positions: torch.Tensor, G: int, causal: Causal | None = None
    ) -> tuple[slice, torch.Tensor | Causal, torch.Tensor]:
        """For one group: its rows, its additive mask (or `causal`, which needs none), and
        where its new keys/values go."""
        n, capacity = g.cache.shape[1], g.cache.shape[3]
        span = slice(g.start, g.start + n)
        pos = positions[span]  # [n, S]
        S = pos.shape[1]
        if causal is not None:
            return span, causal, self._write_index(pos, n, capacity)
        # A key is visible to a query iff it is at or before the query's position; this
        # also hides other rows' padding and stale cache contents beyond a row's length.
        key_pos = torch.arange(g.kv_len, device=self.device)
        visible = key_pos[None, None, :] <= pos[:, :, None]  # [n, S, T]
        # Additive float mask, built once: a bool mask is converted inside every call.
        mask = torch.zeros(visible.shape, device=self.device, dtype=self.dtype).masked_fill_(
            ~visible, float("-inf"))
        if S == 1:
            mask = mask[:, None]  # [n, 1, 1, T], broadcast over the G query heads per KV head
        else:
            mask = mask[:, None, None].expand(n, 1, G, S, g.kv_len).reshape(n, 1, G * S, g.kv_len)
        return span, mask, self._write_index(pos, n, capacity)

    def _write_index(self, pos: torch.Tensor, n: int, capacity: int) -> torch.Tensor:
        # Where each new key/value row goes in one layer's cache seen as [n 2Hkv T', D]:
        # [b, s, h] -> (b 2Hkv + h) T' + pos[b, s]. One index_copy_ on that flat view per
        # layer; advanced-index assignment (cache[rows, :, positions] = ...) takes a generic
        # path that costs a sizeable share of a decode step at large batches.
        heads = 2 * self.shape.num_kv_heads
        base = torch.arange(n, device=self.device)[:, None] * heads + torch.arange(heads, device=self.device)
        return (base[:, None, :] * capacity + pos[:, :, None]).reshape(-1)  # [n S 2Hkv]

    def _rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, S = positions.shape
        cos = self.cos[positions][:, :, None].expand(B, S, self._n_qk, -1)  # [B, S, H + Hkv, D]
        sin = self.sin_signed[positions][:, :, None].expand(B, S, self._n_qk, -1)
        one, zero = (t.expand(B, S, -1, -1) for t in self._rope_id)  # [B, S, Hkv, D]
        return torch.cat([cos, one], dim=2), torch.cat([sin, zero], dim=2)

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        """RMSNorm as HF computes it (fp32 statistics, cast back, then scale).

        Written as LayerNorm over [x, -x]: that vector's mean is 0 and its variance is
        mean(x^2), so LayerNorm's one fused kernel gives x / sqrt(mean(x^2) + eps) in its
        first half. F.rms_norm is several separate kernels on a CPU, each paying a launch
        after a large matmul has flushed the caches: this is fewer.
        """
        E = x.shape[-1]
        y = F.layer_norm(torch.cat([x, x.neg()], dim=-1), (2 * E,), eps=self.shape.rms_eps)[..., :E]
        return y if weight is None else weight * y

    def prefill(
        self,
        prompts: list[list[int]],
        pasts: list[tuple[torch.Tensor, torch.Tensor] | None],
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
        """Run a batch of prompts (each optionally after a past KV prefix [L, Hkv, P, D]).

        Returns per prompt its full KV (past + prompt, k and v [L, Hkv, P + n, D] each, on
        the model's device) and the logits [B, V] at each prompt's last token.
        """
        return run_to_end(self.prefill_steps(prompts, pasts))

    @torch.inference_mode()
    def prefill_steps(
        self,
        prompts: list[list[int]],
        pasts: list[tuple[torch.Tensor, torch.Tensor] | None],
    ) -> Generator[None, None, tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]]:
        """`prefill`, pausing after each layer (see forward_steps)."""
        B, Hkv = len(prompts), self.shape.num_kv_heads
        past_lens = [0 if p is None else int(p[0].shape[2]) for p in pasts]
        lens = [len(p) for p in prompts]
        S = max(lens)
        # One scratch position past the longest row takes every padding token's KV, so
        # padding never overwrites a real position and never sees past max_context.
        T = max(pl + n for pl, n in zip(past_lens, lens, strict=True)) + 1
        cache = self.new_kv(B, T)
        ids = torch.zeros((B, S), dtype=torch.long)
        for b, (prompt, past) in enumerate(zip(prompts, pasts, strict=True)):
            ids[b, : lens[b]] = torch.tensor(prompt, dtype=torch.long)
            if past is not None:
                cache[:, b, :Hkv, : past_lens[b]] = past[0]
                cache[:, b, Hkv:, : past_lens[b]] = past[1]
        # Real tokens at past + i; padding at the scratch position T - 1, which is after
        # every real query's position and so invisible to it.
        offsets = torch.arange(S)[None, :]  # [1, S]
        positions = torch.tensor(past_lens)[:, None] + offsets  # [B, S]
        positions = torch.where(offsets < torch.tensor(lens)[:, None], positions, T - 1)
        logit_index = torch.tensor(lens) - 1
        logits = yield from self.forward_steps(ids.to(self.device), positions.to(self.device),
                                               [CacheGroup(cache, 0, T)], logit_index.to(self.device),
                                               from_start=not any(past_lens))
        kvs = [
            (cache[:, b, :Hkv, : past_lens[b] + lens[b]].contiguous(),
             cache[:, b, Hkv:, : past_lens[b] + lens[b]].contiguous())
            for b in range(B)
        ]
        return kvs, logits


def run_to_end(steps: Generator[None, None, R]) -> R:
    """Run a *_steps generator without pausing; its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
