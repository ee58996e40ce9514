"""One-row bf16 matmuls on the CPU through row_linear.c (why it exists: see there).

`load()` builds it for this CPU and returns a RowLinear where the CPU has AVX512-BF16,
else None (the reason logged), and the engine keeps oneDNN for every batch size.
linear.py's packed Linear uses it for a single row, which needs its weights row-major
beside oneDNN's packed copy: a bf16 model's weights take twice their size in memory.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from .build import load_library
from .calls import MIN_FEATURES_PER_THREAD, run_split

SOURCE = Path(__file__).with_name("row_linear.c")


_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int


class RowLinear:
    def __init__(self, lib: ctypes.CDLL):
        self._linear = lib.row_linear_bf16
        self._linear.argtypes, self._linear.restype = [_P, _P, _P, _P, _P, _L, _L, _L, _I], _I
        self._swiglu = lib.row_swiglu_bf16
        self._swiglu.argtypes, self._swiglu.restype = [_P, _P, _P, _P, _L, _L, _L, _I], _I
        # Whether a call splits its rows across torch's threads itself (the OpenMP build).
        self.parallel = bool(lib.row_linear_parallel())

    @staticmethod
    def fits(w: torch.Tensor) -> bool:
        """Weights this kernel takes: bf16 [N, K], row-major, K a multiple of 32."""
        return w.dtype == torch.bfloat16 and w.dim() == 2 and w.is_contiguous() and w.shape[1] % 32 == 0

    def linear(self, w: torch.Tensor, b: torch.Tensor | None, x: torch.Tensor,
               residual: torch.Tensor | None = None) -> torch.Tensor:
        """x W^T (+ b) (+ residual) for one row x [..., K] (every leading dim 1), bf16."""
        n, k = w.shape
        x = _one_row(x, k)
        out = torch.empty(*x.shape[:-1], n, dtype=torch.bfloat16)
        if residual is not None and not (residual.is_contiguous() and residual.numel() == n
                                         and residual.dtype == torch.bfloat16):
            raise ValueError("row linear: the residual must be one contiguous bf16 row")
        head = (w.data_ptr(), 0 if b is None else b.data_ptr(), x.data_ptr(),
                0 if residual is None else residual.data_ptr(), out.data_ptr())
        self._run(self._linear, head, n, k)
        return out

    def swiglu(self, w_gate: torch.Tensor, w_up: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """silu(x Wg^T) * x Wu^T for one row x [..., K], bf16."""
        n, k = w_gate.shape
        x = _one_row(x, k)
        out = torch.empty(*x.shape[:-1], n, dtype=torch.bfloat16)
        self._run(self._swiglu, (w_gate.data_ptr(), w_up.data_ptr(), x.data_ptr(), out.data_ptr()), n, k)
        return out

    def _run(self, fn, head: tuple, n: int, k: int) -> None:
        run_split("row_linear", fn, head, n, (k,), MIN_FEATURES_PER_THREAD, _check, splits_itself=self.parallel)


def _one_row(x: torch.Tensor, k: int) -> torch.Tensor:
    if x.numel() != k or x.shape[-1] != k or x.dtype != torch.bfloat16:
        raise ValueError("row linear: one bf16 row of the weight's width")
    return x.contiguous()


def _check(code: int) -> None:
    if code != 0:
        raise RuntimeError("row linear kernel failed: unsupported on this CPU or shape")


@functools.cache
def load() -> RowLinear | None:
    """The kernel for this CPU, or None (why is logged) where it cannot run."""
    lib = load_library(SOURCE, fallback="oneDNN serves one row too", supported="row_linear_supported",
                       unsupported="this CPU has no AVX512-BF16")
    return None if lib is None else RowLinear(lib)
