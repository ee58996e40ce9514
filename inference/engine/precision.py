"""Which precision "auto" serves a model in on this machine, and the quality verdicts
that let int8 be among the choices.

On a GPU: bf16. On a CPU, read at run time (never assumed):
- AMX-BF16 (Intel Sapphire Rapids and later): bf16. oneDNN's AMX tiles were the fast
  path measured there, and FBGEMM's int8 kernels do not use AMX.
- int8 VNNI (AVX512-VNNI, AVX-VNNI) and torch's FBGEMM engine, *and* a recorded verdict
  that this model's int8 weights meet the quality bar: int8. The verdict is measured, not
  guessed: `python -m benchmarks.engine.quality --record` compares int8 with bf16 on the
  project's support text (top-1 agreement >= 97%, perplexity within 3%) and writes
  QUALITY_FILE into the model directory, keyed by the weights' fingerprint. Without a
  passing verdict for these very weights, int8 is never picked by itself.
- native bf16 units (AVX512-BF16): bf16.
- otherwise fp32 (bf16 without native units is emulated, slower than fp32).

SmolLM2-135M, measured on an AMD EPYC Zen 4 (AVX512-BF16 + VNNI, no AMX): int8 runs a
decode step's matmuls about twice as fast as bf16 but fails the bar (FBGEMM quantizes
activations with one scale per call; see docs/benchmarks-engine.md), so auto serves it
in bf16 there; TANDEM_DTYPE=int8 serves it in int8 anyway.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch

from . import cpu
from .fingerprint import model_fingerprint

QUALITY_FILE = "tandem-quality.json"  # {"int8": {"fingerprint", "passes", "agreement", ...}}


def auto_precision(device: torch.device, model: str | Path | None = None) -> str:
    """The rule the module docstring describes."""
    if device.type != "cpu":
        return "bfloat16"
    from .linear import can_int8

    if cpu.cpu_has_amx_bf16():
        return "bfloat16"
    if cpu.cpu_has_vnni() and model is not None and int8_verdict(str(model)) and can_int8(device):
        return "int8"
    return "bfloat16" if cpu.cpu_has_bf16() else "float32"


@lru_cache(maxsize=8)
def int8_verdict(model: str) -> bool:
    """True when the model directory records that these weights' int8 form passed."""
    path = Path(model).expanduser()
    try:
        record = json.loads((path / QUALITY_FILE).read_text()).get("int8") or {}
    except (OSError, ValueError):
        return False
    if not record.get("passes"):
        return False
    try:
        return record.get("fingerprint") == model_fingerprint(path)
    except Exception:  # noqa: BLE001 - unreadable weights: no verdict
        return False


def record_verdict(model_dir: str | Path, precision: str, verdict: dict) -> Path:
    """Write (or replace) `precision`'s verdict in the model directory's QUALITY_FILE."""
    path = Path(model_dir) / QUALITY_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[precision] = {**verdict, "fingerprint": model_fingerprint(Path(model_dir))}
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    int8_verdict.cache_clear()
    return path
