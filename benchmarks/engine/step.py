"""One decode step, taken apart: `python -m benchmarks.engine.step`.

The decode forward (DecoderModel.forward, one token per row) at given batch sizes and
cache lengths, on one pinned core with one thread (as the disaggregated decode worker
runs it), for each precision asked for, interleaved (A, B, A, B, ...) so that a shared
machine's noise falls on every variant alike. Reports per variant the median step time
and, from a torch profile of a few steps, where it goes: the matmuls, attention (our
decode kernel, which also does RoPE and the KV write, or SDPA), the KV write (SDPA's
path) and everything else; attention's effective read rate (KV bytes the step's
attention reads / its time); and the step's memory-bandwidth utilisation (MBU: weight
and KV bytes it must read / its time / the machine's single-thread read bandwidth).
`--kernels auto,torch` compares our kernels with torch's ops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from ..machine import describe, load_average, machine_info, measured_on, memory_bandwidth_gbs
from ..paths import MODEL_DIR
from ..report import say, table, write_json

MATMUL_OPS = ("linear_dynamic", "_linear_pointwise", "aten::linear", "aten::addmm", "aten::mm", "row_linear",
              "block_linear")
BYTES_PER_WEIGHT = {"bfloat16": 2, "int8": 1, "float32": 4}


def build(model_dir: str, precision: str, max_context: int, kernels: str = "auto"):
    from inference.engine.config import EngineConfig
    from inference.engine.loader import load_model

    return load_model(EngineConfig(model=model_dir, device="cpu", dtype=precision, max_context=max_context,
                                   num_threads=1, kernels=kernels)).model


def make_step(model, batch: int, context: int):
    """A closure running one decode forward of `batch` rows over `context` cached positions."""
    import torch

    from inference.engine.model import CacheGroup

    dev = model.device
    cache = model.new_kv(batch, context + 1)
    ids = torch.randint(100, 40000, (batch, 1), device=dev)
    pos = torch.full((batch, 1), context, device=dev)
    zeros = torch.zeros(batch, dtype=torch.long, device=dev)
    group = [CacheGroup(cache, 0, context + 1)]

    def step():
        return model.forward(ids, pos, group, zeros)

    return step


def weight_bytes(model_dir: str, precision: str, model=None, batch: int = 1) -> int:
    """The weight bytes one decode step streams: every layer's matmuls and the LM head
    (the embedding is only indexed), at 2 bytes per bf16 weight, 1 per int8, 4 per fp32;
    a matmul that `model` runs on GGUF blocks at this batch reads the blocks' bytes."""
    full = _weight_count(model_dir) * BYTES_PER_WEIGHT[precision]
    for blocks in _blocks_read(model, batch) if model is not None else ():
        full += blocks.nbytes - blocks.n * blocks.k * BYTES_PER_WEIGHT[precision]
    return full


def _blocks_read(model, batch: int) -> list:
    """The GGUF blocks a decode step of `batch` rows reads instead of weights."""
    import torch

    from inference.engine.kernels.block_linear import Blocks

    probe = torch.empty(batch, 1, 1)
    return [lin.few.w for lin in model.linears()
            if lin.few is not None and isinstance(lin.few.w, Blocks) and lin.few.takes(probe, lin.few.halves)]


def _weight_count(model_dir: str) -> int:
    import json
    from pathlib import Path

    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    e, f, layers, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    d = cfg.get("head_dim") or e // cfg["num_attention_heads"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    per_layer = (heads + 2 * kv_heads) * d * e + e * heads * d + 3 * e * f
    return layers * per_layer + vocab * e


def kv_bytes_read(model, batch: int, context: int) -> int:
    """What one step's attention must read: every row's keys and values, all layers."""
    return batch * (context + 1) * model.kv_bytes_per_token


def profile(step, model, batch: int, context: int, steps: int = 5) -> dict:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from inference.engine.kernels import calls

    calls.PROFILE = True  # our kernels' calls get a name in the profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    parts = {"matmul": 0.0, "attention": 0.0, "kv_write": 0.0}
    total = 0.0
    for ev in prof.key_averages():
        name = ev.key
        own = ev.self_cpu_time_total / 1e3 / steps  # ms per step
        total += own
        if any(k in name for k in MATMUL_OPS):
            parts["matmul"] += own
        elif "scaled_dot_product" in name or "flash_attention" in name or name == "decode_attention":
            parts["attention"] += own
        elif "index_copy" in name:
            parts["kv_write"] += own
    calls.PROFILE = False
    parts["other"] = max(0.0, total - sum(parts.values()))
    parts["profiled_total"] = total
    kv = kv_bytes_read(model, batch, context)
    parts["attention_gbs"] = kv / (parts["attention"] / 1e3) / 1e9 if parts["attention"] else None
    parts["kv_mb"] = kv / 1e6
    return parts


