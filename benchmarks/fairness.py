"""`python -m benchmarks fairness`: does one tenant's flood hurt another's time to
first token?

Two tenants share one prefill worker and one decode worker (the shared pools), on a
throwaway platform (its own Redis and SQLite file under var/bench/), the real
SmolLM2-135M-Instruct in bf16, prefill pinned to one core and decode to the other.

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

from . import common
from .common import Counter, Trace, say, summarize, table


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
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has native bf16 units, else float32")
    p.add_argument("--prefill-core", type=int, default=0)
    p.add_argument("--decode-core", type=int, default=1)
    p.add_argument("--decode-slots", type=int, default=64, help="the decode engine's batch slots (TANDEM_MAX_BATCH)")
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
    p.add_argument("--conn-max-age", type=int, default=None,
                   help="DB_CONN_MAX_AGE for the platform's processes (default: the settings' default)")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private one)")
    p.add_argument("--db-url", default=None,
                   help="use this database (default: a new SQLite file under var/bench/); 'postgres' makes a "
                        "throwaway database on 127.0.0.1:5432")
    p.add_argument("--out", default="var/bench/fairness.json")
    args = p.parse_args(argv)
    args.dtype = common.concrete_dtype(args.dtype)
    return args


def paced_requests(ws_url: str, key: str, *, n: int, interval: float, next_prompt, tenant: str,
                   label: str) -> list[Trace]:
    """One websocket client, `n` requests one after another, starts at least `interval`
    apart. A refused request (it should not be, at this pace) is recorded and counted."""
    chat = common.ChatClient(ws_url, key)
    traces = []
    try:
        for k in range(n):
            t0 = time.monotonic()
            n_prompt = next_prompt()
            tr = chat.ask(Trace(client=0, seq=k, prompt_n=n_prompt, tenant=tenant), common.prompt_text(n_prompt))
            traces.append(tr)
            if (k + 1) % 10 == 0 or tr.error:
                recent = [t.ttft_ms for t in traces[-10:] if t.ttft_ms is not None]
                say(f"  {label}: {k + 1}/{n}, TTFT of the last {len(recent)}: p50 "
                    f"{common.fmt(common.percentile(recent, 50))} ms, max {common.fmt(max(recent, default=None))} ms"
                    + (f"; error {tr.error}" if tr.error else ""))
            left = interval - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
    finally:
        chat.close()
    return traces


class Flood:
    """Tenant A's clients in a closed loop on background threads until stopped."""

    def __init__(self, ws_url: str, key: str, *, clients: int, next_prompt):
        self.stop = threading.Event()
        self.traces: list[Trace] = []
        self._args = (ws_url, key)
        self._kw = dict(clients=clients, stop=self.stop, next_prompt=next_prompt, tenant="A", retry_refused=True)
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def _run(self) -> None:
        self.traces = common.closed_loop(*self._args, **self._kw)

    def start(self) -> Flood:
        self.t_start = time.time()
        self._thread.start()
        return self

    def finish(self, timeout: float = 180) -> list[Trace]:
        self.stop.set()
        self._thread.join(timeout)
        self.t_end = time.time()
        return self.traces


def profile(site, ws_url: str, key: str, args, prompts, label: str) -> dict | None:
    """B's next requests under Redis MONITOR (not counted in the TTFT percentiles)."""
    if args.profile_requests <= 0:
        return None
    with common.monitored(site.redis_url) as lines:
        traces = paced_requests(ws_url, key, n=args.profile_requests, interval=args.b_interval,
                                next_prompt=prompts, tenant="B", label=label)
    return common.monitor_profile(lines, traces)


def b_summary(traces: list[Trace]) -> dict:
    ok = [t for t in traces if t.ok]
    return {
        "requests": len(traces),
        "errors": sorted({t.error for t in traces if t.error}),
        "error_count": len(traces) - len(ok),
        "ttft_ms": summarize(t.ttft_ms for t in ok),
        "tpot_ms": summarize(t.tpot_ms for t in ok),
        "itl_first_ms": summarize(t.itl_ms[0] for t in ok if t.itl_ms),
        "stages_ms": {k: summarize(t.stages.get(f"{k}_ms") for t in ok if t.stages)
                      for k in ("web", "cpu", "prefill", "deliver")},
    }


