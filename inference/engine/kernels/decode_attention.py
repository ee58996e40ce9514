"""Decode attention on the CPU through decode_attention.c (why it exists: see there).

`load()` builds the kernel for this CPU (kernels/build.py) and returns a
DecodeAttention, or None with the reason logged; the model then keeps torch's SDPA.
Only the decode forward (one new token per row) uses it, for bf16 and fp32 caches.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .build import KernelUnavailable, build

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("decode_attention.c")
DTYPES = {torch.bfloat16: "decode_attention_bf16", torch.float32: "decode_attention_f32"}
# Rows per thread below which splitting a call across threads costs more than it saves.
MIN_ROWS_PER_THREAD = 4

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGTYPES = [_P, _L, _L, _P, _L, _L, _L, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float]


class DecodeAttention:
    def __init__(self, lib: ctypes.CDLL):
        self._fns = {}
        for dtype, name in DTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = _ARGTYPES, ctypes.c_int
            self._fns[dtype] = fn
        self._pool: ThreadPoolExecutor | None = None

    def supports(self, dtype: torch.dtype, device: torch.device) -> bool:
        return device.type == "cpu" and dtype in self._fns

    def __call__(self, q: torch.Tensor, kv: torch.Tensor, lens: torch.Tensor, out: torch.Tensor,
                 scale: float) -> None:
        """out[b] = softmax(q[b] K[b]^T scale) V[b] over positions [0, lens[b]).

        q [n, Hkv, G, D] (a KV head's G query heads one contiguous block), kv one layer's
        cache [n, 2 Hkv, T, D] (keys, then values), lens [n] int64, out [n, Hkv, G, D]
        contiguous, written in place. Releases the GIL while it runs (ctypes does), so
        rows split across threads run in parallel."""
        n, hkv, g, d = q.shape
        if not (q.stride(3) == 1 and q.stride(2) == d and kv.stride(3) == 1 and out.is_contiguous()
                and lens.dtype == torch.int64 and lens.is_contiguous() and kv.dtype == q.dtype == out.dtype):
            raise ValueError("decode attention: unsupported layout or dtype")
        fn = self._fns[q.dtype]
        args = (q.data_ptr(), q.stride(0), q.stride(1), kv.data_ptr(), kv.stride(0), kv.stride(1), kv.stride(2),
                lens.data_ptr(), out.data_ptr())
        with torch.profiler.record_function("decode_attention"):  # named in a torch profile
            self._run(fn, args, n, hkv, g, d, scale)

    def _run(self, fn, args: tuple, n: int, hkv: int, g: int, d: int, scale: float) -> None:
        threads = min(torch.get_num_threads(), n // MIN_ROWS_PER_THREAD)
        if threads <= 1:
            self._check(fn(*args, 0, n, hkv, g, d, scale))
            return
        if self._pool is None or self._pool._max_workers < threads - 1:
            self._pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="decode-attention")
        bounds = [n * i // threads for i in range(threads + 1)]
        futures = [self._pool.submit(fn, *args, bounds[i], bounds[i + 1], hkv, g, d, scale)
                   for i in range(1, threads)]
        self._check(fn(*args, bounds[0], bounds[1], hkv, g, d, scale))
        for f in futures:
            self._check(f.result())

    @staticmethod
    def _check(code: int) -> None:
        if code != 0:
            raise RuntimeError(f"decode attention kernel failed ({'shape too large' if code == -1 else 'no memory'})")


@functools.cache
def load() -> DecodeAttention | None:
    """The kernel for this CPU, or None (why is logged) where it cannot be built."""
    try:
        return DecodeAttention(ctypes.CDLL(str(build(SOURCE))))
    except (KernelUnavailable, OSError, AttributeError) as exc:
        log.warning("decode attention kernel unavailable, using torch's SDPA: %s", exc)
        return None
