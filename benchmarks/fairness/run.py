"""`python -m benchmarks fairness`: does one tenant's flood hurt another's time to
first token?

Two tenants share one prefill worker and one decode worker (the shared pools), on a
throwaway platform (its own Redis and SQLite file under var/bench/), the real
SmolLM2-135M-Instruct (or --model tiny) in the dtype the workers pick, prefill pinned to
one core and decode to the other.

- Tenant B keeps the default quota and allocation (priority 0, max_decode_slots 16);
  only its max_output_tokens is lowered (16 by default) so that it can send many short
  requests in the time: TTFT is what is measured. B sends one request at a time, at
  most one every --b-interval seconds (which keeps it under its default 60 requests
  per minute).
- Tenant A floods: --flood-clients websocket clients (32) in a closed loop, each sending
  the next request as soon as its reply ends, for 64 output tokens; A's quota allows 8
  concurrent streams and its allocation 4 decode slots, so most of A's attempts are
  refused (`rate_limited`) and retried after the `retry_after` the platform gives.

Phase 1: B alone. Phase 2: A floods while B repeats the same measurement. Target: B's
p99 TTFT with the flood <= 1.5x its p99 alone. B's TTFT is split by the marks each
request left in Redis (web, cpu tier, prefill tier, delivery), and the queues and the
workers' batches are sampled every half second, to show where B waits.
"""

from __future__ import annotations

import argparse
import threading
import time

from ..cores import isolate_core, renice_threads, threads_of
from ..quick import add_quick_options, parse_quick
from ..report import fmt, say, write_json
from ..stack import site as platform_site
from ..stack.chat_client import ChatClient, chat_loop
from ..stack.monitor import profiled
from ..stack.prompts import Counter
from ..stack.sampler import StateSampler
from ..stack.stages import fill_stages, stage_summary
from ..stack.tenancy import make_tenant
from ..stats import percentile, summarize
from ..traces import Trace, summarize_traces
from .report import report

QUEUES = ["cpu", "prefill.shared", "decode.shared"]

DEFAULT_OUT = "var/bench/fairness.json"
# --quick: the tiny model, a handful of B's requests per phase, a small flood for a second.
QUICK = {"model": "tiny", "b_requests": 4, "b_interval": 0.2, "flood_clients": 4, "flood_ramp": 1.0,
         "a_max_output_tokens": 16, "profile_requests": 2, "decode_slots": 8}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks fairness", description=__doc__.split("\n\n")[0])
    p.add_argument("--b-requests", type=int, default=60, help="B's measured requests per phase")
    p.add_argument("--b-interval", type=float, default=1.1,
                   help="B starts a request at most this often, seconds (default quota: 60 requests/minute)")
    p.add_argument("--b-max-output-tokens", type=int, default=16)
    p.add_argument("--flood-clients", type=int, default=32)
    p.add_argument("--flood-ramp", type=float, default=6.0, help="seconds of flood before B starts measuring")
    p.add_argument("--a-max-output-tokens", type=int, default=64)
    p.add_argument("--a-streams", type=int, default=8, help="A's max_concurrent_streams")
    p.add_argument("--a-decode-slots", type=int, default=4, help="A's allocation max_decode_slots")
    p.add_argument("--profile-requests", type=int, default=10,
                   help="after each phase's measurement, this many more B requests under Redis MONITOR "
                        "(finer stages: broker hops, Celery dispatch, task bodies); 0 to skip")
    p.add_argument("--isolate-prefill", action="store_true",
                   help="experiment: move daphne, the CPU worker, Redis and this process onto the decode core, "
                        "leaving the prefill core to the prefill worker alone")
    p.add_argument("--model-nice", type=int, default=None,
                   help="experiment: run the prefill and decode workers at this nice value (e.g. -10: the "
                        "scheduler then favours them over the web tier, the CPU tier and Redis on a shared core)")
    p.add_argument("--decode-nice", type=int, default=None,
                   help="experiment: run the decode worker alone at this nice value (e.g. 5: the web and "
                        "CPU tiers then take CPU from decode, not from the prefill core)")
    p.add_argument("--prefill-nice", type=int, default=None,
                   help="experiment: run the prefill worker alone at this nice value (e.g. -5, needs root: "
                        "its forwards then preempt the web and CPU tiers that share its core)")
    p.add_argument("--target-ratio", type=float, default=1.5)
    platform_site.add_site_options(p)
    add_quick_options(p, default_out=DEFAULT_OUT)
    return parse_quick(p, argv, name="fairness", default_out=DEFAULT_OUT, quick_defaults=QUICK,
                       parse=platform_site.parse)


