"""Where the benchmarks read and write: the repository root (relative `--out` paths and
git's state), var/bench/ (results, throwaway databases, logs) and the model they serve
(the product's default, prepared by `make model`)."""

from __future__ import annotations

from pathlib import Path

from inference.engine.prepare import DEFAULT_DIR as MODEL_DIR

BASE_DIR = Path(__file__).resolve().parents[1]
BENCH_DIR = BASE_DIR / "var" / "bench"

__all__ = ["BASE_DIR", "BENCH_DIR", "MODEL_DIR"]
