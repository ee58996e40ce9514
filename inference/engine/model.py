"""The decoder model: a batched Llama-style forward in plain torch over Hugging Face weights.

Owns the weights (fused for fewer, larger matmuls) and the forward pass. It does not own
any KV cache: callers pass cache tensors in and the forward writes the new positions'
keys and values into them. One forward serves prefill (many tokens per row, optionally
after a cached prefix) and decode (one token per row), because both are "append S tokens
at per-row positions, attend causally to everything before them".

HF's own forward is not used per step: its per-module Python overhead dominates a
135M-parameter model on a CPU. The numerics follow HF's Llama (RMSNorm in fp32, RoPE
tables computed in fp32 and cast to the model dtype) so fp32 greedy output matches.

Shapes: B rows, S new tokens per row, T cache positions attended, L layers, H query heads,
Hkv key/value heads, G = H // Hkv, D head dim, E hidden size, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class ModelShape:
    num_layers: int  # L
    hidden: int  # E
    num_heads: int  # H
    num_kv_heads: int  # Hkv
    head_dim: int  # D
    vocab: int  # V
    rms_eps: float


@dataclass
class LayerWeights:
    ln_attn: torch.Tensor  # [E]
    w_qkv: torch.Tensor  # [(H + 2 Hkv) D, E]: q, k and v projections in one matmul
    b_qkv: torch.Tensor | None  # [(H + 2 Hkv) D] (Qwen2 only)
    w_o: torch.Tensor  # [E, H D]
    ln_mlp: torch.Tensor  # [E]
    w_gate_up: torch.Tensor  # [2 F, E]: gate and up projections in one matmul
    w_down: torch.Tensor  # [E, F]


class DecoderModel:
    def __init__(self, hf_model: Any, *, device: torch.device, dtype: torch.dtype, max_context: int):
        cfg = hf_model.config
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_context = max_context
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.shape = ModelShape(
            num_layers=cfg.num_hidden_layers,
            hidden=cfg.hidden_size,
            num_heads=cfg.num_attention_heads,
            num_kv_heads=cfg.num_key_value_heads,
            head_dim=head_dim,
            vocab=cfg.vocab_size,
            rms_eps=cfg.rms_norm_eps,
        )

        def w(t: torch.Tensor) -> torch.Tensor:
            return t.detach().to(device=self.device, dtype=dtype).contiguous()

        inner = hf_model.model
        self.layers: list[LayerWeights] = []
        for layer in inner.layers:
            att, mlp = layer.self_attn, layer.mlp
            biases = [p.bias for p in (att.q_proj, att.k_proj, att.v_proj)]
            self.layers.append(
                LayerWeights(
                    ln_attn=w(layer.input_layernorm.weight),
                    w_qkv=w(torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight])),
                    b_qkv=w(torch.cat(biases)) if all(b is not None for b in biases) else None,
                    w_o=w(att.o_proj.weight),
                    ln_mlp=w(layer.post_attention_layernorm.weight),
                    w_gate_up=w(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                    w_down=w(mlp.down_proj.weight),
                )
            )
        self.embed = w(inner.embed_tokens.weight)  # [V, E]
        lm_head = hf_model.lm_head.weight
        self.lm_head = self.embed if lm_head.data_ptr() == inner.embed_tokens.weight.data_ptr() else w(lm_head)
        self.norm = w(inner.norm.weight)  # [E]
        # RoPE tables for every position, computed as HF does (fp32, then cast), from the
        # model's own rotary module so any scaling it implements (llama3, yarn, ...) applies.
        rotary = inner.rotary_emb
        inv_freq = rotary.inv_freq.detach().float().cpu()  # [D/2]
        pos = torch.arange(max_context, dtype=torch.float32)
        freqs = pos[:, None] * inv_freq[None, :]  # [P, D/2]
        emb = torch.cat([freqs, freqs], dim=-1)  # [P, D]
        scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.cos = (emb.cos() * scale).to(device=self.device, dtype=dtype)  # [P, D]
        self.sin = (emb.sin() * scale).to(device=self.device, dtype=dtype)  # [P, D]
        self.scale = head_dim**-0.5

    def new_kv(self, rows: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeroed cache tensors [L, rows, Hkv, length, D]; zero (not empty) because masked
        positions still enter attention's weighted sum with weight 0, and 0 * NaN = NaN."""
        s = self.shape
        size = (s.num_layers, rows, s.num_kv_heads, length, s.head_dim)
        return (torch.zeros(size, device=self.device, dtype=self.dtype),
                torch.zeros(size, device=self.device, dtype=self.dtype))

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,  # [B, S] int64
        positions: torch.Tensor,  # [B, S] int64: each token's absolute position = its KV index
        cache_k: torch.Tensor,  # [L, B, Hkv, >=T, D], written at `positions`
        cache_v: torch.Tensor,  # [L, B, Hkv, >=T, D]
        kv_len: int,  # T: attend over cache positions [0, T); T > every position
        logit_index: torch.Tensor,  # [B] int64: which of the S tokens each row wants logits for
    ) -> torch.Tensor:  # [B, V] float32
        s = self.shape
        B, S = input_ids.shape
        H, Hkv, D, G = s.num_heads, s.num_kv_heads, s.head_dim, s.num_heads // s.num_kv_heads
        rows = torch.arange(B, device=self.device)
        # A key is visible to a query iff it is at or before the query's position; this
        # also hides other rows' padding and stale cache contents beyond a row's length.
        key_pos = torch.arange(kv_len, device=self.device)
        mask = key_pos[None, None, :] <= positions[:, :, None]  # [B, S, T]
        if S == 1:
            mask = mask[:, None]  # [B, 1, 1, T], broadcast over the G query heads per KV head
        else:
            mask = mask[:, None, None].expand(B, 1, G, S, kv_len).reshape(B, 1, G * S, kv_len)
        cos = self.cos[positions][:, :, None]  # [B, S, 1, D]
        sin = self.sin[positions][:, :, None]  # [B, S, 1, D]
        write_rows = rows[:, None].expand(B, S)  # [B, S]

        x = F.embedding(input_ids, self.embed)  # [B, S, E]
        for i, lw in enumerate(self.layers):
            h = self._rms_norm(x, lw.ln_attn)
            qkv = F.linear(h, lw.w_qkv, lw.b_qkv)  # [B, S, (H + 2 Hkv) D]
            qk = qkv[..., : (H + Hkv) * D].view(B, S, H + Hkv, D)  # rotate q and k together
            qk = qk * cos + self._rotate_half(qk) * sin  # [B, S, H + Hkv, D]
            v = qkv[..., (H + Hkv) * D :].view(B, S, Hkv, D)
            ck, cv = cache_k[i], cache_v[i]  # [B, Hkv, T', D]
            ck[write_rows, :, positions] = qk[:, :, H:]  # [B, S, Hkv, D] into [B, Hkv, T', D]
            cv[write_rows, :, positions] = v
            if S == 1:
                q = qk[:, 0, :H].view(B, Hkv, G, D)  # query heads grouped by their KV head
            else:  # [B, S, H, D] -> [B, Hkv, G * S, D]
                q = qk[:, :, :H].transpose(1, 2).reshape(B, Hkv, G * S, D)
            o = F.scaled_dot_product_attention(
                q, ck[:, :, :kv_len], cv[:, :, :kv_len], attn_mask=mask, scale=self.scale
            )  # [B, Hkv, G * S, D]
            if S == 1:
                o = o.reshape(B, 1, H * D)
            else:
                o = o.view(B, H, S, D).transpose(1, 2).reshape(B, S, H * D)
            x = x + F.linear(o, lw.w_o)  # [B, S, E]
            h = self._rms_norm(x, lw.ln_mlp)
            gate, up = F.linear(h, lw.w_gate_up).chunk(2, dim=-1)  # [B, S, F] each
            x = x + F.linear(F.silu(gate) * up, lw.w_down)
        last = x[rows, logit_index]  # [B, E]: only the positions whose logits are wanted
        return F.linear(self._rms_norm(last, self.norm), self.lm_head).float()  # [B, V]

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # As HF: normalise in fp32, cast back, then scale.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.shape.rms_eps)
        return weight * xf.to(x.dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    @torch.inference_mode()
    def prefill(
        self,
        prompts: list[list[int]],
        pasts: list[tuple[torch.Tensor, torch.Tensor] | None],
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
        """Run a batch of prompts (each optionally after a past KV prefix [L, Hkv, P, D]).

        Returns per prompt its full KV (past + prompt, [L, Hkv, P + n, D], on the model's
        device) and the logits [B, V] at each prompt's last token.
        """
        B = len(prompts)
        past_lens = [0 if p is None else int(p[0].shape[2]) for p in pasts]
        lens = [len(p) for p in prompts]
        S = max(lens)
        # One scratch position past the longest row takes every padding token's KV, so
        # padding never overwrites a real position and never sees past max_context.
        T = max(pl + n for pl, n in zip(past_lens, lens, strict=True)) + 1
        cache_k, cache_v = self.new_kv(B, T)
        ids = torch.zeros((B, S), dtype=torch.long)
        for b, (prompt, past) in enumerate(zip(prompts, pasts, strict=True)):
            ids[b, : lens[b]] = torch.tensor(prompt, dtype=torch.long)
            if past is not None:
                cache_k[:, b, :, : past_lens[b]] = past[0]
                cache_v[:, b, :, : past_lens[b]] = past[1]
        # Real tokens at past + i; padding at the scratch position T - 1, which is after
        # every real query's position and so invisible to it.
        offsets = torch.arange(S)[None, :]  # [1, S]
        positions = torch.tensor(past_lens)[:, None] + offsets  # [B, S]
        positions = torch.where(offsets < torch.tensor(lens)[:, None], positions, T - 1)
        logit_index = torch.tensor(lens) - 1
        logits = self.forward(
            ids.to(self.device), positions.to(self.device), cache_k, cache_v, T, logit_index.to(self.device)
        )
        kvs = [
            (cache_k[:, b, :, : past_lens[b] + lens[b]].contiguous(),
             cache_v[:, b, :, : past_lens[b] + lens[b]].contiguous())
            for b in range(B)
        ]
        return kvs, logits
