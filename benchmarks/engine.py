"""`python -m benchmarks engine`: the model engine alone against Hugging Face, in one
run, on the real SmolLM2-135M-Instruct in bf16 (issue 3's benchmark).

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
- disaggregated: PrefillEngine and DecodeEngine in two spawned processes, each pinned to
  its own core with one torch thread, the KV handed over through a SharedMemoryKVStore and
  the handoff message over a multiprocessing queue (see engine_workers.py).

Workloads: single (one stream, requests one after another), streams32 / streams64 (that
many ~60-token chat prompts submitted at once, 64 output tokens each, EOS ignored), mixed
(32 decode streams with longer outputs; once all have their first token, 512-token
prompts arrive at a fixed interval until the first stream finishes; the streams'
inter-token latency inside that window, against the same streams with no arrivals).

Metrics: TTFT (submit -> first token), inter-token latency (every gap between consecutive
tokens of a request, pooled), aggregate output tokens/s (output tokens / wall time from
the first submit to the last token). Token times are the engine's own timestamps.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import queue
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .common import (
    MODEL_DIR,
    busy_processes,
    concrete_dtype,
    machine_info,
    percentile,
    say,
    table,
    write_json,
)

SYSTEMS = ("hf_generate", "hf_generate_fp32", "generate_batch", "colocated", "colocated_chunked", "disaggregated")
TANDEM = ("colocated", "colocated_chunked", "disaggregated")
WORKLOADS = ("single", "streams32", "streams64", "mixed")
WAIT_S = 900.0  # no single phase may take longer than this

SYSTEM_PROMPT = "You are the support assistant for Acme Cloud. Answer briefly and politely."
QUESTIONS = [
    "My invoice for March shows the same charge twice. Can you refund the duplicate payment to the card I used?",
    "I lost my phone and can no longer log in with two-factor authentication. How do I get back into my account?",
    "Our team plan renews next week. How do I move from monthly to yearly billing without losing the discount?",
    "The export to CSV has been stuck at 90 percent for an hour. Is there an outage, or should I start it again?",
    "How do I add a colleague as an admin to our workspace without giving them access to the billing page?",
    "I was charged in euros although my account is set to US dollars. Why did that happen, and can it be fixed?",
    "The mobile app logs me out every time I switch to another app. Is this a known bug on Android 14?",
    "Can I get an invoice with our company VAT number on it for last month's subscription payment, please?",
    "We need to delete all data for a customer who asked to be forgotten. What is the right way to do that?",
    "Password reset emails never arrive in my inbox, and they are not in spam either. What else can I try?",
    "How many API requests per minute does the business plan allow, and what happens when we go over it?",
    "Our webhook endpoint returns 200 but your dashboard says the deliveries failed. How can I debug this?",
    "I want to cancel my subscription at the end of the current period, not right now. How do I do that?",
    "The search in the help center returns nothing for words that I know appear in several of the articles.",
    "Can we use single sign-on with Okta on the standard plan, or do we need to upgrade to enterprise first?",
    "A file I uploaded yesterday is gone from the shared folder. Is there a trash or version history somewhere?",
    "The dashboard shows last week's numbers even after I refresh. How often are the usage charts updated?",
    "I entered the wrong shipping address for my hardware order. Can it still be changed before it ships?",
    "How do I rotate our API keys without downtime for the integrations that are using the current ones?",
    "My coupon code says it has expired, but the email said it is valid until the end of the month. Help?",
    "We are moving to a new domain. Will the links our customers already have to our portal keep working?",
    "The invoice PDF is blank when I open it in Chrome, but it works in Firefox. Is this a known problem?",
    "How can I see which member of our team changed the notification settings for the whole workspace?",
    "Is it possible to pause the subscription for two months over the summer instead of cancelling it?",
    "Our data residency must stay in the EU. Which region are our backups stored in, and can we choose?",
    "The import tool rejects my spreadsheet with an error about row 1532, but that row looks fine to me.",
    "I get a 429 error from the API even though we sent only a few requests in the last few minutes.",
    "Can I transfer ownership of the workspace to my colleague before I leave the company next month?",
    "The chat widget does not show up on our website after we added the script tag to the page header.",
    "How do I download all of our invoices from last year at once for our accountant's annual review?",
    "We were billed for ten seats but only seven people use the account. How are seats counted exactly?",
    "Notifications arrive twice on my desktop, once from the browser and once from the app. How to fix?",
    "What is your uptime guarantee on the business plan, and how do we claim a credit after an outage?",
    "I changed my email address and now the old one still receives all of the weekly summary reports.",
    "Does the reporting API support filtering by custom fields, or only by the standard ticket fields?",
    "Our scheduled report failed overnight with a timeout. Can it be rerun for the same period again?",
    "How do I set up an auto-reply in Spanish for customers whose browser language is set to Spanish?",
    "The dark mode setting does not stick; every time I sign in the interface switches back to light.",
    "Is there a way to merge two customer profiles that were created for the same person by mistake?",
    "We want to test the new workflow features in a sandbox first. Do you offer a staging environment?",
]


# -- prompts -----------------------------------------------------------------------------


def chat_ids(tokenizer, user: str) -> list[int]:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True))


def stream_prompts(tokenizer, n: int) -> list[list[int]]:
    """n chat prompts of ~60 tokens, cycling through the support questions; from the
    second round on a ticket number makes each prompt distinct."""
    out = []
    for i in range(n):
        q = QUESTIONS[i % len(QUESTIONS)]
        out.append(chat_ids(tokenizer, q if i < len(QUESTIONS) else f"(ticket {4000 + i}) {q}"))
    return out


def long_prompt(tokenizer, i: int, n_tokens: int) -> list[int]:
    """A distinct chat prompt of about n_tokens: a pasted ticket history, ending with a
    question. Distinct from its first user tokens, so no prefix cache would help."""
    order = QUESTIONS[i % len(QUESTIONS):] + QUESTIONS[: i % len(QUESTIONS)]
    history = " ".join(f"[{j + 1}] {q}" for j, q in enumerate(order * 4))
    head = f"Ticket {7000 + i} history follows. "
    tail = " Summarise the open issues for the agent."
    overhead = len(chat_ids(tokenizer, head + tail))
    body = tokenizer.encode(history, add_special_tokens=False)
    budget = n_tokens - overhead
    ids: list[int] = []
    for _ in range(6):  # decode/encode round trips can shift a token or two
        ids = chat_ids(tokenizer, head + tokenizer.decode(body[: max(0, budget)]) + tail)
        if len(ids) == n_tokens:
            break
        budget += n_tokens - len(ids)
    return ids


# -- per-request traces and metrics ------------------------------------------------------


@dataclass
class Trace:
    request_id: str
    kind: str  # "stream" | "arrival" | "warmup"
    submitted: float  # unix time, just before submit
    ts: dict[int, float] = field(default_factory=dict)  # token index -> unix time
    reason: str | None = None

    @property
    def times(self) -> list[float]:
        return [self.ts[i] for i in sorted(self.ts)]


class Tracker:
    """Token times of the requests of one run, filled from the engine's callbacks (or the
    worker processes' messages) on any thread."""

    def __init__(self) -> None:
        self.traces: dict[str, Trace] = {}
        self.tokens = 0
        self.error: str | None = None
        self.worker_stats: dict[str, dict] = {}  # disaggregated: per request, from the workers
        self._cond = threading.Condition()

    def submitted(self, rid: str, kind: str) -> None:
        with self._cond:
            self.traces[rid] = Trace(rid, kind, time.time())

    def token(self, rid: str, index: int, ts: float) -> None:
        with self._cond:
            tr = self.traces.get(rid)
            if tr is None:  # a straggler from an earlier run
                return
            tr.ts[index] = ts
            self.tokens += 1
            if index == 0:
                self._cond.notify_all()

    def finish(self, rid: str, reason: str) -> None:
        with self._cond:
            tr = self.traces.get(rid)
            if tr is not None:
                tr.reason = reason
                self._cond.notify_all()

    def fail(self, error: str) -> None:
        with self._cond:
            self.error = error
            self._cond.notify_all()

    def wait(self, pred: Callable[[], bool], *, what: str, timeout: float = WAIT_S,
             expected_tokens: int | None = None) -> None:
        """Until pred() (evaluated under the lock); a progress line every 15 s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self.error:
                    raise RuntimeError(f"worker failed while waiting for {what}:\n{self.error}")
                if pred():
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: not done after {timeout:.0f} s")
                if not self._cond.wait(min(left, 15.0)) and not pred():
                    total = f"/{expected_tokens}" if expected_tokens else ""
                    say(f"    ... {what}: {self.tokens}{total} tokens so far")

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake early on a first token or a finish (the mixed loop's tick)."""
        if seconds > 0:
            with self._cond:
                self._cond.wait(seconds)

    def check(self, pred: Callable[[], bool]) -> bool:
        with self._cond:
            return bool(self.error) or pred()

    def all_first(self, rids: list[str]) -> bool:
        return all(0 in self.traces[r].ts for r in rids)

    def all_done(self, rids: list[str]) -> bool:
        return all(self.traces[r].reason is not None for r in rids)

    def any_done(self, rids: list[str]) -> bool:
        return any(self.traces[r].reason is not None for r in rids)


def ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3


def metrics(traces: list[Trace], *, window: tuple[float, float] | None = None) -> dict:
    """TTFT and inter-token latency percentiles (ms), output tokens, aggregate tokens/s.
    With a window, only the gaps that lie wholly inside it count toward ITL."""
    ttft = [tr.ts[0] - tr.submitted for tr in traces if 0 in tr.ts]
    gaps: list[float] = []
    for tr in traces:
        t = tr.times
        for a, b in zip(t, t[1:], strict=False):
            if window is None or (a >= window[0] and b <= window[1]):
                gaps.append(b - a)
    tokens = sum(len(tr.ts) for tr in traces)
    last = max((max(tr.ts.values()) for tr in traces if tr.ts), default=None)
    start = min((tr.submitted for tr in traces), default=None)
    wall = (last - start) if last is not None and start is not None else None
    return {
        "requests": len(traces),
        "output_tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall if wall else None,
        "ttft_p50_ms": ms(percentile(ttft, 50)), "ttft_p99_ms": ms(percentile(ttft, 99)),
        "itl_p50_ms": ms(percentile(gaps, 50)), "itl_p99_ms": ms(percentile(gaps, 99)),
        "itl_max_ms": ms(max(gaps)) if gaps else None,
        "itl_samples": len(gaps),
        "incomplete": sum(1 for tr in traces if tr.reason not in ("length", "stop")),
    }


