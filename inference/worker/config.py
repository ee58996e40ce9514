"""How a model worker is configured: its role, its pool, and its engine, from the
environment (the same variables in `make run`, docker-compose and by hand)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings

from ..engine.config import EngineConfig

ROLES = ("cpu", "prefill", "decode", "colocated")


@dataclass(frozen=True)
class WorkerConfig:
    role: str
    pool: str
    kv_url: str
    engine: EngineConfig


def _int_list(value: str | None) -> list[int] | None:
    if not value:
        return None
    return [int(x) for x in value.replace(" ", "").split(",") if x]


def worker_config_from_env() -> WorkerConfig:
    role = os.environ.get("TANDEM_ROLE", "cpu")
    if role not in ROLES:
        raise ValueError(f"TANDEM_ROLE must be one of {ROLES}, not {role!r}")
    threads = os.environ.get("TANDEM_THREADS")
    engine = EngineConfig(
        model=settings.TANDEM_MODEL,
        device=os.environ.get("TANDEM_DEVICE", "auto"),
        # auto | bfloat16 | float32 | float16 | int8 (int8 weights, fp32 activations); what
        # "auto" picks on this CPU for these weights: inference/engine/precision.py.
        dtype=os.environ.get("TANDEM_DTYPE", "auto"),
        # auto | ours | torch: the engine's own CPU kernels (inference/engine/kernels).
        kernels=os.environ.get("TANDEM_KERNELS", "auto"),
        num_threads=int(threads) if threads else None,
        cpu_affinity=_int_list(os.environ.get("TANDEM_CPU_AFFINITY")),
        max_batch=int(os.environ.get("TANDEM_MAX_BATCH", "64")),
        max_context=settings.TANDEM_MAX_CONTEXT,
        prefill_max_batch=int(os.environ.get("TANDEM_PREFILL_MAX_BATCH", "8")),
        # colocated workers: 1 = prompts in chunks while streams decode, 0 = whole prompts
        chunked_prefill=os.environ.get("TANDEM_CHUNKED_PREFILL", "1") != "0",
    )
    return WorkerConfig(
        role=role,
        pool=os.environ.get("TANDEM_POOL", "shared"),
        kv_url=os.environ.get("TANDEM_KV_URL", settings.REDIS_URL),
        engine=engine,
    )
