"""`python -m benchmarks e2e`: the running platform over websockets beside the engine
alone, on the same prompt token ids at the same concurrency.

Starts a throwaway platform (its own Redis and SQLite file under var/bench/): daphne, a
CPU worker, a prefill worker pinned to one core and a decode worker pinned to another,
serving the real SmolLM2-135M-Instruct in bf16. Loads the same engine in this process
too (the prefill worker's batcher over a PrefillEngine on the first core, a DecodeEngine
on the second; the KV handed over in memory). Then, for each concurrency N, in rounds:
N requests at the same moment on the engine alone, then the same N prompts at the same
moment from N websocket clients on the platform; ~60-token prompts (with the tenant's
system prompt), 64 output tokens. Alternating round by round keeps both sides under the
same background load when the machine is shared (on a quiet machine it changes nothing).

Measured per request: TTFT (send -> first token), inter-token gaps, time per output token,
end-to-end tokens/s. The headline: the platform's TTFT overhead over the engine alone at
p50 with one client sending requests one after another (target <= 20 ms). Every
platform request's TTFT is also split by the marks it left in Redis (web, cpu, prefill,
deliver, and its prefill engine's share from the end record's timings: TTFT minus that
share is the platform's own time, which does not depend on how fast either side's
forward ran); when the overhead misses the target (or with --profile always) a short
pass under Redis MONITOR splits it finer (broker hops, Celery dispatch, task bodies).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import threading
import time
import uuid

from . import common
from .common import Counter, Trace, say, summarize, table


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks e2e", description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="1,4,16", help="comma-separated concurrency levels (default 1,4,16)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds per level, one request per client each (default: 16 at one client, then "
                        "max(2, ceil(12/N)))")
    p.add_argument("--settle", type=float, default=0.5,
                   help="seconds of pause before each side's turn in a round (default 0.5)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests before the first level (each side)")
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--model", choices=["real", "tiny"], default="real",
                   help="tiny: a 2-layer random-weight model whose forwards take a few ms, for iterating on the "
                        "platform's own time (its TTFT comparison with the engine alone means little)")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has native bf16 units, else float32")
    p.add_argument("--prefill-core", type=int, default=0)
    p.add_argument("--decode-core", type=int, default=1)
    p.add_argument("--decode-slots", type=int, default=64, help="the decode engine's batch slots (TANDEM_MAX_BATCH)")
    p.add_argument("--target-ms", type=float, default=20.0, help="TTFT overhead target at p50, one client")
    p.add_argument("--profile", choices=["auto", "always", "never"], default="always",
                   help="the profiling pass under Redis MONITOR: always (default), only when the overhead misses "
                        "the target (auto), or never")
    p.add_argument("--profile-requests", type=int, default=8)
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private one)")
    p.add_argument("--db-url", default=None,
                   help="use this database (default: a new SQLite file under var/bench/); 'postgres' makes a "
                        "throwaway database on 127.0.0.1:5432 and drops it afterwards")
    p.add_argument("--conn-max-age", type=int, default=None,
                   help="DB_CONN_MAX_AGE for the platform's processes (default: the settings' default, 60)")
    p.add_argument("--kv-url", default=None,
                   help="TANDEM_KV_URL for the model workers, e.g. shm:///dev/shm/tandem-bench-kv "
                        "(default: the settings' default, Redis)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the platform's processes (repeatable), e.g. "
                        "TANDEM_TENANT_REFRESH_S=30")
    p.add_argument("--out", default="var/bench/e2e.json")
    args = p.parse_args(argv)
    args.dtype = common.concrete_dtype(args.dtype)
    return args


def platform_env(args) -> dict:
    # DEBUG off, as deployed (no per-query logging in the web tier and the workers).
    env = {"DEBUG": "0"}
    if args.conn_max_age is not None:
        env["DB_CONN_MAX_AGE"] = str(args.conn_max_age)
    if args.kv_url:
        env["TANDEM_KV_URL"] = args.kv_url
    env.update(item.split("=", 1) for item in args.env)
    return env


def requests_for(clients: int, override: int | None) -> int:
    if override is not None:
        return override
    return 16 if clients == 1 else max(2, math.ceil(12 / clients))


# -- the engine alone ------------------------------------------------------------------------


class EngineAlone:
    """The engine in this process, as the workers run it minus everything around it: the
    prefill worker's batcher (PrefillBatcher over a PrefillEngine: prompts that arrive
    together share a forward) on one core, a DecodeEngine (continuous batching) on
    another, the prompt's KV handed over in memory instead of through the KV store."""

    def __init__(self, *, model_dir, dtype: str, prefill_core: int, decode_core: int, decode_slots: int,
                 max_context: int):
        from inference.engine.config import EngineConfig
        from inference.engine.decode import DecodeEngine
        from inference.engine.loader import load_model
        from inference.worker.prefill_batcher import PrefillBatcher

        # One torch thread, as the workers run (TANDEM_THREADS=1): each engine thread then
        # computes on itself, so pinning the thread pins its compute.
        self.config = EngineConfig(model=str(model_dir), dtype=dtype, num_threads=1, cpu_affinity=None,
                                   max_batch=decode_slots, max_context=max_context)
        self.model = load_model(self.config)
        self.batcher = PrefillBatcher(self.model, self.config)
        self.decode = DecodeEngine(self.model, self.config)
        for thread, core in ((self.batcher._thread, prefill_core), (self.decode._thread, decode_core)):
            os.sched_setaffinity(thread.native_id, {core})

    def ask(self, trace: Trace, ids: list[int], *, max_tokens: int, salt: str) -> Trace:
        from inference.engine.decode import DecodeRequest
        from inference.engine.prefill import PrefillRequest
        from inference.engine.sampling import SamplingParams

        # What inference.pipeline.prefill.sampling_params makes of the websocket's defaults.
        params = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, seed=None, max_tokens=max_tokens)
        rid = f"bench-{uuid.uuid4()}"
        trace.message_id = rid
        trace.t_send = time.time()
        res = self.batcher.submit(PrefillRequest(request_id=rid, token_ids=ids, sampling=params,
                                                 cache_salt=salt)).result(timeout=120)
        now = time.time()
        if res.finish_reason == "stop":
            trace.t_end = now
            return trace
        trace.t_first = now
        trace.token_times.append(now)
        if res.finish_reason is None:
            handle = self.decode.submit(DecodeRequest(
                request_id=rid, prompt_token_ids=ids, first_token=res.first_token, kv=res.kv, sampling=params,
                group=salt, group_max_slots=None))
            for _ in handle.events(timeout=120):
                trace.token_times.append(time.time())
        trace.n_tokens = len(trace.token_times)
        trace.t_end = time.time()
        return trace

    def closed_loop(self, *, clients: int, requests_per_client: int, next_prompt, ids_for, max_tokens: int,
                    salt: str, on_trace=None) -> list[Trace]:
        traces: list[Trace] = []
        lock = threading.Lock()
        barrier = threading.Barrier(clients)

        def run(i: int) -> None:
            barrier.wait()
            for k in range(requests_per_client):
                n = next_prompt()
                tr = self.ask(Trace(client=i, seq=k, prompt_n=n, tenant="engine"), ids_for(n),
                              max_tokens=max_tokens, salt=salt)
                with lock:
                    traces.append(tr)
                if on_trace:
                    on_trace(tr)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return traces

    def shutdown(self) -> None:
        self.decode.shutdown()
        self.batcher.shutdown()