class CpuMeter:
    """CPU used by other processes while a row ran, in cores (of os.cpu_count()): all busy
    time from /proc/stat minus this benchmark's own (this process and its workers)."""

    def __init__(self, pids: list[int] | None = None):
        self.pids = pids or []
        self.start = self._sample()

    @staticmethod
    def _busy_s() -> float:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")  # not idle, not iowait

    def _own_s(self) -> float:
        total = 0.0
        for pid in ["self", *self.pids]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass
        return total

    def _sample(self) -> tuple[float, float, float]:
        try:
            return time.monotonic(), self._busy_s(), self._own_s()
        except OSError:
            return time.monotonic(), 0.0, 0.0

    def others_cores(self) -> float | None:
        t1, busy1, own1 = self._sample()
        t0, busy0, own0 = self.start
        if t1 - t0 < 0.5 or busy1 == 0.0:
            return None
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)


# -- the workloads -----------------------------------------------------------------------


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


def greedy(max_tokens: int):
    from inference.engine.sampling import SamplingParams

    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


class Target:
    """A Tandem system the workloads drive: submit, cancel, and a tracker per run."""

    name: str
    tracker: Tracker

    def submit(self, rid: str, prompt_ids: list[int], max_tokens: int, kind: str) -> None:
        raise NotImplementedError

    def cancel(self, rid: str) -> None:
        raise NotImplementedError

    def pids(self) -> list[int]:
        """Worker processes whose CPU time is the benchmark's own."""
        return []

    def close(self) -> None:
        pass


class ColocatedTarget(Target):
    def __init__(self, loaded, config, *, chunked: bool):
        from inference.engine.colocated import ColocatedEngine

        self.name = "colocated_chunked" if chunked else "colocated"
        self.tracker = Tracker()
        self.engine = ColocatedEngine(loaded, config, chunked_prefill=chunked)

    def submit(self, rid, prompt_ids, max_tokens, kind):
        self.tracker.submitted(rid, kind)
        self.engine.submit(rid, prompt_ids, greedy(max_tokens),
                           on_token=self._on_token, on_finish=self._on_finish)

    def _on_token(self, rid: str, index: int, token: int, ts: float) -> None:
        self.tracker.token(rid, index, ts)

    def _on_finish(self, rid: str, reason: str, stats) -> None:
        self.tracker.finish(rid, reason)

    def cancel(self, rid):
        self.engine.cancel(rid)

    def close(self):
        self.engine.shutdown()


