"""The engine benchmark's workloads, run on a Tandem system: one stream, a burst of
streams, and the mixed load (decode streams while long prompts arrive)."""

from __future__ import annotations

import argparse
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from ..machine import CpuMeter
from ..report import fmt, say
from ..stats import percentile
from .report import Row, summary_line
from .systems import TandemSystem
from .tracker import Tracker, metrics


@dataclass(frozen=True)
class Sizes:
    single_requests: int
    output_tokens: int
    streams: dict[str, int]  # workload key -> concurrent streams
    mixed_streams: int
    mixed_output_tokens: int
    arrival_prompt_tokens: int
    arrival_output_tokens: int
    arrival_interval_s: float
    mixed_max_s: float
    hf_requests: int


def sizes_from(args: argparse.Namespace) -> Sizes:
    if args.quick:
        return Sizes(single_requests=2, output_tokens=16, streams={"streams32": 4, "streams64": 8},
                     mixed_streams=4, mixed_output_tokens=32, arrival_prompt_tokens=128,
                     arrival_output_tokens=4, arrival_interval_s=args.arrival_interval, mixed_max_s=8.0,
                     hf_requests=2)
    return Sizes(single_requests=args.single_requests, output_tokens=args.output_tokens,
                 streams={"streams32": 32, "streams64": 64}, mixed_streams=args.mixed_streams,
                 mixed_output_tokens=args.mixed_output_tokens, arrival_prompt_tokens=args.arrival_prompt_tokens,
                 arrival_output_tokens=args.arrival_output_tokens, arrival_interval_s=args.arrival_interval,
                 mixed_max_s=args.mixed_max_s, hf_requests=args.hf_requests)


def run_single(system: TandemSystem, prompts: list[list[int]], n: int, out_tokens: int, tag: str) -> dict:
    """n requests one after another, each on an idle engine."""
    for i in range(n):
        rid = f"{tag}-{i}"
        system.submit(rid, prompts[i % len(prompts)], out_tokens, "stream")
        system.tracker.wait(lambda r=rid: system.tracker.all_done([r]), what=f"{tag} request {i}")
    return metrics(list(system.tracker.traces.values()))


def run_burst(system: TandemSystem, prompts: list[list[int]], n: int, out_tokens: int, tag: str) -> dict:
    """n requests submitted at the same moment."""
    rids = [f"{tag}-{i}" for i in range(n)]
    for i, rid in enumerate(rids):
        system.submit(rid, prompts[i % len(prompts)], out_tokens, "stream")
    system.tracker.wait(lambda: system.tracker.all_done(rids), what=tag, expected_tokens=n * out_tokens)
    return metrics([system.tracker.traces[r] for r in rids])


def run_mixed(system: TandemSystem, prompts: list[list[int]], long_prompts: list[list[int]], sz: Sizes,
              tag: str, *, arrivals: bool) -> dict:
    """sz.mixed_streams decode streams; once all have their first token, a long prompt
    every arrival_interval_s until the first stream finishes or mixed_max_s have passed
    (or none, unloaded): the window in which the streams' ITL is counted."""
    tr = system.tracker
    rids = [f"{tag}-s{i}" for i in range(sz.mixed_streams)]
    for i, rid in enumerate(rids):
        system.submit(rid, prompts[i % len(prompts)], sz.mixed_output_tokens, "stream")
    tr.wait(lambda: tr.all_first(rids), what=f"{tag} first tokens")
    t0 = time.time()
    cap = time.monotonic() + sz.mixed_max_s
    arrived: list[str] = []
    if arrivals:
        tick = next_note = time.monotonic()
        while not tr.check(lambda: tr.any_done(rids)) and time.monotonic() < cap:
            if time.monotonic() >= next_note:
                say(f"    ... {tag}: {len(arrived)} arrivals, {tr.tokens} tokens so far")
                next_note += 15.0
            rid = f"{tag}-a{len(arrived)}"
            system.submit(rid, long_prompts[len(arrived) % len(long_prompts)], sz.arrival_output_tokens, "arrival")
            arrived.append(rid)
            tick += sz.arrival_interval_s
            while time.monotonic() < tick and not tr.check(lambda: tr.any_done(rids)):
                tr.sleep(tick - time.monotonic())
    else:
        tr.wait(lambda: tr.any_done(rids), what=f"{tag} decode window")
    done = [tr.traces[r] for r in rids if tr.traces[r].finish_reason is not None]
    t1 = min(t.t_last for t in done) if done else time.time()
    for a in arrived:  # the window is over: stop what is still queued or running
        if tr.traces[a].finish_reason is None:
            system.cancel(a)
    tr.wait(lambda: tr.all_done(rids + arrived), what=f"{tag} drain",
            expected_tokens=len(rids) * sz.mixed_output_tokens + len(arrived) * sz.arrival_output_tokens)
    res = metrics([tr.traces[r] for r in rids], window=(t0, t1))
    res.update(window_s=t1 - t0, arrivals=len(arrived))
    if arrived:
        ttft = [tr.traces[a].ttft_ms for a in arrived if tr.traces[a].t_first is not None]
        res.update(arrivals_first_token=len(ttft), arrivals_ttft_p50_ms=percentile(ttft, 50),
                   arrivals_ttft_p99_ms=percentile(ttft, 99),
                   arrivals_rate_per_s=len(arrived) / (t1 - t0) if t1 > t0 else None)
        ws = [tr.worker_stats[a] for a in arrived if a in tr.worker_stats]
        for key in ("compute_ms", "put_ms", "take_ms"):
            vals = [w[key] for w in ws if w.get(key) is not None]
            if vals:
                res[f"arrivals_{key}_p50"] = percentile(vals, 50)
                res[f"arrivals_{key}_p99"] = percentile(vals, 99)
    return res