# -- summaries -------------------------------------------------------------------------------


def summarize_run(traces: list[Trace]) -> dict:
    ok = [t for t in traces if t.ok]
    tokens = sum(len(t.token_times) for t in ok)
    span = busy_span([(t.t_send, t.t_end or t.token_times[-1]) for t in ok])
    return {
        "requests": len(traces),
        "errors": sorted({t.error for t in traces if t.error}),
        "error_count": sum(1 for t in traces if not t.ok),
        "ttft_ms": summarize(t.ttft_ms for t in ok),
        "itl_ms": summarize(g for t in ok for g in t.itl_ms),
        "itl_first_ms": summarize(t.itl_ms[0] for t in ok if t.itl_ms),  # token 0 -> 1: the KV handoff
        "tpot_ms": summarize(t.tpot_ms for t in ok),
        "e2e_tps": summarize(t.e2e_tps for t in ok),
        "output_tokens_mean": statistics.fmean(len(t.token_times) for t in ok) if ok else None,
        "aggregate_tps": tokens / span if span > 0 else None,
        "wall_s": span,
    }


def busy_span(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one request (at one client the engine and platform
    requests alternate: each side's throughput counts only its own time)."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def row(label: str, clients: int, s: dict) -> list:
    return [label, clients, s["requests"] - s["error_count"], s["ttft_ms"]["p50"], s["ttft_ms"]["p90"],
            s["ttft_ms"]["p99"], s["itl_ms"]["p50"], s["itl_ms"]["p99"], s["itl_first_ms"]["p50"],
            s["tpot_ms"]["p50"], s["e2e_tps"]["p50"], s["aggregate_tps"], s["output_tokens_mean"]]


HEADERS = ["mode", "clients", "ok", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "ITL p99", "ITL 0->1 p50",
           "TPOT p50", "tok/s/req p50", "tok/s total", "out tok"]


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    result = common.start_run("e2e", argv)

    model_dir = common.MODEL_DIR
    if args.model == "tiny":
        from inference.engine.tiny import build_tiny_model

        model_dir = build_tiny_model(common.BASE_DIR / "var" / "models" / "tiny-bench")
        say(f"model: the tiny random-weight model ({model_dir}): the platform's own time only")
    with common.bench_site("e2e", redis_url=args.redis_url, db_url=args.db_url, model_dir=model_dir) as site:
        import redis
        from django.conf import settings

        from inference.text.tokenizer import get_tokenizer

        tenant = common.make_tenant("bench-e2e", quota={
            "requests_per_minute": 100_000, "tokens_per_minute": 100_000_000, "max_concurrent_streams": 1000,
            "daily_token_budget": 10**12, "max_output_tokens": args.max_output_tokens,
        })
        tok = get_tokenizer()
        max_context = settings.TANDEM_MAX_CONTEXT
        ids_cache: dict[int, list[int]] = {}

        def ids_for(n: int) -> list[int]:
            if n not in ids_cache:
                ids_cache[n] = common.prompt_ids(tok, tenant, common.prompt_text(n), max_context=max_context)
            return ids_cache[n]

        lengths = [len(ids_for(n)) for n in range(len(common.QUESTIONS))]
        say(f"prompts: {min(lengths)}-{max(lengths)} tokens with the system prompt; "
            f"{args.max_output_tokens} output tokens max")
        result["config"] = {
            "levels": levels, "model": str(site.model_dir), "max_output_tokens": args.max_output_tokens, "dtype": args.dtype,
            "prefill_core": args.prefill_core, "decode_core": args.decode_core, "decode_slots": args.decode_slots,
            "prompt_tokens": {"min": min(lengths), "max": max(lengths)}, "db_url": site.db_url,
            "redis_url": site.redis_url, "run_dir": str(site.run_dir),
            "platform_env": platform_env(args),
        }

        say(f"loading the engine in-process ({args.dtype}, prefill on core {args.prefill_core}, "
            f"decode on core {args.decode_core})")
        engine = EngineAlone(model_dir=site.model_dir, dtype=args.dtype, prefill_core=args.prefill_core, decode_core=args.decode_core,
                             decode_slots=args.decode_slots, max_context=max_context)
        salt = f"tenant:{tenant.tenant_id}"  # what the CPU tier sets: same prefix-cache namespace
        model_env = dict(dtype=args.dtype)
        workers = [
            ("cpu", "shared", {"CONCURRENCY": "1"}),
            ("prefill", "shared", common.model_worker_env(core=args.prefill_core, concurrency=8, **model_env)),
            ("decode", "shared", common.model_worker_env(core=args.decode_core, concurrency=args.decode_slots,
                                                         TANDEM_MAX_BATCH=args.decode_slots, **model_env)),
        ]
        counter = Counter(0)
        try:
            with common.platform_up(site, workers, extra_env=platform_env(args)) as plat:
                client = redis.Redis.from_url(site.redis_url)
                ws_url, key = plat.ws_url, tenant.widget_key

                say(f"warm-up: {args.warmup} requests each")
                engine.closed_loop(clients=1, requests_per_client=args.warmup, next_prompt=counter, ids_for=ids_for,
                                   max_tokens=args.max_output_tokens, salt=salt)
                warm = common.closed_loop(ws_url, key, clients=1, requests_per_client=args.warmup,
                                          next_prompt=counter)
                if not all(t.ok for t in warm):
                    raise RuntimeError(f"warm-up failed: {[t.error for t in warm]}")

                result["levels"] = []
                for n_clients in levels:
                    per_client = requests_for(n_clients, args.rounds)
                    total = n_clients * per_client
                    start = counter.reserve(total)  # prompt numbers both sides use, in the same order
                    level = {"clients": n_clients, "requests_per_client": per_client}

                    # Round by round, the engine alone and then the platform: both sides see
                    # the same background load (the machine is shared), and in each round the N
                    # clients send one request each at the same moment on both sides.
                    say(f"level c={n_clients}: {per_client} rounds of {n_clients} requests, engine alone "
                        f"and platform alternating")
                    e_traces, p_traces = alternate(engine, ws_url, key, clients=n_clients, rounds=per_client,
                                                   first_prompt=start, ids_for=ids_for,
                                                   max_tokens=args.max_output_tokens, salt=salt,
                                                   settle_s=args.settle)
                    common.fill_stages(client, p_traces)
                    mismatched = [t.prompt_n for t in p_traces
                                  if t.stages.get("prompt_ids") not in (None, ids_for(t.prompt_n))]
                    for t in p_traces:
                        t.stages.pop("prompt_ids", None)
                    level.update(engine=summarize_run(e_traces), platform=summarize_run(p_traces),
                                 platform_stages=common.stage_summary(p_traces),
                                 prompt_ids_match=not mismatched, prompt_ids_mismatched=mismatched,
                                 traces={"engine": [t.to_json() for t in e_traces],
                                         "platform": [t.to_json() for t in p_traces]})
                    result["levels"].append(level)
                    print(table(HEADERS, [row("engine", n_clients, level["engine"]),
                                          row("platform", n_clients, level["platform"])]), flush=True)

                overhead = overhead_at_one(result["levels"], args.target_ms)
                result["overhead"] = overhead
                if overhead:
                    say(f"TTFT overhead at one client, p50: {common.fmt(overhead['p50_diff_ms'])} ms "
                        f"(target <= {args.target_ms} ms): {'met' if overhead['met'] else 'NOT met'}")
                if args.profile == "always" or (args.profile == "auto" and overhead and not overhead["met"]):
                    result["profile"] = profile_pass(site, ws_url, key, counter, args.profile_requests,
                                                     engine_ttft_p50=overhead and overhead["engine_p50_ms"])
                    if overhead:
                        acc = result["profile"]["outside_pf_task_ms"]["p50"]
                        overhead.update(accounted_p50_ms=acc, accounted_met=acc is not None and acc <= args.target_ms)
        finally:
            engine.shutdown()

    report(result, args)
    path = common.write_json(args.out, result)
    say(f"wrote {path}")


def alternate(engine: EngineAlone, ws_url: str, key: str, *, clients: int, rounds: int, first_prompt: int,
              ids_for, max_tokens: int, salt: str, settle_s: float) -> tuple[list[Trace], list[Trace]]:
    """`rounds` rounds; in each, `clients` requests at once on the engine alone, then the
    same prompts at once on the platform (one websocket per client, kept open)."""
    e_traces, p_traces = [], []
    chats = [common.ChatClient(ws_url, key) for _ in range(clients)]

    def at_once(fn) -> list[Trace]:
        out: list[Trace | None] = [None] * clients
        barrier = threading.Barrier(clients)

        def run(i: int) -> None:
            barrier.wait()
            out[i] = fn(i)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [t for t in out if t is not None]

    try:
        for r in range(rounds):
            base = first_prompt + r * clients

            def on_engine(i: int, r=r, base=base) -> Trace:
                return engine.ask(Trace(client=i, seq=r, prompt_n=base + i, tenant="engine"), ids_for(base + i),
                                  max_tokens=max_tokens, salt=salt)

            def on_platform(i: int, r=r, base=base) -> Trace:
                return chats[i].ask(Trace(client=i, seq=r, prompt_n=base + i), common.prompt_text(base + i))

            # Which side goes first alternates (A B B A ...), and each side starts after a
            # pause: neither starts while the other's stragglers (the platform's end of a
            # reply: usage rows, quota reconcile, acks) still run.
            if r % 2 == 0:
                e = at_once(on_engine)
                time.sleep(settle_s)
                p = at_once(on_platform)
            else:
                p = at_once(on_platform)
                time.sleep(settle_s)
                e = at_once(on_engine)
            time.sleep(settle_s)
            e_traces += e
            p_traces += p
            errors = sorted({t.error for t in p if t.error})
            say(f"  c={clients} round {r + 1}/{rounds}: TTFT p50 engine "
                f"{common.fmt(common.percentile([t.ttft_ms for t in e if t.ok], 50))} ms, platform "
                f"{common.fmt(common.percentile([t.ttft_ms for t in p if t.ok], 50))} ms"
                + (f"; platform errors {errors}" if errors else ""))
    finally:
        for c in chats:
            c.close()
    return e_traces, p_traces


def overhead_at_one(levels: list[dict], target_ms: float) -> dict | None:
    one = next((lv for lv in levels if lv["clients"] == 1), None)
    if one is None:
        return None
    e, p = one["engine"]["ttft_ms"]["p50"], one["platform"]["ttft_ms"]["p50"]
    if e is None or p is None:
        return None
    by_prompt = {t["prompt_n"]: t["ttft_ms"] for t in one["traces"]["engine"] if t["ttft_ms"] is not None}
    paired = [t["ttft_ms"] - by_prompt[t["prompt_n"]] for t in one["traces"]["platform"]
              if t["ttft_ms"] is not None and t["prompt_n"] in by_prompt]
    # The platform's own time per request (its TTFT minus its prefill engine's share):
    # unlike the difference above, it does not depend on how fast each side's forward
    # happened to run (on a VM, a forward that starts on an idle CPU runs tens of ms slower
    # than one that follows the platform's own tiers' work).
    own = one["platform_stages"].get("outside_engine", {}).get("p50")
    return {"engine_p50_ms": e, "platform_p50_ms": p, "p50_diff_ms": p - e,
            "paired_median_diff_ms": statistics.median(paired) if paired else None,
            "outside_engine_p50_ms": own, "outside_engine_met": own is not None and own <= target_ms,
            "target_ms": target_ms, "met": (p - e) <= target_ms}


def profile_pass(site, ws_url: str, key: str, counter: Counter, n: int, *, engine_ttft_p50) -> dict:
    """One client, `n` requests in a row, under Redis MONITOR: where each TTFT went."""
    say(f"profiling: {n} requests, one at a time, under Redis MONITOR")
    with common.monitored(site.redis_url) as lines:
        traces = common.closed_loop(ws_url, key, clients=1, requests_per_client=n, next_prompt=counter)
    prof = common.monitor_profile(lines, traces)
    # Everything but the prefill task body (which is the engine's forward plus ~1 ms of
    # spec read, batcher hand-off and detokenizing): the platform's own cost, per request.
    outside = [sum(v for k, v in r["stages_ms"].items() if k not in common.MONITOR_UNCOUNTED and v is not None)
               for r in prof["per_request"] if all(v is not None for v in r["stages_ms"].values())]
    return {**prof, "outside_pf_task_ms": summarize(outside), "engine_alone_ttft_p50_ms": engine_ttft_p50}


def report(result: dict, args) -> None:
    print()
    print("## Platform vs engine alone (times in ms; tok/s = output tokens per second)")
    print()
    rows = []
    for lv in result.get("levels", []):
        rows += [row("engine", lv["clients"], lv["engine"]), row("platform", lv["clients"], lv["platform"])]
    print(table(HEADERS, rows))
    print()
    print("## Platform TTFT by stage, p50 (ms), from the marks each request left in Redis")
    print()
    srows = []
    for lv in result.get("levels", []):
        st = lv["platform_stages"]
        srows.append([lv["clients"], lv["platform"]["ttft_ms"]["p50"], st["web"]["p50"], st["cpu"]["p50"],
                      st["prefill"]["p50"], st["deliver"]["p50"], st["engine"]["p50"], st["outside_engine"]["p50"],
                      lv["engine"]["ttft_ms"]["p50"]])
    print(table(["clients", "TTFT", "web", "cpu tier", "prefill tier", "deliver", "its prefill engine",
                 "TTFT - its engine", "engine-alone TTFT"], srows))
    ov = result.get("overhead")
    if ov:
        print()
        print(f"TTFT overhead, one client, p50: platform {ov['platform_p50_ms']:.1f} ms - engine "
              f"{ov['engine_p50_ms']:.1f} ms = {ov['p50_diff_ms']:.1f} ms (median of per-prompt differences "
              f"{common.fmt(ov['paired_median_diff_ms'])} ms); target <= {ov['target_ms']:.0f} ms: "
              f"{'MET' if ov['met'] else 'NOT MET'}")
        if ov.get("outside_engine_p50_ms") is not None:
            print(f"The platform's own time (each request's TTFT minus its prefill engine's share, p50): "
                  f"{ov['outside_engine_p50_ms']:.1f} ms: {'MET' if ov['outside_engine_met'] else 'NOT MET'}")
        if ov.get("accounted_p50_ms") is not None:
            print(f"Accounted from the MONITOR profile (every stage but the prefill task body, per request, "
                  f"p50): {ov['accounted_p50_ms']:.1f} ms: {'MET' if ov['accounted_met'] else 'NOT MET'}")
    prof = result.get("profile")
    if prof:
        print()
        print(f"## Profile under Redis MONITOR: one client, {prof['requests']} requests (ms)")
        print()
        prow = [[name, prof["stages"][name]["p50"], prof["stages"][name]["p90"], what]
                for name, _, _, what in common.MONITOR_STAGES]
        prow.append(["TTFT", prof["ttft_ms"]["p50"], prof["ttft_ms"]["p90"], "client send -> first token frame"])
        print(table(["stage", "p50", "p90", "what"], prow))
        out = prof["outside_pf_task_ms"]
        print(f"\nEverything but the prefill task body, per request: p50 {common.fmt(out['p50'])} ms, "
              f"p90 {common.fmt(out['p90'])} ms (engine alone, same prompts, earlier: TTFT p50 "
              f"{common.fmt(prof['engine_alone_ttft_p50_ms'])} ms)")
    mism = [lv["clients"] for lv in result.get("levels", []) if not lv["prompt_ids_match"]]
    if mism:
        print(f"\nWARNING: the platform's prompt ids differed from the engine run's at levels {mism}")