class DisaggregatedTarget(Target):
    """Prefill and decode worker processes (engine_workers.py), driven over queues."""

    def __init__(self, args: argparse.Namespace):
        from . import engine_workers as ew

        self.name = "disaggregated"
        self.tracker = Tracker()
        self.kv_root = tempfile.mkdtemp(prefix="tandem-bench-kv-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        ctx = mp.get_context("spawn")
        self.in_q, self.handoff_q, self.events_q = ctx.Queue(), ctx.Queue(), ctx.Queue()
        common = {"model": str(args.model), "dtype": args.dtype, "kv_root": self.kv_root,
                  "prefix_cache_tokens": args.prefix_cache_tokens}
        self.procs = [
            ctx.Process(target=ew.prefill_worker, name="bench-prefill", daemon=True,
                        args=(ew.WorkerSpec(core=args.prefill_core, **common), self.in_q, self.handoff_q,
                              self.events_q)),
            ctx.Process(target=ew.decode_worker, name="bench-decode", daemon=True,
                        args=(ew.WorkerSpec(core=args.decode_core, **common), self.handoff_q, self.events_q)),
        ]
        self.ready: dict[str, dict] = {}
        self._ready = threading.Event()
        self._closing = False
        for p in self.procs:
            p.start()
        self._collector = threading.Thread(target=self._collect, name="bench-collector", daemon=True)
        self._collector.start()
        deadline = time.monotonic() + 300
        while not self._ready.wait(1.0):
            if self.tracker.error or time.monotonic() > deadline or not all(p.is_alive() for p in self.procs):
                self.close()
                raise RuntimeError(f"workers did not start: {self.tracker.error or 'timeout or exit'}")

    def _collect(self) -> None:
        while True:
            try:
                msg = self.events_q.get(timeout=1.0)
            except queue.Empty:
                if self._closing:
                    return
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead and not self._closing:
                    self.tracker.fail(f"worker process exited: {dead}")
                continue
            kind = msg[0]
            if kind == "tokens":
                tr = self.tracker
                for rid, index, _token, ts in msg[1]:
                    tr.token(rid, index, ts)
            elif kind == "finish":
                self.tracker.finish(msg[1], msg[2])
            elif kind == "stats":
                for rid, values in msg[2]:
                    self.tracker.worker_stats.setdefault(rid, {}).update(values)
            elif kind == "ready":
                self.ready[msg[1]] = msg[2]
                if len(self.ready) == 2:
                    self._ready.set()
            elif kind == "error":
                self.tracker.fail(f"{msg[1]} worker: {msg[2]}")

    def submit(self, rid, prompt_ids, max_tokens, kind):
        self.tracker.submitted(rid, kind)
        self.in_q.put(("prompt", rid, prompt_ids, greedy(max_tokens).to_dict()))

    def cancel(self, rid):
        self.in_q.put(("cancel", rid))

    def pids(self):
        return [p.pid for p in self.procs if p.pid is not None]

    def close(self):
        self._closing = True
        try:
            self.in_q.put(("stop",))
            for p in self.procs:
                p.join(15)
        finally:
            for p in self.procs:
                if p.is_alive():
                    p.terminate()
                    p.join(5)
            self._collector.join(3)
            shutil.rmtree(self.kv_root, ignore_errors=True)


def run_single(target: Target, prompts: list[list[int]], n: int, out_tokens: int, tag: str) -> dict:
    """n requests one after another, each on an idle engine."""
    for i in range(n):
        rid = f"{tag}-{i}"
        target.submit(rid, prompts[i % len(prompts)], out_tokens, "stream")
        target.tracker.wait(lambda r=rid: target.tracker.all_done([r]), what=f"{tag} request {i}")
    return metrics(list(target.tracker.traces.values()))


def run_burst(target: Target, prompts: list[list[int]], n: int, out_tokens: int, tag: str) -> dict:
    """n requests submitted at the same moment."""
    rids = [f"{tag}-{i}" for i in range(n)]
    for i, rid in enumerate(rids):
        target.submit(rid, prompts[i % len(prompts)], out_tokens, "stream")
    target.tracker.wait(lambda: target.tracker.all_done(rids), what=tag, expected_tokens=n * out_tokens)
    return metrics([target.tracker.traces[r] for r in rids])


def run_mixed(target: Target, prompts: list[list[int]], long_prompts: list[list[int]], sz: Sizes,
              tag: str, *, arrivals: bool) -> dict:
    """sz.mixed_streams decode streams; once all have their first token, a long prompt
    every arrival_interval_s until the first stream finishes or mixed_max_s have passed
    (or none, unloaded): the window in which the streams' ITL is counted."""
    tr = target.tracker
    rids = [f"{tag}-s{i}" for i in range(sz.mixed_streams)]
    for i, rid in enumerate(rids):
        target.submit(rid, prompts[i % len(prompts)], sz.mixed_output_tokens, "stream")
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
            target.submit(rid, long_prompts[len(arrived) % len(long_prompts)], sz.arrival_output_tokens,
                          "arrival")
            arrived.append(rid)
            tick += sz.arrival_interval_s
            while time.monotonic() < tick and not tr.check(lambda: tr.any_done(rids)):
                tr.sleep(tick - time.monotonic())
    else:
        tr.wait(lambda: tr.any_done(rids), what=f"{tag} decode window")
    done = [tr.traces[r] for r in rids if tr.traces[r].reason is not None]
    t1 = min(max(t.ts.values()) for t in done) if done else time.time()
    unserved = [a for a in arrived if tr.traces[a].reason is None]
    for a in unserved:  # the window is over: stop what is still queued or running
        target.cancel(a)
    tr.wait(lambda: tr.all_done(rids + arrived), what=f"{tag} drain",
            expected_tokens=len(rids) * sz.mixed_output_tokens + len(arrived) * sz.arrival_output_tokens)
    res = metrics([tr.traces[r] for r in rids], window=(t0, t1))
    res["window_s"] = t1 - t0
    res["arrivals"] = len(arrived)
    if arrived:
        arr = [tr.traces[a] for a in arrived]
        first = [a for a in arr if 0 in a.ts]
        ttft = [a.ts[0] - a.submitted for a in first]
        res["arrivals_first_token"] = len(first)
        res["arrivals_ttft_p50_ms"] = ms(percentile(ttft, 50))
        res["arrivals_ttft_p99_ms"] = ms(percentile(ttft, 99))
        res["arrivals_rate_per_s"] = len(arrived) / (t1 - t0) if t1 > t0 else None
        ws = [tr.worker_stats[a] for a in arrived if a in tr.worker_stats]
        for key in ("compute_ms", "put_ms", "take_ms"):
            vals = [w[key] for w in ws if w.get(key) is not None]
            if vals:
                res[f"arrivals_{key}_p50"] = percentile(vals, 50)
                res[f"arrivals_{key}_p99"] = percentile(vals, 99)
    return res


def warm_up(target: Target, prompts: list[list[int]], long_prompts: list[list[int]], n: int) -> None:
    """Unmeasured: a burst (decode batch shapes up to n) and a long prompt, so one-off costs
    (oneDNN kernel creation, allocator growth) fall outside the measurements."""
    target.tracker = Tracker()
    rids = [f"warm-{i}" for i in range(n)]
    for i, rid in enumerate(rids):
        target.submit(rid, prompts[i % len(prompts)], 6, "warmup")
    target.submit("warm-long", long_prompts[-1], 4, "warmup")
    target.tracker.wait(lambda: target.tracker.all_done([*rids, "warm-long"]), what="warm-up")


# -- the systems -------------------------------------------------------------------------


@dataclass
class Row:
    system: str
    workload: str
    streams: int
    output_tokens: int  # per stream
    metrics: dict
    load1: float
    others: float | None = None  # cores used by other processes while the row ran
    method: str = "measured"
    notes: str = ""
    error: str | None = None


def run_tandem(target_factory: Callable[[], Target], name: str, workloads: list[str], sz: Sizes,
               prompts: list[list[int]], long_prompts: list[list[int]], rows: list[Row]) -> None:
    say(f"{name}: starting")
    try:
        target = target_factory()
    except Exception:
        err = traceback.format_exc()
        say(f"{name}: failed to start\n{err}")
        rows.append(Row(name, "-", 0, 0, {}, os.getloadavg()[0], error=err.strip().splitlines()[-1]))
        return
    if isinstance(target, DisaggregatedTarget):
        say(f"{name}: workers ready: {target.ready}")
    try:
        warm_up(target, prompts, long_prompts, max([1, *[sz.streams[w] for w in workloads if w in sz.streams]]))
        for wl in workloads:
            phases = [("mixed-unloaded", False), ("mixed-loaded", True)] if wl == "mixed" else [(wl, None)]
            for label, loaded in phases:
                target.tracker = Tracker()
                load = os.getloadavg()[0]
                meter = CpuMeter(target.pids())
                tag = f"{name}-{label}"
                t = time.monotonic()
                try:
                    if wl == "single":
                        say(f"{name}: single stream, {sz.single_requests} requests x {sz.output_tokens} tokens")
                        m = run_single(target, prompts, sz.single_requests, sz.output_tokens, tag)
                        row = Row(name, wl, 1, sz.output_tokens, m, load)
                    elif wl in sz.streams:
                        n = sz.streams[wl]
                        say(f"{name}: {n} streams x {sz.output_tokens} tokens")
                        m = run_burst(target, prompts, n, sz.output_tokens, tag)
                        row = Row(name, wl, n, sz.output_tokens, m, load)
                    else:
                        what = (f"{sz.arrival_prompt_tokens}-token prompts every {sz.arrival_interval_s:g} s"
                                if loaded else "no arrivals")
                        say(f"{name}: {label}: {sz.mixed_streams} streams x {sz.mixed_output_tokens} tokens, {what}")
                        m = run_mixed(target, prompts, long_prompts, sz, tag, arrivals=bool(loaded))
                        notes = ""
                        if loaded:
                            notes = (f"{m['window_s']:.0f} s window, {m['arrivals']} arrivals, "
                                     f"{m.get('arrivals_first_token', 0)} got a first token, their TTFT p50/p99 "
                                     f"{fmt_ms(m.get('arrivals_ttft_p50_ms'))}/{fmt_ms(m.get('arrivals_ttft_p99_ms'))} ms")
                            if m.get("arrivals_compute_ms_p50") is not None:
                                notes += (f"; prefill p50 {m['arrivals_compute_ms_p50']:.0f} ms, KV put/take p50 "
                                          f"{m.get('arrivals_put_ms_p50', 0):.0f}/{m.get('arrivals_take_ms_p50', 0):.0f} ms")
                        row = Row(name, label, sz.mixed_streams, sz.mixed_output_tokens, m, load,
                                  method="ITL inside the arrival window", notes=notes)
                except Exception:
                    err = traceback.format_exc()
                    say(f"{name}: {label} failed\n{err}")
                    row = Row(name, label, 0, 0, {}, load, error=err.strip().splitlines()[-1])
                    rows.append(row)
                    if target.tracker.error:
                        return  # a worker died: nothing more to measure on this system
                    continue
                row.others = meter.others_cores()
                rows.append(row)
                say(f"{name}: {label}: {summary_line(row)} ({time.monotonic() - t:.1f} s; other processes "
                    f"{fmt_cores(row.others)} cores)")
    finally:
        target.close()


def fmt_gbs(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def fmt_cores(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def fmt_ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def summary_line(row: Row) -> str:
    m = row.metrics
    return (f"TTFT p50/p99 {fmt_ms(m.get('ttft_p50_ms'))}/{fmt_ms(m.get('ttft_p99_ms'))} ms, "
            f"ITL p50/p99 {m.get('itl_p50_ms') or 0:.1f}/{m.get('itl_p99_ms') or 0:.1f} ms, "
            f"{m.get('tokens_per_s') or 0:.1f} tok/s")


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


class _Stamps:
    """A generate() streamer that only timestamps: put() is called with the prompt first,
    then once per new token."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value) -> None:
        self.times.append(time.time())

    def end(self) -> None:
        pass


def run_hf(args: argparse.Namespace, systems: list[str], workloads: list[str], sz: Sizes,
           prompts: list[list[int]], rows: list[Row]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    hf_workloads = [w for w in workloads if w != "mixed"]
    if not hf_workloads:
        return
    torch.set_num_threads(len(os.sched_getaffinity(0)))

    def load(dtype: str):
        say(f"loading {args.model} for Hugging Face ({dtype}, sdpa)")
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, dtype),
                                                     local_files_only=True).eval()
        pad = model.generation_config.pad_token_id
        if pad is None:
            pad = model.config.eos_token_id if isinstance(model.config.eos_token_id, int) else 0
        return model, pad

    if {"hf_generate", "generate_batch"} & set(systems):
        model, pad = load(args.dtype)
        try:
            if "hf_generate" in systems:
                run_hf_generate("hf_generate", model, pad, hf_workloads, sz, prompts, args, rows)
            if "generate_batch" in systems:
                run_generate_batch(model, GenerationConfig, hf_workloads, sz, prompts, rows)
        finally:
            del model
            gc.collect()
    # HF's own fastest single stream here is fp32 (its bf16 CPU path re-lays out every
    # weight on every call): the single-stream ITL target is also shown against it.
    if "hf_generate_fp32" in systems and "single" in hf_workloads and args.dtype != "float32":
        model, pad = load("float32")
        try:
            run_hf_generate("hf_generate_fp32", model, pad, ["single"], sz, prompts, args, rows)
        finally:
            del model
            gc.collect()


def run_hf_generate(name: str, model, pad: int, workloads: list[str], sz: Sizes, prompts: list[list[int]],
                    args: argparse.Namespace, rows: list[Row]) -> None:
    import torch
    from transformers import GenerationConfig

    def generate(ids: list[int], n: int) -> Trace:
        # eos_token_id=None with use_model_defaults=False: EOS ends nothing (as ignore_eos);
        # with the model's defaults, None would be replaced by the model's EOS id.
        gc_ = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=pad)
        stamps = _Stamps()
        tr = Trace("hf", "stream", time.time())
        x = torch.tensor([ids])
        with torch.inference_mode():
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=gc_, streamer=stamps,
                                 use_model_defaults=False)
        new = out.shape[1] - len(ids)
        for i, t in enumerate(stamps.times[1:][:new]):  # [0] is the prompt
            tr.ts[i] = t
        tr.reason = "length" if new == n else f"short ({new})"
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
        f"(other processes {fmt_cores(others)} cores)")
    k = len(traces)
    for wl in workloads:
        if wl == "single":
            rows.append(Row(name, wl, 1, sz.output_tokens, measured, load, others,
                            method=f"{k} request{'s' if k != 1 else ''} one after another"))
            continue
        n = sz.streams[wl]
        # Queue model: request j waits for all before it, cycling through the measured ones.
        durations = [max(tr.ts.values()) - tr.submitted for tr in traces]
        ttfts = [tr.ts[0] - tr.submitted for tr in traces]
        queued, waited = [], 0.0
        for j in range(n):
            queued.append(waited + ttfts[j % k])
            waited += durations[j % k]
        m = dict(measured)
        m.update(requests=n, output_tokens=n * sz.output_tokens, wall_s=waited,
                 tokens_per_s=n * sz.output_tokens / waited,
                 ttft_p50_ms=ms(percentile(queued, 50)), ttft_p99_ms=ms(percentile(queued, 99)))
        rows.append(Row(name, wl, n, sz.output_tokens, m, load, others,
                        method=f"queue model over {k} sequential request{'s' if k != 1 else ''}"))


def run_generate_batch(model, GenerationConfig, workloads: list[str], sz: Sizes, prompts: list[list[int]],
                       rows: list[Row]) -> None:
    if not hasattr(model, "generate_batch"):
        rows.append(Row("generate_batch", "-", 0, 0, {}, os.getloadavg()[0],
                        error="this transformers has no generate_batch"))
        return
    _patch_cb_memory_probe()
    block = 32

    def config(n_prompts: int, new: int):
        longest = max(len(p) for p in prompts) + new
        blocks = n_prompts * -(-longest // block) + 16
        # eos_token_id=-1: no token ends a request early (EOS ignored, as for Tandem).
        return GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=-1, block_size=block,
                                num_blocks=blocks, max_batch_tokens=256)

    def call(inputs: list[list[int]], new: int) -> tuple[int, float]:
        t0 = time.time()
        res = model.generate_batch(inputs=inputs, generation_config=config(len(inputs), new), progress_bar=False)
        wall = time.time() - t0
        return sum(len(r.generated_tokens) for r in res.values()), wall

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
            f"{fmt_cores(others)} cores)")


# -- targets, report ---------------------------------------------------------------------


def find(rows: list[Row], system: str, workload: str) -> dict | None:
    for r in rows:
        if r.system == system and r.workload == workload and r.error is None:
            return r.metrics
    return None


def evaluate_targets(rows: list[Row]) -> list[dict]:
    out: list[dict] = []

    def add(target, system, value, limit, passed, detail):
        out.append({"target": target, "system": system, "value": value, "limit": limit,
                    "result": "info" if passed is None else ("PASS" if passed else "FAIL"), "detail": detail})

    gb = find(rows, "generate_batch", "streams32")
    for sys_ in TANDEM:
        t32 = find(rows, sys_, "streams32")
        if t32 and gb and gb.get("tokens_per_s"):
            ratio = t32["tokens_per_s"] / gb["tokens_per_s"]
            add("streams32 tok/s >= 5x generate_batch", sys_, round(ratio, 2), 5.0, ratio >= 5.0,
                f"{t32['tokens_per_s']:.0f} vs {gb['tokens_per_s']:.0f} tok/s = {ratio:.2f}x")
    for sys_ in TANDEM:
        t64 = find(rows, sys_, "streams64")
        if t64 and t64.get("tokens_per_s"):
            v = t64["tokens_per_s"]
            add("streams64 tok/s >= 1000", sys_, round(v, 1), 1000.0, v >= 1000.0, f"{v:.0f} tok/s")
    for hf_name, label in (("hf_generate", "HF generate's (same dtype)"),
                           ("hf_generate_fp32", "HF generate's in fp32 (its fastest here)")):
        hf1 = find(rows, hf_name, "single")
        for sys_ in TANDEM:
            t1 = find(rows, sys_, "single")
            if t1 and hf1 and t1.get("itl_p50_ms") and hf1.get("itl_p50_ms"):
                v, lim = t1["itl_p50_ms"], hf1["itl_p50_ms"]
                add(f"single-stream ITL p50 <= {label}", sys_, round(v, 2), round(lim, 2), v <= lim,
                    f"{v:.1f} vs {lim:.1f} ms (p99 {t1['itl_p99_ms']:.1f} vs {hf1['itl_p99_ms']:.1f} ms)")
    for sys_ in TANDEM:
        un, lo = find(rows, sys_, "mixed-unloaded"), find(rows, sys_, "mixed-loaded")
        if un and lo and un.get("itl_p99_ms") and lo.get("itl_p99_ms"):
            ratio = lo["itl_p99_ms"] / un["itl_p99_ms"]
            add("mixed ITL p99 loaded <= 1.5x unloaded", sys_, round(ratio, 2), 1.5,
                ratio <= 1.5 if sys_ == "disaggregated" else None,
                f"{lo['itl_p99_ms']:.1f} vs {un['itl_p99_ms']:.1f} ms = {ratio:.2f}x"
                + ("" if sys_ == "disaggregated" else " (shown beside it; the target is disaggregated's)"))
    return out


def render(rows: list[Row]) -> str:
    headers = ["system", "workload", "streams x out", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
               "tok/s", "load1", "others", "method / notes"]
    body = []
    for r in rows:
        m = r.metrics
        ttft50 = m.get("ttft_p50_ms")
        body.append([
            r.system, r.workload, f"{r.streams} x {r.output_tokens}" if r.streams else "-",
            "n/a" if r.system == "generate_batch" else ttft50,
            "n/a" if r.system == "generate_batch" else m.get("ttft_p99_ms"),
            "n/a" if r.system == "generate_batch" else m.get("itl_p50_ms"),
            "n/a" if r.system == "generate_batch" else m.get("itl_p99_ms"),
            m.get("tokens_per_s"), r.load1, "-" if r.others is None else f"{r.others:.2f}",
            f"ERROR: {r.error}" if r.error else "; ".join(x for x in (r.method, r.notes) if x),
        ])
    return table(headers, body, digits=1)


def render_targets(targets: list[dict]) -> str:
    return table(["target", "system", "result", "detail"],
                 [[t["target"], t["system"], t["result"], t["detail"]] for t in targets])


# -- entry point -------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test (< 2 minutes)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)}")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated subset of {','.join(WORKLOADS)}")
    p.add_argument("--out", default="var/bench/engine.json", help="JSON results (default var/bench/engine.json)")
    p.add_argument("--model", default=str(MODEL_DIR))
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                   help="auto: bfloat16 where the CPU has native bf16 units, else float32")
    p.add_argument("--output-tokens", type=int, default=64, help="per stream, single/streams workloads")
    p.add_argument("--single-requests", type=int, default=3, help="Tandem single-stream requests (sequential)")
    p.add_argument("--hf-requests", type=int, default=4, help="HF generate requests measured (sequential)")
    p.add_argument("--hf-budget-s", type=float, default=60.0,
                   help="stop measuring HF generate after this many seconds (at least one request)")
    p.add_argument("--mixed-streams", type=int, default=32)
    p.add_argument("--mixed-output-tokens", type=int, default=192)
    p.add_argument("--arrival-prompt-tokens", type=int, default=512)
    p.add_argument("--arrival-output-tokens", type=int, default=16)
    # One 512-token prompt every 0.25 s (2,048 prompt tokens/s) is more than one core prefills
    # (~1,500 tokens/s in bf16 here): the prefill queue would grow for as long as the test ran.
    # 0.5 s keeps the prefill core ~70% busy, a load it can sustain.
    p.add_argument("--arrival-interval", type=float, default=0.5,
                   help="seconds between arriving long prompts (default 0.5)")
    p.add_argument("--mixed-max-s", type=float, default=30.0,
                   help="longest arrival window (arrivals stop then even if no stream has finished)")
    p.add_argument("--prefill-core", type=int, default=0)
    p.add_argument("--decode-core", type=int, default=1)
    p.add_argument("--prefix-cache-tokens", type=int, default=0,
                   help="Tandem prefix cache size (default 0 = off: every prompt computed in full, like HF)")
    args = p.parse_args(argv)
    args.dtype = concrete_dtype(args.dtype)
    args.systems = [s for s in args.systems.split(",") if s]
    args.workloads = [w for w in args.workloads.split(",") if w]
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    return args


def memory_bandwidth_gbs() -> float | None:
    """One thread summing 512 MiB of bf16 (far beyond the caches), best of 3: decode streams
    every weight once per step, so this bounds it; noisy neighbours on the host show here
    even when /proc/stat says the guest is idle."""
    try:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        x = torch.ones(256 * 2**20, dtype=torch.bfloat16)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            x.sum()
            best = min(best, time.perf_counter() - t)
        torch.set_num_threads(threads)
        return x.numel() * 2 / best / 1e9
    except Exception:  # noqa: BLE001 - a probe, never a reason to fail the run
        return None


def engine_digest() -> str:
    """sha256 of inference/engine's sources: the worker processes import them when they
    start, so an edit during a run would measure two engines under one name."""
    import hashlib

    root = Path(__file__).resolve().parents[1] / "inference" / "engine"
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def uptime() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    sz = sizes_from(args)
    t_run = time.monotonic()
    info = machine_info()
    cpu_flags = _cpu_flags()
    busy_start = busy_processes()
    load_start = uptime()
    bw_start = memory_bandwidth_gbs()
    engine_start = engine_digest()
    say(f"engine benchmark: {'quick' if args.quick else 'full'} run; systems {','.join(args.systems)}; "
        f"workloads {','.join(args.workloads)}")
    say(f"machine: {info['cpu_model']}, {info['cpus']} cpus, {' '.join(cpu_flags) or 'no bf16 flags'}; "
        f"load average at start {load_start}; memory read bandwidth (1 thread) {fmt_gbs(bw_start)} GB/s")
    if busy_start:
        say("busy at start (the numbers below are skewed by these):\n    " + "\n    ".join(busy_start))

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    n_prompts = max([1, sz.hf_requests, *sz.streams.values(), sz.mixed_streams, sz.single_requests])
    prompts = stream_prompts(tokenizer, n_prompts)
    long_prompts = [long_prompt(tokenizer, i, sz.arrival_prompt_tokens) for i in range(16)]
    lens = [len(p) for p in prompts]
    say(f"prompts: {len(prompts)} chat prompts, {min(lens)}-{max(lens)} tokens (mean {sum(lens) / len(lens):.0f}); "
        f"long prompts {len(long_prompts[0])} tokens")

    rows: list[Row] = []
    if {"hf_generate", "hf_generate_fp32", "generate_batch"} & set(args.systems):
        try:
            run_hf(args, args.systems, args.workloads, sz, prompts, rows)
        except Exception:
            err = traceback.format_exc()
            say(f"Hugging Face systems failed\n{err}")
            rows.append(Row("hf", "-", 0, 0, {}, os.getloadavg()[0], error=err.strip().splitlines()[-1]))

    tandem = [s for s in args.systems if s in TANDEM]
    if any(s.startswith("colocated") for s in tandem):
        from inference.engine.config import EngineConfig
        from inference.engine.loader import load_model

        cfg = EngineConfig(model=args.model, dtype=args.dtype, prefix_cache_tokens=args.prefix_cache_tokens)
        say(f"loading {args.model} for Tandem in this process ({args.dtype}, {len(os.sched_getaffinity(0))} threads)")
        loaded = load_model(cfg)
        for s in tandem:
            if s.startswith("colocated"):
                run_tandem(lambda s=s: ColocatedTarget(loaded, cfg, chunked=s == "colocated_chunked"), s,
                           args.workloads, sz, prompts, long_prompts, rows)
                gc.collect()
        del loaded
        gc.collect()
    if "disaggregated" in tandem:
        run_tandem(lambda: DisaggregatedTarget(args), "disaggregated", args.workloads, sz, prompts, long_prompts,
                   rows)

    targets = evaluate_targets(rows)
    load_end = uptime()
    busy_end = busy_processes()
    bw_end = memory_bandwidth_gbs()
    engine_end = engine_digest()
    duration = time.monotonic() - t_run
    methods = [
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
        f"Tandem prefix cache: {'off' if not args.prefix_cache_tokens else f'{args.prefix_cache_tokens} tokens'}; "
        f"disaggregated: prefill on core {args.prefill_core}, decode on core {args.decode_core}, 1 thread each, "
        "KV through SharedMemoryKVStore (/dev/shm); colocated: both cores, 2 threads.",
        "load1 = 1-minute load average when the row started (it includes this benchmark's own threads); "
        "others = CPU cores used by OTHER processes while the row ran (/proc/stat busy time minus this "
        f"benchmark's own); 0 = a quiet machine, {os.cpu_count()} = every core taken.",
    ]
    print()
    print(f"Engine benchmark ({'QUICK: reduced sizes, not the issue targets' if args.quick else 'full'}); "
          f"{info['cpu_model']}, {info['cpus']} cpus ({' '.join(cpu_flags)}); model {args.model} in {args.dtype}")
    print(f"engine sources {engine_start}" + ("" if engine_end == engine_start else f" -> {engine_end} (CHANGED)")
          + f"; git {info.get('git', {}).get('commit', '?')}")
    print(f"load average at start {load_start}, at end {load_end}; memory read bandwidth (1 thread) "
          f"{fmt_gbs(bw_start)} GB/s at start, {fmt_gbs(bw_end)} GB/s at end; {duration:.0f} s")
    for line in methods:
        print(f"- {line}")
    print()
    print(render(rows))
    print()
    print(render_targets(targets) if targets else "(no targets evaluated: a system or workload is missing)")
    if engine_end != engine_start:
        print(f"\nWARNING: inference/engine's sources changed during the run ({engine_start} -> {engine_end}): "
              "rows measured after the change (at least the disaggregated workers, which import the engine "
              "when they start) ran a different engine than the rows before it.")
    busy_rows = [r for r in rows if r.others is not None and r.others > 0.25]
    if busy_rows:
        worst = max(busy_rows, key=lambda r: r.others or 0.0)
        print(f"\nWARNING: the machine was shared: other processes used > 0.25 cores during {len(busy_rows)} of "
              f"{len(rows)} rows (up to {worst.others:.2f} of {os.cpu_count()} cores, {worst.system} "
              f"{worst.workload}); those rows are slower than this machine is.")
    if busy_start or busy_end:
        print("\nother busy processes at start:\n  " + ("\n  ".join(busy_start) or "none")
              + "\nat end:\n  " + ("\n  ".join(busy_end) or "none"))
    path = write_json(args.out, {
        "benchmark": "engine", "quick": args.quick, "args": vars(args), "sizes": sz.__dict__,
        "machine": {**info, "cpu_flags": cpu_flags}, "load_start": load_start, "load_end": load_end,
        "mem_bw_gbs_start": bw_start, "mem_bw_gbs_end": bw_end,
        "engine_sources": {"start": engine_start, "end": engine_end},
        "busy_start": busy_start, "busy_end": busy_end, "duration_s": duration, "methods": methods,
        "results": [r.__dict__ for r in rows], "targets": targets,
    })
    say(f"wrote {path}")


def _cpu_flags() -> list[str]:
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    except (OSError, IndexError):
        return []
    return [f for f in ("avx512_bf16", "amx_bf16", "amx_tile", "amx_int8") if f in flags]