def mixed_notes(m: dict) -> str:
    notes = (f"{m['window_s']:.0f} s window, {m['arrivals']} arrivals, {m.get('arrivals_first_token', 0)} got a "
             f"first token, their TTFT p50/p99 {fmt(m.get('arrivals_ttft_p50_ms'), 0)}/"
             f"{fmt(m.get('arrivals_ttft_p99_ms'), 0)} ms")
    if m.get("arrivals_compute_ms_p50") is not None:
        notes += (f"; prefill p50 {m['arrivals_compute_ms_p50']:.0f} ms, KV put/take p50 "
                  f"{m.get('arrivals_put_ms_p50', 0):.0f}/{m.get('arrivals_take_ms_p50', 0):.0f} ms")
    return notes


def warm_up(system: TandemSystem, prompts: list[list[int]], long_prompts: list[list[int]], n: int) -> None:
    """Unmeasured: a burst (decode batch shapes up to n) and a long prompt, so one-off costs
    (oneDNN kernel creation, allocator growth) fall outside the measurements."""
    system.tracker = Tracker()
    rids = [f"warm-{i}" for i in range(n)]
    for i, rid in enumerate(rids):
        system.submit(rid, prompts[i % len(prompts)], 6, "warmup")
    system.submit("warm-long", long_prompts[-1], 4, "warmup")
    system.tracker.wait(lambda: system.tracker.all_done([*rids, "warm-long"]), what="warm-up")


def run_workload(system: TandemSystem, wl: str, label: str, sz: Sizes, prompts, long_prompts, load: float) -> Row:
    name, tag = system.name, f"{system.name}-{label}"
    if wl == "single":
        say(f"{name}: single stream, {sz.single_requests} requests x {sz.output_tokens} tokens")
        return Row(name, wl, 1, sz.output_tokens, run_single(system, prompts, sz.single_requests,
                                                             sz.output_tokens, tag), load)
    if wl in sz.streams:
        n = sz.streams[wl]
        say(f"{name}: {n} streams x {sz.output_tokens} tokens")
        return Row(name, wl, n, sz.output_tokens, run_burst(system, prompts, n, sz.output_tokens, tag), load)
    loaded = label == "mixed-loaded"
    what = f"{sz.arrival_prompt_tokens}-token prompts every {sz.arrival_interval_s:g} s" if loaded else "no arrivals"
    say(f"{name}: {label}: {sz.mixed_streams} streams x {sz.mixed_output_tokens} tokens, {what}")
    m = run_mixed(system, prompts, long_prompts, sz, tag, arrivals=loaded)
    return Row(name, label, sz.mixed_streams, sz.mixed_output_tokens, m, load,
               method="ITL inside the arrival window", notes=mixed_notes(m) if loaded else "")


def run_tandem(make_system: Callable[[], TandemSystem], name: str, workloads: list[str], sz: Sizes,
               prompts: list[list[int]], long_prompts: list[list[int]], rows: list[Row]) -> None:
    say(f"{name}: starting")
    try:
        system = make_system()
    except Exception:
        rows.append(Row.failed(name))
        say(f"{name}: failed to start\n{traceback.format_exc()}")
        return
    if system.describe():
        say(f"{name}: {system.describe()}")
    try:
        warm_up(system, prompts, long_prompts, max([1, *[sz.streams[w] for w in workloads if w in sz.streams]]))
        for wl in workloads:
            for label in ("mixed-unloaded", "mixed-loaded") if wl == "mixed" else (wl,):
                system.tracker = Tracker()
                load = os.getloadavg()[0]
                meter = CpuMeter(system.pids())
                t = time.monotonic()
                try:
                    row = run_workload(system, wl, label, sz, prompts, long_prompts, load)
                except Exception:
                    rows.append(Row.failed(name, label))
                    say(f"{name}: {label} failed\n{traceback.format_exc()}")
                    if system.tracker.error:
                        return  # a worker died: nothing more to measure on this system
                    continue
                row.others = meter.others_cores()
                rows.append(row)
                say(f"{name}: {label}: {summary_line(row.metrics)} ({time.monotonic() - t:.1f} s; other "
                    f"processes {fmt(row.others, 2)} cores)")
    finally:
        system.close()