def paced_requests(ws_url: str, key: str, *, n: int, interval: float, next_prompt, tenant: str,
                   label: str) -> list[Trace]:
    """One websocket client, `n` requests one after another, starts at least `interval`
    apart. A refused request (it should not be, at this pace) is recorded and counted."""
    chat = ChatClient(ws_url, key)
    traces = []
    try:
        for k in range(n):
            t0 = time.monotonic()
            tr = chat.ask(Trace(client=0, seq=k, prompt_n=next_prompt(), tenant=tenant))
            traces.append(tr)
            if (k + 1) % 10 == 0 or tr.error:
                recent = [t.ttft_ms for t in traces[-10:] if t.ttft_ms is not None]
                say(f"  {label}: {k + 1}/{n}, TTFT of the last {len(recent)}: p50 "
                    f"{fmt(percentile(recent, 50))} ms, max {fmt(max(recent, default=None))} ms"
                    + (f"; error {tr.error}" if tr.error else ""))
            left = interval - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
    finally:
        chat.close()
    return traces


class Flood:
    """Tenant A's clients in a closed loop on a background thread until finished."""

    def __init__(self, ws_url: str, key: str, *, clients: int, next_prompt):
        self.stop = threading.Event()
        self.traces: list[Trace] = []
        self._thread = threading.Thread(target=self._run, args=(ws_url, key, clients, next_prompt), name="flood",
                                        daemon=True)

    def _run(self, ws_url: str, key: str, clients: int, next_prompt) -> None:
        self.traces = chat_loop(ws_url, key, clients=clients, stop=self.stop, next_prompt=next_prompt, tenant="A",
                                retry_refused=True)

    def start(self) -> Flood:
        self.t_start = time.time()
        self._thread.start()
        return self

    def finish(self, timeout: float = 180) -> list[Trace]:
        self.stop.set()
        self._thread.join(timeout)
        self.t_end = time.time()
        return self.traces


def b_summary(traces: list[Trace]) -> dict:
    return {**summarize_traces(traces), "stages_ms": stage_summary(traces, ("web", "cpu", "prefill", "deliver"))}


def a_summary(traces: list[Trace], span_s: float) -> dict:
    ok = [t for t in traces if t.ok]
    return {
        "attempts": len(traces),
        "served": len(ok),
        "refused_rate_limited": sum(1 for t in traces if t.error == "rate_limited"),
        "other_errors": sorted({t.error for t in traces if t.error and t.error != "rate_limited"}),
        "ttft_ms": summarize(t.ttft_ms for t in ok),
        "tpot_ms": summarize(t.tpot_ms for t in ok),
        "output_tokens_per_s": sum(t.n_tokens for t in ok) / span_s if span_s > 0 else None,
        "attempts_per_s": len(traces) / span_s if span_s > 0 else None,
    }


def experiments(args: argparse.Namespace, site, plat, result: dict) -> None:
    """The nice and isolation experiments the options ask for (none by default)."""
    for nice, prefixes, key in ((args.model_nice, ("prefill", "decode"), "reniced"),
                                (args.decode_nice, ("decode",), "reniced_decode"),
                                (args.prefill_nice, ("prefill",), "reniced_prefill")):
        if nice is not None:
            result[key] = {name: renice_threads(threads_of(proc.pid), nice)
                           for name, proc in plat.procs.items() if name.startswith(prefixes)}
            say(f"{' and '.join(prefixes)} worker(s) at nice {nice}: {result[key]} threads")
    if args.isolate_prefill:
        others = {name: proc.pid for name, proc in plat.procs.items() if name == "web" or name.startswith("cpu")}
        if site.redis_proc is not None:
            others["redis"] = site.redis_proc.pid
        result["isolated"] = isolate_core(others, keep=args.prefill_core, move_to=args.decode_core)
        say(f"isolated core {args.prefill_core}: moved {result['isolated']} (threads) to core {args.decode_core}")