def a_summary(traces: list[Trace], span_s: float) -> dict:
    ok = [t for t in traces if t.ok]
    refused = [t for t in traces if t.error == "rate_limited"]
    return {
        "attempts": len(traces),
        "served": len(ok),
        "refused_rate_limited": len(refused),
        "other_errors": sorted({t.error for t in traces if t.error and t.error != "rate_limited"}),
        "ttft_ms": summarize(t.ttft_ms for t in ok),
        "tpot_ms": summarize(t.tpot_ms for t in ok),
        "output_tokens_per_s": sum(len(t.token_times) for t in ok) / span_s if span_s > 0 else None,
        "attempts_per_s": len(traces) / span_s if span_s > 0 else None,
    }


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    result = common.start_run("fairness", argv)

    with common.bench_site("fairness", redis_url=args.redis_url, db_url=args.db_url) as site:
        import redis

        a = common.make_tenant("flood-a", quota={
            "requests_per_minute": 100_000, "tokens_per_minute": 100_000_000, "daily_token_budget": 10**12,
            "max_concurrent_streams": args.a_streams, "max_output_tokens": args.a_max_output_tokens,
        }, allocation={"max_decode_slots": args.a_decode_slots})
        b = common.make_tenant("quiet-b", quota={"max_output_tokens": args.b_max_output_tokens})
        from tenants.models import Tenant

        tb = Tenant.objects.select_related("quota", "allocation").get(pk=b.tenant_id)
        result["config"] = {
            "a": {"quota": {"max_concurrent_streams": args.a_streams, "max_output_tokens": args.a_max_output_tokens,
                            "requests_per_minute": 100_000},
                  "allocation": {"max_decode_slots": args.a_decode_slots, "priority": 0},
                  "flood_clients": args.flood_clients},
            "b": {"quota": {"requests_per_minute": tb.quota.requests_per_minute,
                            "max_concurrent_streams": tb.quota.max_concurrent_streams,
                            "max_output_tokens": tb.quota.max_output_tokens},
                  "allocation": {"max_decode_slots": tb.allocation.max_decode_slots,
                                 "priority": tb.allocation.priority},
                  "requests_per_phase": args.b_requests, "interval_s": args.b_interval},
            "dtype": args.dtype, "prefill_core": args.prefill_core, "decode_core": args.decode_core,
            "decode_slots": args.decode_slots, "db_url": site.db_url, "run_dir": str(site.run_dir),
            "model_nice": args.model_nice, "decode_nice": args.decode_nice, "prefill_nice": args.prefill_nice, "isolate_prefill": args.isolate_prefill,
            "conn_max_age": args.conn_max_age,
        }
        workers = [
            ("cpu", "shared", {"CONCURRENCY": "1"}),
            ("prefill", "shared", common.model_worker_env(core=args.prefill_core, dtype=args.dtype, concurrency=8)),
            ("decode", "shared", common.model_worker_env(core=args.decode_core, dtype=args.dtype,
                                                         concurrency=args.decode_slots,
                                                         TANDEM_MAX_BATCH=args.decode_slots)),
        ]
        env = {"DEBUG": "0"}
        if args.conn_max_age is not None:
            env["DB_CONN_MAX_AGE"] = str(args.conn_max_age)
        queues = ["cpu", "prefill.shared", "decode.shared"]
        prompts = Counter(0)
        with common.platform_up(site, workers, extra_env=env) as plat:
            client = redis.Redis.from_url(site.redis_url)
            # The nice experiments: (option value, which workers, key in the result JSON).
            for nice, prefixes, key in ((args.model_nice, ("prefill", "decode"), "reniced"),
                                        (args.decode_nice, ("decode",), "reniced_decode"),
                                        (args.prefill_nice, ("prefill",), "reniced_prefill")):
                if nice is not None:
                    result[key] = {name: common.renice_all_threads(proc.pid, nice)
                                   for name, proc in plat.procs.items() if name.startswith(prefixes)}
                    say(f"{' and '.join(prefixes)} worker(s) at nice {nice}: {result[key]} threads")
            if args.isolate_prefill:
                result["isolated"] = common.isolate_core(site, plat, keep=args.prefill_core, move_to=args.decode_core)
            say("warm-up: 2 requests per tenant")
            for t in (b, a):
                warm = common.closed_loop(plat.ws_url, t.widget_key, clients=1, requests_per_client=2,
                                          next_prompt=prompts)
                if not all(w.ok for w in warm):
                    raise RuntimeError(f"warm-up failed for {t.slug}: {[w.error for w in warm]}")

            say(f"phase 1: B alone, {args.b_requests} requests")
            with common.StateSampler(site.redis_url, queues) as s_alone:
                alone = paced_requests(plat.ws_url, b.widget_key, n=args.b_requests, interval=args.b_interval,
                                       next_prompt=prompts, tenant="B", label="B alone")
                prof_alone = profile(site, plat.ws_url, b.widget_key, args, prompts, "B alone, profiled")

            say(f"phase 2: A floods with {args.flood_clients} clients; B measures after {args.flood_ramp:.0f}s")
            with common.StateSampler(site.redis_url, queues) as s_flood:
                flood = Flood(plat.ws_url, a.widget_key, clients=args.flood_clients, next_prompt=prompts).start()
                time.sleep(args.flood_ramp)
                try:
                    flooded = paced_requests(plat.ws_url, b.widget_key, n=args.b_requests,
                                             interval=args.b_interval, next_prompt=prompts, tenant="B",
                                             label="B under flood")
                    prof_flood = profile(site, plat.ws_url, b.widget_key, args, prompts, "B under flood, profiled")
                finally:
                    say("stopping the flood (A's clients finish the replies in flight)")
                    a_traces = flood.finish()
            common.fill_stages(client, alone + flooded)
            for t in alone + flooded:
                t.stages.pop("prompt_ids", None)

    span = flood.t_end - flood.t_start
    result["b_alone"] = b_summary(alone)
    result["b_flood"] = b_summary(flooded)
    result["a_flood"] = a_summary(a_traces, span)
    result["profile_alone"], result["profile_flood"] = prof_alone, prof_flood
    result["state_alone"] = s_alone.summary()
    result["state_flood"] = s_flood.summary()
    p99_alone, p99_flood = result["b_alone"]["ttft_ms"]["p99"], result["b_flood"]["ttft_ms"]["p99"]
    ratio = p99_flood / p99_alone if p99_alone and p99_flood else None
    result["verdict"] = {"p99_alone_ms": p99_alone, "p99_flood_ms": p99_flood, "ratio": ratio,
                         "target_ratio": args.target_ratio, "met": ratio is not None and ratio <= args.target_ratio,
                         "samples_per_phase": args.b_requests}
    result["traces"] = {"b_alone": [t.to_json() for t in alone], "b_flood": [t.to_json() for t in flooded],
                        "a": [t.to_json() for t in a_traces if t.ok]}
    report(result)
    path = common.write_json(args.out, result)
    say(f"wrote {path}")


