"""Engine configuration: which weights, on which device and dtype, and the sizes of the
batches and caches. Owns resolving "auto" choices against the machine it runs on and
applying the CPU thread settings; it loads nothing and holds no state of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
# What `dtype` may name: a torch dtype, or "int8" (int8 weights, fp32 activations and KV).
PRECISIONS = (*DTYPES, "int8")


@dataclass
class EngineConfig:
    # A Hugging Face model directory, or an id already in the local HF cache (never fetched).
    model: str | Path
    device: str = "auto"  # "auto" | "cpu" | "cuda" | "cuda:N"
    # "auto" | "bfloat16" | "float32" | "float16" | "int8" (int8 weights; see resolve_precision)
    dtype: str = "auto"
    # Our CPU kernels (inference/engine/kernels: decode attention, one-row bf16 matmuls):
    # "auto" where they build, "ours" (fail where the decode attention kernel cannot run)
    # or "torch" (torch's ops only).
    kernels: str = "auto"
    # Torch intra-op threads; None = one per core this process may run on.
    num_threads: int | None = None
    # Core ids to pin this process to (os.sched_setaffinity), e.g. to keep a prefill and a
    # decode worker on the same host from fighting over cores. None = leave as is.
    cpu_affinity: list[int] | None = None
    # Decode: at most this many sequences step together (slots of the batch KV cache).
    max_batch: int = 64
    # Decode: KV tokens the running batch may hold in all, each sequence reserving
    # min(prompt + max_tokens, max_context) when it joins. None = max_batch * max_context.
    kv_token_budget: int | None = None
    # Longest sequence (prompt + output) the engine serves; also the RoPE table's length.
    max_context: int = 2048
    # Prefill: prompts per forward, and an upper bound on padded tokens per forward.
    prefill_max_batch: int = 8
    prefill_max_tokens: int = 8192
    # Colocated engine: while streams decode, prompts run in chunks of `prefill_chunk`
    # tokens, one chunk a step, so a long prompt delays each running stream's next token by
    # one chunk, not by the whole prompt (on 2 CPU cores a 128-token chunk costs about one
    # decode step of a large batch). False: whole prompts, a little more throughput and
    # stalls as long as the prompts (docs/benchmarks-engine.md).
    chunked_prefill: bool = True
    prefill_chunk: int = 128
    # Prefix cache: KV tokens kept for reuse (0 disables it) and the block size of its keys.
    prefix_cache_tokens: int = 16384
    prefix_block: int = 32

    def __post_init__(self) -> None:
        if self.kv_token_budget is None:
            self.kv_token_budget = self.max_batch * self.max_context
        if self.kv_token_budget < self.max_context:
            # Every admissible sequence must fit an empty batch, or it would wait forever.
            raise ValueError("kv_token_budget must be at least max_context")
        if self.dtype not in ("auto", *PRECISIONS):
            raise ValueError(f"unknown dtype {self.dtype!r}")
        if self.kernels not in ("auto", "ours", "torch"):
            raise ValueError(f"unknown kernels {self.kernels!r}")
        if self.max_batch < 1 or self.prefill_max_batch < 1 or self.prefill_chunk < 1:
            raise ValueError("batch sizes and prefill_chunk must be positive")

    def resolve_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def resolve_precision(self, device: torch.device | None = None) -> str:
        """What the model runs in: a name from PRECISIONS, "auto" decided for this
        machine and these weights (precision.py says how)."""
        if self.dtype != "auto":
            return self.dtype
        from .precision import auto_precision

        return auto_precision(device or self.resolve_device(), self.model or None)

    def resolve_dtype(self, device: torch.device | None = None) -> torch.dtype:
        """The torch dtype of activations and the KV cache (fp32 for int8 weights)."""
        precision = self.resolve_precision(device)
        return torch.float32 if precision == "int8" else DTYPES[precision]

    def resolve_weights(self, device: torch.device | None = None) -> str:
        """ "int8" or "native" (weights in resolve_dtype's dtype)."""
        return "int8" if self.resolve_precision(device) == "int8" else "native"

    def apply_cpu_settings(self) -> None:
        """Pin cores and set torch's thread count; never leave them to chance."""
        if self.cpu_affinity is not None and hasattr(os, "sched_setaffinity"):
            pin_process(set(self.cpu_affinity))
        threads = self.num_threads
        if threads is None:
            threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        torch.set_num_threads(max(1, int(threads or 1)))


def pin_process(cores: set[int]) -> None:
    """Pin every thread of this process, not only the caller: on Linux sched_setaffinity
    applies to one thread, and torch's OpenMP threads (or a Celery pool's) may already
    exist. Threads started later inherit the caller's mask."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:  # the thread ended meanwhile
            pass
