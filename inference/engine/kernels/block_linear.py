"""Matmuls over a GGUF file's Q4_1 and Q8_0 weight blocks, for a few fp32 or bf16 rows,
through block_linear.c (why it exists and the layouts: see there).

`Blocks` holds one weight matrix in the kernel's layout, repacked once from the file's
bytes (`Blocks.from_gguf`); `load()` builds the kernel for this CPU and returns a
BlockLinear where it can run (AVX2 and FMA; bf16 rows also need AVX512-BF16), else None
(the reason logged), and the engine keeps torch's matmuls on the model's weights.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .build import load_library
from .calls import MIN_FEATURES_PER_THREAD, kernel_threads, run_once, run_split

SOURCE = Path(__file__).with_name("block_linear.c")
KINDS = {"Q4_1": 0, "Q8_0": 1}  # block_linear.c's kind codes, by GGUF type name
BLOCK = 32  # weights per block in both types

_P, _L, _I, _F = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float


@dataclass(frozen=True)
class Blocks:
    """W [n, k] as `kind` blocks: qs (uint8, see block_linear.c), d and m [n, k / 32] fp32
    (the file's fp16 widened; m None for Q8_0), or fp16 for bf16 rows (`with_scales`)."""

    kind: str
    qs: torch.Tensor
    d: torch.Tensor
    m: torch.Tensor | None
    n: int
    k: int

    @classmethod
    def from_gguf(cls, kind: str, raw: np.ndarray) -> Blocks:
        """From a GGUF tensor's bytes [n, k / 32 * block bytes], rows as the file holds them."""
        n = raw.shape[0]
        if kind == "Q4_1":  # per block: d fp16, m fp16, 16 bytes (weight j low nibble, j + 16 high)
            b = raw.reshape(n, -1, 20)
            d, m = (_fp16(b[..., i : i + 2]) for i in (0, 2))
            q = np.concatenate([b[..., 4:] & 15, b[..., 4:] >> 4], axis=-1).reshape(n, -1, 2, 2, 8)
            qs = q[..., 0, :] | (q[..., 1, :] << 4)  # byte j of half h: weights 16h + j, 16h + 8 + j
        elif kind == "Q8_0":  # per block: d fp16, 32 int8
            b = raw.reshape(n, -1, 34)
            d, m, qs = _fp16(b[..., 0:2]), None, b[..., 2:]
        else:
            raise ValueError(f"no kernel for {kind} blocks")
        nb = b.shape[1]
        return cls(kind, torch.from_numpy(np.ascontiguousarray(qs).reshape(n, -1)), torch.from_numpy(d),
                   None if m is None else torch.from_numpy(m), n, nb * BLOCK)

    def dequantize(self) -> torch.Tensor:
        """W [n, k] fp32, as the GGUF reader dequantizes it (d q + m, in fp32)."""
        nb = self.k // BLOCK
        if self.kind == "Q4_1":
            h = self.qs.view(self.n, nb, 2, 1, 8)
            q = torch.cat([h & 15, h >> 4], dim=3).view(self.n, nb, BLOCK).float()
            return (self.d[..., None] * q + self.m[..., None]).reshape(self.n, self.k)
        q = self.qs.view(torch.int8).view(self.n, nb, BLOCK).float()
        return (self.d[..., None] * q).reshape(self.n, self.k)

    def rows(self, order: torch.Tensor) -> Blocks:
        """The same weights with their rows (output features) taken in `order`."""
        m = None if self.m is None else self.m[order].contiguous()
        return Blocks(self.kind, self.qs[order].contiguous(), self.d[order].contiguous(), m, len(order), self.k)

    @staticmethod
    def cat(parts: list[Blocks]) -> Blocks:
        """Row-wise concatenation (a fused q|k|v or gate|up weight); one kind, one width."""
        if len({(p.kind, p.k) for p in parts}) != 1:
            raise ValueError("blocks of different kinds or widths do not concatenate")
        first = parts[0]
        m = None if first.m is None else torch.cat([p.m for p in parts])
        return Blocks(first.kind, torch.cat([p.qs for p in parts]), torch.cat([p.d for p in parts]), m,
                      sum(p.n for p in parts), first.k)

    def with_scales(self, dtype: torch.dtype) -> Blocks:
        """The same blocks with d and m held as `dtype` (fp16 is the file's own: exact)."""
        if self.d.dtype == dtype:
            return self
        m = None if self.m is None else self.m.to(dtype)
        return Blocks(self.kind, self.qs, self.d.to(dtype), m, self.n, self.k)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.qs, self.d, self.m) if t is not None)


