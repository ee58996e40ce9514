"""Decode attention on the CPU through decode_attention.c (why it exists: see there).

`load()` builds the kernel for this CPU (kernels/build.py) and returns a
DecodeAttention, or None with the reason logged; the model then keeps torch's SDPA.
Only the decode forward (one new token per row) uses it, for bf16 and fp32 caches: per
layer, one call does the new token's RoPE, its KV write and its attention.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path

import torch

from .build import KernelUnavailable, build
from .calls import run_split

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("decode_attention.c")
DTYPES = {torch.bfloat16: "decode_layer_bf16", torch.float32: "decode_layer_f32"}
# Rows per thread below which splitting a call across a Python pool (a build without
# OpenMP) costs more than it saves.
MIN_ROWS_PER_THREAD = 4

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGTYPES = [_P, _P, _P, _L, _P, _P, _L, _L, _L, _L, _P, _I, _I, _I, _I, _I, ctypes.c_float, _I]
_ERRORS = {-1: "head count or size beyond the kernel's", -2: "out of memory", -3: "a position outside the cache"}


class DecodeAttention:
    def __init__(self, lib: ctypes.CDLL):
        self._fns = {}
        for dtype, name in DTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = _ARGTYPES, ctypes.c_int
            self._fns[dtype] = fn
        # Whether a call splits its rows across torch's threads itself (the OpenMP build).
        self.parallel = bool(lib.decode_attention_parallel())

    def supports(self, dtype: torch.dtype, device: torch.device) -> bool:
        return device.type == "cpu" and dtype in self._fns

    def __call__(self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor,
                 kv: torch.Tensor, out: torch.Tensor, num_heads: int, scale: float) -> None:
        """One layer's decode attention for n rows (one new token each), in place.

        qkv [n, H + 2 Hkv, D] contiguous: the qkv matmul's output (its q and k heads get
        RoPE in place); cos, sin [P, D] the model's RoPE tables (sin with its first half
        negated); pos [n] int64 each row's position; kv one layer's cache [n, 2 Hkv, T, D]
        (keys, then values), where each row's new k and v are written at its position;
        out [n, Hkv, G, D] contiguous: softmax(q K^T scale) V over positions [0, pos].
        The OpenMP build splits the rows across torch's threads itself; otherwise pieces
        go to a Python pool (ctypes releases the GIL while a call runs)."""
        n, heads, d = qkv.shape
        hkv = kv.shape[1] // 2
        if not (qkv.is_contiguous() and kv.stride(3) == 1 and out.is_contiguous() and cos.is_contiguous()
                and sin.is_contiguous() and cos.shape == sin.shape and cos.shape[1] == d == kv.shape[3]
                and heads == num_heads + 2 * hkv and kv.shape[0] >= n and out.shape[0] == n
                and out.numel() == n * num_heads * d and pos.dtype == torch.int64 and pos.is_contiguous()
                and pos.shape == (n,) and qkv.dtype == kv.dtype == out.dtype == cos.dtype == sin.dtype):
            raise ValueError("decode attention: unsupported layout or dtype")
        fn = self._fns[qkv.dtype]
        args = (qkv.data_ptr(), cos.data_ptr(), sin.data_ptr(), cos.shape[0], pos.data_ptr(), kv.data_ptr(),
                kv.stride(0), kv.stride(1), kv.stride(2), kv.shape[2], out.data_ptr())
        tail = (num_heads, hkv, d, scale)
        run_split("decode_attention", fn, args, n, tail, MIN_ROWS_PER_THREAD, self._check, splits_itself=self.parallel)

    @staticmethod
    def _check(code: int) -> None:
        if code != 0:
            raise RuntimeError(f"decode attention kernel failed: {_ERRORS.get(code, code)}")


@functools.cache
def load() -> DecodeAttention | None:
    """The kernel for this CPU, or None (why is logged) where it cannot be built."""
    try:
        return DecodeAttention(ctypes.CDLL(str(build(SOURCE))))
    except (KernelUnavailable, OSError, AttributeError) as exc:
        log.warning("decode attention kernel unavailable, using torch's SDPA: %s", exc)
        return None
