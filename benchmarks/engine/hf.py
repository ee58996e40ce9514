"""The Hugging Face systems the engine is measured against: `model.generate` one request
after another (in the run's dtype and in fp32), and transformers' own continuous
batching, `generate_batch`."""

from __future__ import annotations

import argparse
import gc
import os
import time

from ..machine import CpuMeter
from ..report import fmt, say
from ..stats import percentile
from ..traces import Trace
from .report import Row
from .tracker import metrics
from .workloads import Sizes


def run_hf(args: argparse.Namespace, systems: list[str], workloads: list[str], sz: Sizes,
           prompts: list[list[int]], rows: list[Row]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    hf_workloads = [w for w in workloads if w != "mixed"]
    if not hf_workloads:
        return
    torch.set_num_threads(len(os.sched_getaffinity(0)))

    def run_with(dtype: str, fn) -> None:
        say(f"loading {args.model} for Hugging Face ({dtype}, sdpa)")
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, dtype),
                                                     local_files_only=True).eval()
        try:
            fn(model)
        finally:
            del model
            gc.collect()

    def same_dtype(model) -> None:
        if "hf_generate" in systems:
            run_hf_generate("hf_generate", model, hf_workloads, sz, prompts, args, rows)
        if "generate_batch" in systems:
            run_generate_batch(model, hf_workloads, sz, prompts, rows)

    if {"hf_generate", "generate_batch"} & set(systems):
        run_with(args.hf_dtype, same_dtype)
    # HF's own fastest single stream here is fp32 (its bf16 CPU path re-lays out every
    # weight on every call): the single-stream ITL target is also shown against it.
    if "hf_generate_fp32" in systems and "single" in hf_workloads and args.hf_dtype != "float32":
        run_with("float32", lambda model: run_hf_generate("hf_generate_fp32", model, ["single"], sz, prompts,
                                                          args, rows))


class _Stamps:
    """A generate() streamer that only timestamps: put() is called with the prompt first,
    then once per new token."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value) -> None:
        self.times.append(time.time())

    def end(self) -> None:
        pass


def run_hf_generate(name: str, model, workloads: list[str], sz: Sizes, prompts: list[list[int]],
                    args: argparse.Namespace, rows: list[Row]) -> None:
    import torch
    from transformers import GenerationConfig

    pad = model.generation_config.pad_token_id
    if pad is None:
        pad = model.config.eos_token_id if isinstance(model.config.eos_token_id, int) else 0

    def generate(ids: list[int], n: int) -> Trace:
        # eos_token_id=None with use_model_defaults=False: EOS ends nothing (as ignore_eos);
        # with the model's defaults, None would be replaced by the model's EOS id.
        config = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=pad)
        stamps = _Stamps()
        tr = Trace(request_id="hf", t_send=time.time())
        x = torch.tensor([ids])
        with torch.inference_mode():
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=config, streamer=stamps,
                                 use_model_defaults=False)
        new = out.shape[1] - len(ids)
        for i, t in enumerate(stamps.times[1:][:new]):  # [0] is the prompt
            tr.token(i, t)
        tr.finish_reason = "length" if new == n else f"short ({new})"
        return tr

    say(f"{name}: warm-up")
    generate(prompts[-1], 4)
    load = os.getloadavg()[0]
    meter = CpuMeter()
    traces: list[Trace] = []
    t_start = time.monotonic()
    for i in range(sz.hf_requests):
        say(f"{name}: request {i + 1}/{sz.hf_requests} ({sz.output_tokens} tokens)")
        traces.append(generate(prompts[i], sz.output_tokens))
        if time.monotonic() - t_start > args.hf_budget_s:
            say(f"{name}: time budget ({args.hf_budget_s:g} s) spent after {i + 1} requests")
            break
    measured = metrics(traces)
    others = meter.others_cores()
    say(f"{name}: {measured['tokens_per_s']:.1f} tok/s, ITL p50 {measured['itl_p50_ms']:.1f} ms "
        f"(other processes {fmt(others, 2)} cores)")
    k = len(traces)
    plural = "s" if k != 1 else ""
    for wl in workloads:
        if wl == "single":
            rows.append(Row(name, wl, 1, sz.output_tokens, measured, load, others,
                            method=f"{k} request{plural} one after another"))
            continue
        n = sz.streams[wl]
        # Queue model: request j waits for all before it, cycling through the measured ones.
        durations = [tr.t_last - tr.t_send for tr in traces]
        queued, waited = [], 0.0
        for j in range(n):
            queued.append(waited * 1e3 + traces[j % k].ttft_ms)
            waited += durations[j % k]
        m = dict(measured)
        m.update(requests=n, output_tokens=n * sz.output_tokens, wall_s=waited,
                 tokens_per_s=n * sz.output_tokens / waited,
                 ttft_p50_ms=percentile(queued, 50), ttft_p99_ms=percentile(queued, 99))
        rows.append(Row(name, wl, n, sz.output_tokens, m, load, others,
                        method=f"queue model over {k} sequential request{plural}"))


def _patch_cb_memory_probe() -> None:
    """transformers 4.57's continuous batching sizes its paged cache from the device's
    free memory, which its probe reports as None on a CPU (TypeError before the first
    step). Report the host's available RAM instead; the cache is sized explicitly anyway."""
    import torch
    import transformers.generation.continuous_batching.cache as cb_cache

    def cpu_aware(original=cb_cache.get_device_and_memory_breakdown):
        device, total, reserved, allocated = original()
        if total is None:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
            device = torch.device("cpu")
        return device, total, reserved, allocated

    cb_cache.get_device_and_memory_breakdown = cpu_aware


def run_generate_batch(model, workloads: list[str], sz: Sizes, prompts: list[list[int]], rows: list[Row]) -> None:
    from transformers import GenerationConfig

    if not hasattr(model, "generate_batch"):
        rows.append(Row("generate_batch", "-", 0, 0, {}, os.getloadavg()[0],
                        error="this transformers has no generate_batch"))
        return
    _patch_cb_memory_probe()
    block = 32

    def call(inputs: list[list[int]], new: int) -> tuple[int, float]:
        longest = max(len(p) for p in prompts) + new
        # eos_token_id=-1: no token ends a request early (EOS ignored, as for Tandem).
        config = GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=-1, block_size=block,
                                  num_blocks=len(inputs) * -(-longest // block) + 16, max_batch_tokens=256)
        t0 = time.time()
        res = model.generate_batch(inputs=inputs, generation_config=config, progress_bar=False)
        return sum(len(r.generated_tokens) for r in res.values()), time.time() - t0

    say("generate_batch: warm-up")
    call(prompts[:4], 4)
    for wl in workloads:
        n = 1 if wl == "single" else sz.streams[wl]
        say(f"generate_batch: {n} prompts x {sz.output_tokens} tokens")
        load = os.getloadavg()[0]
        meter = CpuMeter()
        tokens, wall = call(prompts[:n], sz.output_tokens)
        others = meter.others_cores()
        m = {"requests": n, "output_tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
             "ttft_p50_ms": None, "ttft_p99_ms": None, "itl_p50_ms": None, "itl_p99_ms": None,
             "incomplete": n * sz.output_tokens - tokens}
        notes = "" if tokens == n * sz.output_tokens else f"only {tokens} of {n * sz.output_tokens} tokens"
        rows.append(Row("generate_batch", wl, n, sz.output_tokens, m, load, others,
                        method="one call; no per-token times (TTFT/ITL n/a)", notes=notes))
        say(f"generate_batch: {n} prompts: {tokens / wall:.1f} tok/s ({wall:.1f} s; other processes "
            f"{fmt(others, 2)} cores)")