def _fp16(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view(np.float16)[..., 0].astype(np.float32)


class BlockLinear:
    """x W^T over Blocks for a few rows: fp32 rows anywhere with AVX2/FMA, bf16 rows (with
    an RMSNorm scale `ln` folded in, as linear.py's packed weights have it) where the CPU
    has AVX512-BF16 too (`bf16`)."""

    def __init__(self, lib: ctypes.CDLL):
        self._linear = lib.block_linear_f32
        self._linear.argtypes, self._linear.restype = [_I, _P, _P, _P, _P, _P, _P, _P, _L, _L, _L, _L, _L, _I], _I
        self._swiglu = lib.block_swiglu_f32
        self._swiglu.argtypes, self._swiglu.restype = [_I, _P, _P, _P, _P, _P, _L, _L, _L, _L, _L, _I], _I
        self._linear_bf16 = lib.block_linear_bf16
        self._linear_bf16.argtypes, self._linear_bf16.restype = [_I, *[_P] * 4, _F, *[_P] * 4, *[_L] * 5, _I], _I
        self._swiglu_bf16 = lib.block_swiglu_bf16
        self._swiglu_bf16.argtypes, self._swiglu_bf16.restype = [_I, *[_P] * 4, _F, _P, _P, *[_L] * 5, _I], _I
        self._mlp_bf16 = lib.block_mlp_bf16
        self._mlp_bf16.argtypes, self._mlp_bf16.restype = [_I, *[_P] * 4, _F, _I, *[_P] * 5, *[_L] * 3, _I], _I
        self.max_rows = int(lib.block_linear_max_rows())
        self.bf16 = bool(lib.block_linear_bf16_supported())
        # Whether a call splits its columns across torch's threads itself (the kernel's
        # OpenMP build); if not, only a matrix wide enough to repay a Python pool is split.
        self.parallel = bool(lib.block_linear_parallel())

    def bind(self, w: Blocks, b: torch.Tensor | None = None, ln: torch.Tensor | None = None, *,
             dtype: torch.dtype) -> BoundBlocks:
        """The kernel on w (+ b) for rows of `dtype`, checked and laid out once: what a
        model's matmul calls every step. `ln` [K] fp32: bf16 only (scales the rows)."""
        return BoundBlocks(self, w, b, ln, dtype)

    def linear(self, w: Blocks, b: torch.Tensor | None, x: torch.Tensor,
               residual: torch.Tensor | None = None, ln: torch.Tensor | None = None,
               norm_eps: float | None = None) -> torch.Tensor:
        """x W^T (+ b) (+ residual) for x [..., K] of at most max_rows rows, fp32 or bf16
        (the output's dtype). bf16 only: `ln` [K] scales x first; `norm_eps`: x is
        RMS-normalized before that (x / sqrt(mean(x^2) + eps))."""
        return self.bind(w, b, ln, dtype=x.dtype).linear(x, residual, norm_eps)

    def swiglu(self, w: Blocks, x: torch.Tensor, ln: torch.Tensor | None = None,
               norm_eps: float | None = None) -> torch.Tensor:
        """silu(x Wg^T) * x Wu^T, W = [Wg; Wu], for x [..., K] of at most max_rows rows, fp32
        or bf16; `ln`, `norm_eps` as for linear."""
        return self.bind(w, None, ln, dtype=x.dtype).swiglu(x, norm_eps)

    @staticmethod
    def prepare(w: Blocks, dtype: torch.dtype) -> Blocks:
        """w laid out for rows of `dtype`: the bf16 loop reads the scales as the file's fp16
        (fewer bytes, widened 16 at a time), the fp32 loop as fp32."""
        return w.with_scales(_scale_dtype(dtype))



class BoundBlocks:
    """BlockLinear on one weight's blocks, for rows of one dtype (BlockLinear.bind)."""

    def __init__(self, kernel: BlockLinear, w: Blocks, b: torch.Tensor | None, ln: torch.Tensor | None,
                 dtype: torch.dtype):
        bf16 = dtype == torch.bfloat16
        if dtype not in ((torch.float32, torch.bfloat16) if kernel.bf16 else (torch.float32,)):
            raise ValueError(f"block linear: no kernel for {dtype} rows on this CPU")
        if w.d.dtype != _scale_dtype(dtype):
            raise ValueError(f"block linear: {dtype} rows take the blocks as BlockLinear.prepare lays them out")
        if not bf16:
            _no_fold(ln, None)
        self.max_rows, self.dtype, self.n, self.k = kernel.max_rows, dtype, w.n, w.k
        b = None if b is None else _same(b, (w.n,), dtype, "bias")
        ln = None if ln is None else _same(ln, (w.k,), torch.float32, "folded norm scale")
        self._keep = (w, b, ln)  # the pointers below point into these
        self._head = (KINDS[w.kind], *_ptrs(w), *((0 if ln is None else ln.data_ptr(),) if bf16 else ()))
        self._bias = 0 if b is None else b.data_ptr()
        self._linear = kernel._linear_bf16 if bf16 else kernel._linear
        self._swiglu = kernel._swiglu_bf16 if bf16 else kernel._swiglu
        self._kernel_mlp = kernel._mlp_bf16
        self._bf16 = bf16
        self._parallel = kernel.parallel

    def linear(self, x: torch.Tensor, residual: torch.Tensor | None = None,
               norm_eps: float | None = None) -> torch.Tensor:
        x, rows = self._rows(x)
        out = torch.empty(*x.shape[:-1], self.n, dtype=self.dtype)
        if residual is not None:
            residual = _same(residual, out.shape, self.dtype, "residual")
        tail = (x.data_ptr(), self._bias, 0 if residual is None else residual.data_ptr(), out.data_ptr())
        self._run(self._linear, self._args(norm_eps, tail), self.n, (self.k, rows, self.n))
        return out

    def swiglu(self, x: torch.Tensor, norm_eps: float | None = None) -> torch.Tensor:
        """silu(x Wg^T) * x Wu^T, the weight [Wg; Wu]."""
        x, rows = self._rows(x)
        f = self.n // 2
        out = torch.empty(*x.shape[:-1], f, dtype=self.dtype)
        self._run(self._swiglu, self._args(norm_eps, (x.data_ptr(), out.data_ptr())), f, (self.k, rows, f))
        return out

    def mlp(self, down: BoundBlocks, x: torch.Tensor, norm_eps: float | None = None) -> torch.Tensor:
        """x + down(silu(x Wg^T) * x Wu^T), this the [Wg; Wu] of a layer's MLP and `down` its
        down projection (no bias): one call for the two matmuls, bf16 rows."""
        x, rows = self._rows(x)
        f = self.n // 2
        if not (self._bf16 and down._bf16 and down.k == f and down.n == self.k and not down._bias):
            raise ValueError("block linear: an MLP takes bf16 [Wg; Wu] of 2F rows and a down projection [K, F]")
        out = torch.empty_like(x)
        args = (*self._head, _eps(norm_eps), *down._head[:4], x.data_ptr(), out.data_ptr(), self.k, f, rows,
                kernel_threads(self._parallel))
        run_once("block_linear", self._kernel_mlp, args, _check)
        return out

    def _args(self, norm_eps: float | None, tail: tuple) -> tuple:
        if self._bf16:
            return (*self._head, _eps(norm_eps), *tail)
        _no_fold(None, norm_eps)
        return (*self._head, *tail)

    def _run(self, fn, head: tuple, n: int, tail: tuple) -> None:
        run_split("block_linear", fn, head, n, tail, MIN_FEATURES_PER_THREAD, _check, splits_itself=self._parallel)

    def _rows(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        k = self.k
        if x.dtype != self.dtype or x.shape[-1] != k or not 1 <= x.numel() // k <= self.max_rows:
            raise ValueError(f"block linear: 1 to {self.max_rows} {str(self.dtype).removeprefix('torch.')} "
                             "rows of the weight's width")
        return x.contiguous(), x.numel() // k


def _scale_dtype(rows: torch.dtype) -> torch.dtype:
    return torch.float16 if rows == torch.bfloat16 else torch.float32


def _ptrs(w: Blocks) -> tuple[int, int, int]:
    return w.qs.data_ptr(), w.d.data_ptr(), 0 if w.m is None else w.m.data_ptr()


def _same(t: torch.Tensor, shape: tuple, dtype: torch.dtype, what: str) -> torch.Tensor:
    if t.dtype != dtype or t.numel() != math.prod(shape):
        raise ValueError(f"block linear: the {what} must be {str(dtype).removeprefix('torch.')} of shape {tuple(shape)}")
    return t.contiguous()


def _no_fold(ln: torch.Tensor | None, norm_eps: float | None) -> None:
    if ln is not None or norm_eps is not None:  # an fp32 model keeps its norms as HF runs them
        raise ValueError("block linear: a norm (scale or RMS) in the matmul takes bf16 rows")


def _eps(norm_eps: float | None) -> float:
    if norm_eps is not None and not norm_eps >= 0:
        raise ValueError("block linear: the norm's eps must be >= 0")
    return -1.0 if norm_eps is None else float(norm_eps)


def _check(code: int) -> None:
    if code != 0:
        raise RuntimeError("block linear kernel failed: unsupported on this CPU or shape")


@functools.cache
def load() -> BlockLinear | None:
    """The kernel for this CPU, or None (why is logged) where it cannot run."""
    lib = load_library(SOURCE, fallback="the fp32 weights serve every batch", supported="block_linear_supported",
                       unsupported="this CPU has no AVX2/FMA")
    return None if lib is None else BlockLinear(lib)