def report(r: dict) -> None:
    ba, bf = r["b_alone"], r["b_flood"]
    print()
    print("## Tenant B's TTFT, alone and while tenant A floods (ms)")
    print()
    rows = []
    for label, s in (("B alone", ba), ("B, A flooding", bf)):
        t = s["ttft_ms"]
        rows.append([label, s["requests"] - s["error_count"], s["error_count"], t["p50"], t["p90"], t["p99"], t["max"],
                     s["tpot_ms"]["p50"], s["itl_first_ms"]["p50"]])
    print(table(["phase", "ok", "errors", "TTFT p50", "TTFT p90", "TTFT p99", "TTFT max", "TPOT p50",
                 "ITL 0->1 p50"], rows))
    print()
    print("## Where B's TTFT goes (ms; web = send -> spec stored, cpu = -> prompt built and prefill queued, "
          "prefill = -> token 0 produced, deliver = -> frame at the client)")
    print()
    srows = []
    for label, s in (("B alone", ba), ("B, A flooding", bf)):
        st = s["stages_ms"]
        srows.append([label, *[st[k]["p50"] for k in ("web", "cpu", "prefill", "deliver")],
                      *[st[k]["p99"] for k in ("web", "cpu", "prefill", "deliver")]])
    print(table(["phase", "web p50", "cpu p50", "prefill p50", "deliver p50", "web p99", "cpu p99", "prefill p99",
                 "deliver p99"], srows))
    pa, pf = r.get("profile_alone"), r.get("profile_flood")
    if pa and pf:
        print()
        print(f"## B's TTFT by finer stage, under Redis MONITOR ({pa['requests']} + {pf['requests']} more requests; ms)")
        print()
        prow = [[name, pa["stages"][name]["p50"], pa["stages"][name]["max"], pf["stages"][name]["p50"],
                 pf["stages"][name]["max"], what] for name, _, _, what in common.MONITOR_STAGES]
        prow.append(["TTFT", pa["ttft_ms"]["p50"], pa["ttft_ms"]["max"], pf["ttft_ms"]["p50"], pf["ttft_ms"]["max"],
                     "client send -> first token frame"])
        print(table(["stage", "alone p50", "alone max", "flood p50", "flood max", "what"], prow))
        print(f"\nOther requests' first tokens produced during B's prefill task (mean): alone "
              f"{common.fmt(pa['other_prefills_during_mean'], 2)}, flood {common.fmt(pf['other_prefills_during_mean'], 2)}")
    print()
    af = r["a_flood"]
    print(f"Tenant A during the flood: {af['attempts']} attempts ({common.fmt(af['attempts_per_s'])}/s), "
          f"{af['served']} served, {af['refused_rate_limited']} refused (rate_limited); A's TTFT p50 "
          f"{common.fmt(af['ttft_ms']['p50'])} ms, p99 {common.fmt(af['ttft_ms']['p99'])} ms; A's output "
          f"{common.fmt(af['output_tokens_per_s'])} tok/s")
    print()
    print("## Queues and batches, sampled every 0.5 s (mean / max)")
    print()
    keys = sorted(set(r["state_alone"]) | set(r["state_flood"]))
    qrows = []
    for k in keys:
        if k.endswith(("tokens_per_s",)):
            continue
        sa, sf = r["state_alone"].get(k, {}), r["state_flood"].get(k, {})
        qrows.append([k, sa.get("mean"), sa.get("max"), sf.get("mean"), sf.get("max")])
    print(table(["what", "alone mean", "alone max", "flood mean", "flood max"], qrows))
    v = r["verdict"]
    print()
    print(f"B's p99 TTFT: alone {common.fmt(v['p99_alone_ms'])} ms, with A flooding {common.fmt(v['p99_flood_ms'])} ms"
          f" -> {common.fmt(v['ratio'], 2)}x (target <= {v['target_ratio']}x): {'MET' if v['met'] else 'NOT MET'}"
          f"  [{v['samples_per_phase']} requests per phase: p99 is close to the maximum]")