def matmul_peak(rows: int = 512, k: int = 576, n: int = 3072, reps: int = 20) -> dict:
    """The best rate one core reaches on a decode-layer-shaped matmul (x [rows, k] W^T, W
    [n, k], weights in cache), for each kernel the engine can use: the compute limit."""
    import torch

    from inference.engine.linear import Linear, can_int8, can_pack

    flop = 2 * rows * k * n
    out = {}
    w = torch.randn(n, k) * 0.05
    kinds = [("float32", "plain", torch.float32)]
    if can_pack(torch.device("cpu"), torch.bfloat16):  # oneDNN's bf16 needs AVX512 or AVX-NE-CONVERT
        kinds.insert(0, ("bfloat16", "packed", torch.bfloat16))
    if can_int8():
        kinds.append(("int8", "int8", torch.float32))
    for name, kind, dtype in kinds:
        lin = Linear.build(w, device=torch.device("cpu"), dtype=dtype, kind=kind)
        x = torch.randn(rows, k).to(dtype)
        for _ in range(3):
            lin(x)
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            lin(x)
            best = min(best, time.perf_counter() - t)
        out[name] = flop / best / 1e9
    return out


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.engine.step", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(MODEL_DIR))
    p.add_argument("--precisions", default="bfloat16,int8")
    p.add_argument("--kernels", default="auto",
                   help="comma-separated: auto (our CPU kernels where they build), torch (torch's ops only)")
    p.add_argument("--batches", default="1,32,64")
    p.add_argument("--context", type=int, default=100, help="cached positions per row (default 100)")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--core", type=int, default=1)
    p.add_argument("--out", default=None, help="JSON file for the rows (default: none)")
    args = p.parse_args(argv)
    import torch

    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    info = machine_info()
    bw = memory_bandwidth_gbs()
    say(f"machine: {describe(info)}; load {load_average()}; read bandwidth {bw:.1f} GB/s (1 thread)")
    variants = [(pr, at) for pr in args.precisions.split(",") if pr for at in args.kernels.split(",") if at]
    batches = [int(x) for x in args.batches.split(",") if x]
    models = {v: build(args.model, *v[:1], max(512, args.context + 8), v[1]) for v in variants}
    steps = {(v, b): make_step(models[v], b, args.context) for v in variants for b in batches}
    for fn in steps.values():  # first-use costs (oneDNN primitives, allocator) out of the way
        for _ in range(3):
            fn()
    times: dict[tuple[tuple[str, str], int], list[float]] = {k: [] for k in steps}
    for r in range(args.rounds):
        for k, fn in steps.items():
            t = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t) * 1e3)
        if r % 5 == 4:
            say(f"round {r + 1}/{args.rounds}; load {load_average()}")
    rows = []
    for (v, b), fn in steps.items():
        med = statistics.median(times[(v, b)])
        parts = profile(fn, models[v], b, args.context)
        kernel = "ours" if models[v].decode_attention is not None else "torch"
        weights = weight_bytes(args.model, v[0], models[v], b)
        moved = weights + parts["kv_mb"] * 1e6  # what the step must read
        mbu = moved / (med / 1e3) / (bw * 1e9) * 100 if bw else None
        rows.append([v[0], kernel, b, args.context, med, min(times[(v, b)]), b / med * 1e3, weights / 1e6, mbu,
                     parts["matmul"],
                     parts["attention"], parts["kv_write"], parts["other"], parts["kv_mb"], parts["attention_gbs"]])
    peak = matmul_peak()
    print(measured_on(info) + f"; load average {load_average()}; read bandwidth {bw:.1f} GB/s (1 thread)")
    print("matmul peak, one core ([512, 576] x [576, 3072], best of 20): "
          + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peak.items()))
    print(f"decode forward, 1 thread on core {args.core}, {args.rounds} interleaved rounds; profile: 5 steps")
    print("MBU: the bytes a step must read (weights + KV) / its median time / the read bandwidth above")
    print("weights MB: what the step's matmuls read (matmuls of a few rows read the GGUF's blocks: fp32 up to 16, "
          "bf16 up to the rows timed faster at load)")
    headers = ["precision", "kernels", "batch", "context", "step p50 ms", "step min ms", "tok/s", "weights MB",
               "MBU %", "matmul ms", "attention ms", "KV write ms", "other ms", "KV read MB", "attention GB/s"]
    print(table(headers, rows, digits=1))
    if args.out:
        write_json(args.out, {"machine": info, "read_gbs": bw, "matmul_peak_gflops": peak, "load": load_average(),
                              "rows": [dict(zip(headers, r, strict=True)) for r in rows]})


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
