"""`python -m benchmarks engine`: the model engine alone against Hugging Face, in one
run, on the real SmolLM2-135M-Instruct in the dtype the workers pick (issue 3's benchmark).

Systems:
- hf_generate: `model.generate` (greedy), one request after another. It serves one
  request at a time, so its aggregate tokens/s does not change with the number of
  streams: a handful of requests is measured and the N-stream rows are a queue model
  (request i waits for every request before it; TTFT_i = sum of the earlier requests'
  durations + its own TTFT, cycling through the measured requests).
- hf_generate_fp32: the same, single stream only, in fp32: HF's fastest single stream on
  this CPU (its bf16 path re-lays out the weights on every matmul), so the single-stream
  target is also shown against it.
- generate_batch: transformers' own continuous batching; it returns whole outputs, no
  per-token times, so only aggregate tokens/s (wall time of the call).
- colocated, colocated_chunked: Tandem's ColocatedEngine in this process, both cores,
  without and with chunked prefill.
- disaggregated: the prefill worker's PrefillBatcher (over a PrefillEngine) and a
  DecodeEngine in two spawned processes, each pinned to its own core with one torch
  thread, the KV handed over through the KV store in shared memory and the handoff
  message over a multiprocessing queue (see split_workers.py).
- llamacpp: llama.cpp's llama-batched-bench on the Q4_1 GGUF our weights come from, with
  1 and 2 threads (pinned), 1/32/64 parallel sequences; built from source on first use
  (llamacpp.py); when it cannot be built the table says so and the rest runs.

Quality (unless --no-quality): each precision the run may serve against bf16, teacher
forced on the shipped support text (quality.py): top-1 agreement and perplexity.

Workloads: single (one stream, requests one after another), streams32 / streams64 (that
many ~60-token chat prompts submitted at once, 64 output tokens each, EOS ignored), mixed
(32 decode streams with longer outputs; once all have their first token, 512-token
prompts arrive at a fixed interval until the first stream finishes; the streams'
inter-token latency inside that window, against the same streams with no arrivals).

Sampling features (unless --no-features; features.py): 32 streams held to a JSON schema,
with penalties, with top_logprobs=5, against the same streams unconstrained in the same
run (tok/s, ITL, the grammar mask's time per step), and 200 strict requests over 10
schemas that must all parse and validate.

Metrics: TTFT (submit -> first token), inter-token latency (every gap between consecutive
tokens of a request, pooled), aggregate output tokens/s (output tokens / wall time from
the first submit to the last token). Token times are the engine's own timestamps.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import traceback

from ..machine import (
    busy_processes,
    describe,
    load_average,
    machine_info,
    measured_on,
    memory_bandwidth_gbs,
    source_digest,
)
from ..paths import BASE_DIR, MODEL_DIR
from ..quick import add_quick_options, parse_quick
from ..report import fmt, say, write_json
from .prompts import long_prompt, stream_prompts
from .report import TANDEM, Row, evaluate_targets, render, render_targets
from .systems import ColocatedSystem, DisaggregatedSystem
from .workloads import run_tandem, sizes_from

SYSTEMS = ("hf_generate", "hf_generate_fp32", "generate_batch", *TANDEM, "llamacpp")
WORKLOADS = ("single", "streams32", "streams64", "mixed")
DEFAULT_OUT = "var/bench/engine.json"
# --quick: small sizes (workloads.sizes_from), the tiny model, one system of each kind
# (hf_generate_fp32 and colocated_chunked are the same code as hf_generate and colocated
# with another setting; llama.cpp's first use builds it from source).
QUICK = {"model": "tiny", "systems": "hf_generate,generate_batch,colocated,disaggregated"}
# What the disaggregated workers import when they start (an edit mid-run changes them).
ENGINE_SOURCES = [BASE_DIR / "inference" / p for p in ("engine", "kvstore", "worker/prefill_batcher.py")]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__.split("\n\n")[0])
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)} "
                   "(--quick: hf_generate,generate_batch,colocated,disaggregated)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of {','.join(WORKLOADS)}")
    add_quick_options(p, default_out=DEFAULT_OUT)
    p.add_argument("--model", default=str(MODEL_DIR),
                   help="a model directory; real: SmolLM2-135M-Instruct (the default); tiny: a 2-layer "
                        "random-weight model (the default with --quick)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32", "int8"],
                   help="Tandem's precision; auto: what the workers pick on this CPU "
                        "(EngineConfig.resolve_precision); HF runs bf16 for int8")
    p.add_argument("--output-tokens", type=int, default=64, help="per stream, single/streams workloads")
    p.add_argument("--single-requests", type=int, default=3, help="Tandem single-stream requests (sequential)")
    p.add_argument("--hf-requests", type=int, default=4, help="HF generate requests measured (sequential)")
    p.add_argument("--hf-budget-s", type=float, default=60.0,
                   help="stop measuring HF generate after this many seconds (at least one request)")
    p.add_argument("--mixed-streams", type=int, default=32)
    p.add_argument("--mixed-output-tokens", type=int, default=192)
    p.add_argument("--arrival-prompt-tokens", type=int, default=512)
    p.add_argument("--arrival-output-tokens", type=int, default=16)
    # The arrivals must stay below what one core prefills, or the prefill queue would grow
    # for as long as the test ran and the window would measure the queue, not the engine.
    p.add_argument("--arrival-interval", type=float, default=0.5,
                   help="seconds between arriving long prompts (default 0.5)")
    p.add_argument("--mixed-max-s", type=float, default=30.0,
                   help="longest arrival window (arrivals stop then even if no stream has finished)")
    p.add_argument("--prefill-core", type=int, default=0)
    p.add_argument("--decode-core", type=int, default=1)
    p.add_argument("--prefix-cache-tokens", type=int, default=0,
                   help="Tandem prefix cache size (default 0 = off: every prompt computed in full, like HF)")
    p.add_argument("--llamacpp-threads", default="1,2", help="llama.cpp thread counts (default 1,2)")
    p.add_argument("--no-features", dest="features", action="store_false",
                   help="skip the sampling-features section (json_schema, penalties, top_logprobs=5 against "
                        "unconstrained, and the strict outputs' validity check; needs the colocated system)")
    p.add_argument("--no-quality", dest="quality", action="store_false",
                   help="skip the quality section (int8, fp32 and bf16's few-row kernel against bf16)")
    args = parse_quick(p, argv, name="engine", default_out=DEFAULT_OUT, quick_defaults=QUICK)
    if args.model == "real":
        args.model = str(MODEL_DIR)
    elif args.model == "tiny":
        from inference.engine.tiny import build_tiny_model

        args.model = str(build_tiny_model(BASE_DIR / "var" / "models" / "tiny-bench"))
    args.dtype = concrete_precision(args.dtype)
    args.hf_dtype = "bfloat16" if args.dtype == "int8" else args.dtype
    args.llamacpp_threads = [int(t) for t in args.llamacpp_threads.split(",") if t]
    args.systems = [s for s in args.systems.split(",") if s]
    args.workloads = [w for w in args.workloads.split(",") if w]
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    return args



def concrete_precision(name: str) -> str:
    """The precision Tandem runs in: "auto" resolves as the workers resolve it on this
    CPU, so the report names what really ran."""
    if name != "auto":
        return name
    from inference.engine.config import EngineConfig

    return EngineConfig(model="", device="cpu").resolve_precision()


def snapshot() -> dict:
    """What may change during a run, taken at its start and its end."""
    return {"load": load_average(), "busy": busy_processes(), "mem_bw_gbs": memory_bandwidth_gbs(),
            "engine_sources": source_digest(*ENGINE_SOURCES)}


def measure(args: argparse.Namespace, sz, prompts: list[list[int]], long_prompts: list[list[int]],
            features: dict | None = None) -> list[Row]:
    """The systems' rows; `features` (when given) gets the sampling-features section
    (features.py), measured on the colocated engine when the run has it."""
    rows: list[Row] = []
    if {"hf_generate", "hf_generate_fp32", "generate_batch"} & set(args.systems):
        from inference.engine.openmp import on_own_thread

        from .hf import run_hf

        try:  # on a thread that ends, so that its OpenMP pool does not slow the colocated engine's
            on_own_thread(run_hf, args, args.systems, args.workloads, sz, prompts, rows)
        except Exception:
            say(f"Hugging Face systems failed\n{traceback.format_exc()}")
            rows.append(Row.failed("hf"))
    tandem = [s for s in args.systems if s in TANDEM]
    colocated = [s for s in tandem if s.startswith("colocated")]
    if colocated:
        from inference.engine.config import EngineConfig
        from inference.engine.loader import load_model

        cfg = EngineConfig(model=args.model, dtype=args.dtype, prefix_cache_tokens=args.prefix_cache_tokens)
        say(f"loading {args.model} for Tandem in this process ({args.dtype}, {len(os.sched_getaffinity(0))} threads)")
        loaded = load_model(cfg)
        for s in colocated:
            run_tandem(lambda s=s: ColocatedSystem(loaded, cfg, chunked=s == "colocated_chunked"), s,
                       args.workloads, sz, prompts, long_prompts, rows)
            gc.collect()
        if features is not None and args.features:
            from .features import run_features

            try:
                features.update(run_features(loaded, cfg, prompts, streams=sz.streams["streams32"],
                                             output_tokens=sz.output_tokens,
                                             validity_requests=20 if args.quick else 200))
            except Exception:
                say(f"sampling features section failed\n{traceback.format_exc()}")
            gc.collect()
        del loaded
        gc.collect()
    if "disaggregated" in tandem:
        run_tandem(lambda: DisaggregatedSystem(args), "disaggregated", args.workloads, sz, prompts, long_prompts,
                   rows)
    if "llamacpp" in args.systems:
        from .llamacpp import run_peer

        run_peer(args.workloads, sz.streams, prompts, sz.output_tokens, args.llamacpp_threads,
                 [args.decode_core, args.prefill_core], rows, say=say)
    return rows


def measure_quality(args: argparse.Namespace) -> list[dict]:
    from .quality import evaluate

    candidates = ["int8", "float32", "bfloat16"]  # bf16 against itself: its few-row kernel
    try:
        return evaluate(args.model, "bfloat16", candidates, limit=1 if args.quick else None, say=say)
    except Exception:
        say(f"quality section failed\n{traceback.format_exc()}")
        return []


def methods(args: argparse.Namespace, sz) -> list[str]:
    prefix_cache = "off" if not args.prefix_cache_tokens else f"{args.prefix_cache_tokens} tokens"
    return [
        "TTFT = submit -> first token; ITL = every gap between consecutive tokens of a request, pooled; "
        "tok/s = output tokens / (last token - first submit). Times in ms.",
        f"hf_generate: {sz.hf_requests} requests measured one after another (greedy, EOS ignored); its "
        "N-stream rows are a queue model: aggregate tok/s is the sequential rate (it does not change with more "
        "requests), TTFT_i = durations of requests 0..i-1 + TTFT of request i, cycling through the measured ones.",
        "hf_generate_fp32: the same in fp32, single stream only (HF's fastest dtype for one stream here).",
        "generate_batch: one call per workload (eos_token_id=-1, max_batch_tokens=256, paged cache sized to the "
        "workload); it gives no per-token times, so TTFT/ITL are n/a.",
        f"mixed: {sz.mixed_streams} streams x {sz.mixed_output_tokens} tokens; once all have their first token, "
        f"a {sz.arrival_prompt_tokens}-token prompt ({sz.arrival_output_tokens} output tokens) every "
        f"{sz.arrival_interval_s:g} s until the first stream finishes; ITL counts the streams' gaps inside that "
        "window; -unloaded is the same streams with no arrivals.",
        f"Tandem prefix cache: {prefix_cache}; disaggregated: PrefillBatcher on core {args.prefill_core}, "
        f"DecodeEngine on core {args.decode_core}, 1 thread each, KV through the KV store in shared memory "
        "(/dev/shm); colocated: both cores, 2 threads.",
        f"llama.cpp N t: llama-batched-bench (llamacpp.py) on the Q4_1 GGUF our weights come from, N threads "
        f"pinned to cores {args.decode_core}(,{args.prefill_core}), prompts of our mean length, all processed "
        "before generation (its TTFT is the batch's prompt time, its ITL the mean step); tok/s as ours.",
        f"Tandem precision {args.dtype}; quality: teacher-forced top-1 agreement and perplexity against bf16 "
        "on benchmarks/engine/data/support_texts.txt (quality.py).",
        "load1 = 1-minute load average when the row started (it includes this benchmark's own threads); "
        "others = CPU cores used by OTHER processes while the row ran (/proc/stat busy time minus this "
        f"benchmark's own); 0 = a quiet machine, {os.cpu_count()} = every core taken.",
    ]


def print_report(args, info: dict, start: dict, end: dict, duration: float, notes: list[str], rows: list[Row],
                 targets: list[dict], quality: list[dict]) -> None:
    src0, src1 = start["engine_sources"], end["engine_sources"]
    print()
    print(f"Engine benchmark ({'QUICK: reduced sizes, not the issue targets' if args.quick else 'full'}); "
          f"model {args.model} in {args.dtype}")
    print(measured_on(info) + f"; engine sources {src0}" + ("" if src1 == src0 else f" -> {src1} (CHANGED)"))
    print(f"load average at start {start['load']}, at end {end['load']}; memory read bandwidth (1 thread) "
          f"{fmt(start['mem_bw_gbs'])} GB/s at start, {fmt(end['mem_bw_gbs'])} GB/s at end; {duration:.0f} s")
    for line in notes:
        print(f"- {line}")
    print()
    print(render(rows))
    print()
    print(render_targets(targets) if targets else "(no targets evaluated: a system or workload is missing)")
    if quality:
        from .quality import AGREEMENT_MIN, PPL_RATIO_MAX
        from .quality import render as render_quality

        print(f"\nQuality against bf16, teacher forced on the shipped support text (bar: top-1 agreement >= "
              f"{AGREEMENT_MIN:.0%}, perplexity within {PPL_RATIO_MAX - 1:.0%}):\n")
        print(render_quality(quality))
    if src1 != src0:
        print(f"\nWARNING: the engine's sources changed during the run ({src0} -> {src1}): rows measured after "
              "the change (at least the disaggregated workers, which import the engine when they start) ran a "
              "different engine than the rows before it.")
    busy_rows = [r for r in rows if r.others is not None and r.others > 0.25]
    if busy_rows:
        worst = max(busy_rows, key=lambda r: r.others or 0.0)
        print(f"\nWARNING: the machine was shared: other processes used > 0.25 cores during {len(busy_rows)} of "
              f"{len(rows)} rows (up to {worst.others:.2f} of {os.cpu_count()} cores, {worst.system} "
              f"{worst.workload}); those rows are slower than this machine is.")
    if start["busy"] or end["busy"]:
        print("\nother busy processes at start:\n  " + ("\n  ".join(start["busy"]) or "none")
              + "\nat end:\n  " + ("\n  ".join(end["busy"]) or "none"))


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    sz = sizes_from(args)
    t_run = time.monotonic()
    info = machine_info()
    start = snapshot()
    say(f"engine benchmark: {'quick' if args.quick else 'full'} run; systems {','.join(args.systems)}; "
        f"workloads {','.join(args.workloads)}")
    say(f"machine: {describe(info)}; load average at start {start['load']}; memory read bandwidth (1 thread) "
        f"{fmt(start['mem_bw_gbs'])} GB/s")
    if start["busy"]:
        say("busy at start (the numbers below are skewed by these):\n    " + "\n    ".join(start["busy"]))

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    prompts = stream_prompts(tokenizer, max([1, sz.hf_requests, *sz.streams.values(), sz.mixed_streams,
                                             sz.single_requests]))
    long_prompts = [long_prompt(tokenizer, i, sz.arrival_prompt_tokens) for i in range(16)]
    lens = [len(p) for p in prompts]
    say(f"prompts: {len(prompts)} chat prompts, {min(lens)}-{max(lens)} tokens (mean {sum(lens) / len(lens):.0f}); "
        f"long prompts {len(long_prompts[0])} tokens")

    features: dict = {}
    rows = measure(args, sz, prompts, long_prompts, features)
    quality = measure_quality(args) if args.quality else []
    targets = evaluate_targets(rows, quality)
    end = snapshot()
    duration = time.monotonic() - t_run
    notes = methods(args, sz)
    print_report(args, info, start, end, duration, notes, rows, targets, quality)
    if features.get("variants"):
        from .features import render_features

        print(f"\nSampling features on the colocated engine, {features['streams']} streams x "
              f"{features['output_tokens']} tokens each, against unconstrained in the same run (features.py):\n")
        print(render_features(features))
    path = write_json(args.out, {
        "benchmark": "engine", "quick": args.quick, "args": vars(args), "sizes": sz.__dict__, "machine": info,
        "load_start": start["load"], "load_end": end["load"],
        "mem_bw_gbs_start": start["mem_bw_gbs"], "mem_bw_gbs_end": end["mem_bw_gbs"],
        "engine_sources": {"start": start["engine_sources"], "end": end["engine_sources"]},
        "busy_start": start["busy"], "busy_end": end["busy"], "duration_s": duration, "methods": notes,
        "results": [r.__dict__ for r in rows], "targets": targets, "quality": quality,
        "sampling_features": features,
    })
    say(f"wrote {path}")