def make_tenants(args: argparse.Namespace) -> tuple:
    """A, the flooder (a high request rate, few streams and decode slots), and B, on the
    defaults but for a short output; and what the result records of both."""
    from tenants.models import Tenant

    a = make_tenant("flood-a", quota={
        "requests_per_minute": 100_000, "tokens_per_minute": 100_000_000, "daily_token_budget": 10**12,
        "max_concurrent_streams": args.a_streams, "max_output_tokens": args.a_max_output_tokens,
    }, allocation={"max_decode_slots": args.a_decode_slots})
    b = make_tenant("quiet-b", quota={"max_output_tokens": args.b_max_output_tokens})
    tb = Tenant.objects.select_related("quota", "allocation").get(pk=b.tenant_id)
    config = {
        "a": {"quota": {"max_concurrent_streams": args.a_streams, "max_output_tokens": args.a_max_output_tokens,
                        "requests_per_minute": 100_000},
              "allocation": {"max_decode_slots": args.a_decode_slots, "priority": 0},
              "flood_clients": args.flood_clients},
        "b": {"quota": {"requests_per_minute": tb.quota.requests_per_minute,
                        "max_concurrent_streams": tb.quota.max_concurrent_streams,
                        "max_output_tokens": tb.quota.max_output_tokens},
              "allocation": {"max_decode_slots": tb.allocation.max_decode_slots, "priority": tb.allocation.priority},
              "requests_per_phase": args.b_requests, "interval_s": args.b_interval},
    }
    return a, b, config


def phases(args: argparse.Namespace, site, plat, a, b, result: dict) -> None:
    """Warm-up, then B alone, then B while A floods; each phase with its MONITOR pass."""
    from inference.wire.connections import new_redis

    prompts = Counter(0)

    def b_requests(n: int, label: str) -> list[Trace]:
        return paced_requests(plat.ws_url, b.widget_key, n=n, interval=args.b_interval, next_prompt=prompts,
                              tenant="B", label=label)

    def b_profile(label: str) -> dict | None:
        """B's next requests under Redis MONITOR (not counted in the TTFT percentiles)."""
        if args.profile_requests <= 0:
            return None
        return profiled(site.redis_url, lambda: b_requests(args.profile_requests, f"{label}, profiled"))

    say("warm-up: 2 requests per tenant")
    for t in (b, a):
        warm = chat_loop(plat.ws_url, t.widget_key, clients=1, requests_per_client=2, next_prompt=prompts)
        if not all(w.ok for w in warm):
            raise RuntimeError(f"warm-up failed for {t.slug}: {[w.error for w in warm]}")

    say(f"phase 1: B alone, {args.b_requests} requests")
    with StateSampler(QUEUES) as s_alone:
        alone = b_requests(args.b_requests, "B alone")
        result["profile_alone"] = b_profile("B alone")

    say(f"phase 2: A floods with {args.flood_clients} clients; B measures after {args.flood_ramp:.0f}s")
    with StateSampler(QUEUES) as s_flood:
        flood = Flood(plat.ws_url, a.widget_key, clients=args.flood_clients, next_prompt=prompts).start()
        time.sleep(args.flood_ramp)
        try:
            flooded = b_requests(args.b_requests, "B under flood")
            result["profile_flood"] = b_profile("B under flood")
        finally:
            say("stopping the flood (A's clients finish the replies in flight)")
            a_traces = flood.finish()
    fill_stages(new_redis(), alone + flooded)
    result.update(b_alone=b_summary(alone), b_flood=b_summary(flooded),
                  a_flood=a_summary(a_traces, flood.t_end - flood.t_start),
                  state_alone=s_alone.summary(), state_flood=s_flood.summary(),
                  traces={"b_alone": [t.to_json() for t in alone], "b_flood": [t.to_json() for t in flooded],
                          "a": [t.to_json() for t in a_traces if t.ok]})


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    result = platform_site.start_run("fairness", argv, quick=args.quick)
    with platform_site.bench_site("fairness", args) as site:
        a, b, result["config"] = make_tenants(args)
        result["config"].update(
            dtype=args.dtype, prefill_core=args.prefill_core, decode_core=args.decode_core,
            decode_slots=args.decode_slots, db_url=site.db_url, run_dir=str(site.run_dir),
            model_nice=args.model_nice, decode_nice=args.decode_nice, prefill_nice=args.prefill_nice,
            isolate_prefill=args.isolate_prefill, conn_max_age=args.conn_max_age)
        with platform_site.platform_up(site, args) as plat:
            experiments(args, site, plat, result)
            phases(args, site, plat, a, b, result)
    p99_alone, p99_flood = result["b_alone"]["ttft_ms"]["p99"], result["b_flood"]["ttft_ms"]["p99"]
    ratio = p99_flood / p99_alone if p99_alone and p99_flood else None
    result["verdict"] = {"p99_alone_ms": p99_alone, "p99_flood_ms": p99_flood, "ratio": ratio,
                         "target_ratio": args.target_ratio, "met": ratio is not None and ratio <= args.target_ratio,
                         "samples_per_phase": args.b_requests}
    report(result)
    say(f"wrote {write_json(args.out, result)}")
