"""`python -m benchmarks e2e`: the running platform over websockets beside the engine
alone, on the same prompt token ids at the same concurrency.

Starts a throwaway platform (its own Redis and SQLite file under var/bench/): daphne, a
CPU worker, a prefill worker pinned to one core and a decode worker pinned to another,
serving the real SmolLM2-135M-Instruct (or --model tiny) in the dtype the workers pick.
Loads the same engine in this process too (the prefill worker's batcher over a
PrefillEngine on the first core, a DecodeEngine on the second; the KV handed over in
memory). Then, for each concurrency N, in rounds:
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
import time

from ..quick import add_quick_options, parse_quick
from ..report import fmt, say, table, write_json
from ..stack import site as platform_site
from ..stack.chat_client import ChatClient, chat_loop, closed_loop, together
from ..stack.monitor import MONITOR_UNCOUNTED, profiled
from ..stack.prompts import QUESTIONS, Counter, prompt_ids, prompt_text
from ..stack.stages import fill_stages, stage_summary
from ..stack.tenancy import make_tenant
from ..stats import percentile, summarize
from ..traces import Trace, summarize_traces
from .engine_alone import EngineAlone, widget_sampling
from .report import HEADERS, overhead_at_one, report, row

DEFAULT_OUT = "var/bench/e2e.json"
# --quick: the tiny model, two levels of two rounds, short replies, a short MONITOR pass.
QUICK = {"model": "tiny", "clients": "1,2", "rounds": 2, "warmup": 1, "settle": 0.1, "max_output_tokens": 8,
         "profile": "always", "profile_requests": 2, "decode_slots": 8}


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
    p.add_argument("--target-ms", type=float, default=20.0, help="TTFT overhead target at p50, one client")
    p.add_argument("--profile", choices=["auto", "always", "never"], default="always",
                   help="the profiling pass under Redis MONITOR: always (default), only when the overhead misses "
                        "the target (auto), or never")
    p.add_argument("--profile-requests", type=int, default=8)
    p.add_argument("--kv-url", default=None,
                   help="TANDEM_KV_URL for the model workers, e.g. shm:///dev/shm/tandem-bench-kv "
                        "(default: the settings' default, Redis)")
    platform_site.add_site_options(p)
    add_quick_options(p, default_out=DEFAULT_OUT)
    return parse_quick(p, argv, name="e2e", default_out=DEFAULT_OUT, quick_defaults=QUICK, parse=platform_site.parse)


def requests_for(clients: int, override: int | None) -> int:
    if override is not None:
        return override
    return 16 if clients == 1 else max(2, math.ceil(12 / clients))


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    result = platform_site.start_run("e2e", argv, quick=args.quick)
    kv_env = {"TANDEM_KV_URL": args.kv_url} if args.kv_url else {}
    with platform_site.bench_site("e2e", args) as site:
        from django.conf import settings

        from inference.text.tokenizer import get_tokenizer

        tenant = make_tenant("bench-e2e", quota={
            "requests_per_minute": 100_000, "tokens_per_minute": 100_000_000, "max_concurrent_streams": 1000,
            "daily_token_budget": 10**12, "max_output_tokens": args.max_output_tokens,
        }, allocation=platform_site.whole_pool(args))
        say(f"loading the engine in-process ({args.dtype}, prefill on core {args.prefill_core}, "
            f"decode on core {args.decode_core})")
        max_context = settings.TANDEM_MAX_CONTEXT
        engine = EngineAlone(model_dir=site.model_dir, dtype=args.dtype, prefill_core=args.prefill_core,
                             decode_core=args.decode_core, decode_slots=args.decode_slots, max_context=max_context)
        side = Sides(engine, tenant, get_tokenizer(), max_context=max_context, max_tokens=args.max_output_tokens)
        lengths = [len(side.ids_for(n)) for n in range(len(QUESTIONS))]
        say(f"prompts: {min(lengths)}-{max(lengths)} tokens with the system prompt; "
            f"{args.max_output_tokens} output tokens max")
        result["config"] = {
            "levels": levels, "model": str(site.model_dir), "max_output_tokens": args.max_output_tokens,
            "dtype": args.dtype, "prefill_core": args.prefill_core, "decode_core": args.decode_core,
            "decode_slots": args.decode_slots, "prompt_tokens": {"min": min(lengths), "max": max(lengths)},
            "db_url": site.db_url, "redis_url": site.redis_url, "run_dir": str(site.run_dir),
            "platform_env": platform_site.platform_env(args, **kv_env),
        }
        try:
            with platform_site.platform_up(site, args, **kv_env) as plat:
                side.ws_url, side.key = plat.ws_url, tenant.widget_key
                measure(args, site, side, levels, result)
        finally:
            engine.shutdown()
    report(result, args)
    say(f"wrote {write_json(args.out, result)}")


class Sides:
    """The two sides of the comparison, asked the same prompt numbers: the engine alone
    (on the prompt ids the CPU tier builds) and the platform (over a websocket)."""

    def __init__(self, engine: EngineAlone, tenant, tokenizer, *, max_context: int, max_tokens: int):
        self.engine, self.tenant, self.tokenizer = engine, tenant, tokenizer
        self.max_context, self.max_tokens = max_context, max_tokens
        self.salt = f"tenant:{tenant.tenant_id}"  # the CPU tier's: the same prefix-cache namespace
        self.ws_url = self.key = ""
        self.counter = Counter(0)
        self._ids: dict[int, list[int]] = {}
        self.sampling = widget_sampling(tenant_id=tenant.tenant_id, max_tokens=max_tokens)

    def ids_for(self, n: int) -> list[int]:
        if n not in self._ids:
            self._ids[n] = prompt_ids(self.tokenizer, self.tenant, prompt_text(n), max_context=self.max_context)
        return self._ids[n]

    def engine_ask(self, trace: Trace) -> Trace:
        trace.tenant = "engine"
        return self.engine.ask(trace, self.ids_for(trace.prompt_n), max_tokens=self.max_tokens, salt=self.salt,
                               sampling=self.sampling)


def measure(args: argparse.Namespace, site, side: Sides, levels: list[int], result: dict) -> None:
    from inference.wire.connections import new_redis

    client = new_redis()
    say(f"warm-up: {args.warmup} requests each")
    closed_loop(lambda i, tr: side.engine_ask(tr), clients=1, requests_per_client=args.warmup,
                next_prompt=side.counter)
    warm = chat_loop(side.ws_url, side.key, clients=1, requests_per_client=args.warmup, next_prompt=side.counter)
    if not all(t.ok for t in warm):
        raise RuntimeError(f"warm-up failed: {[t.error for t in warm]}")
    result["levels"] = []
    for n_clients in levels:
        per_client = requests_for(n_clients, args.rounds)
        # Prompt numbers both sides use, in the same order.
        first = side.counter.reserve(n_clients * per_client)
        say(f"level c={n_clients}: {per_client} rounds of {n_clients} requests, engine alone and platform "
            f"alternating")
        e_traces, p_traces = alternate(side, clients=n_clients, rounds=per_client, first_prompt=first,
                                       settle_s=args.settle)
        mismatched = fill_stages(client, p_traces, side.ids_for)
        level = {"clients": n_clients, "requests_per_client": per_client,
                 "engine": summarize_traces(e_traces), "platform": summarize_traces(p_traces),
                 "platform_stages": stage_summary(p_traces), "prompt_ids_match": not mismatched,
                 "prompt_ids_mismatched": mismatched,
                 "traces": {"engine": [t.to_json() for t in e_traces], "platform": [t.to_json() for t in p_traces]}}
        result["levels"].append(level)
        print(table(HEADERS, [row("engine", n_clients, level["engine"]),
                              row("platform", n_clients, level["platform"])]), flush=True)
    overhead = result["overhead"] = overhead_at_one(result["levels"], args.target_ms)
    if overhead:
        say(f"TTFT overhead at one client, p50: {fmt(overhead['p50_diff_ms'])} ms "
            f"(target <= {args.target_ms} ms): {'met' if overhead['met'] else 'NOT met'}")
    if args.profile == "always" or (args.profile == "auto" and overhead and not overhead["met"]):
        result["profile"] = profile_pass(site, side, args.profile_requests,
                                         engine_ttft_p50=overhead and overhead["engine_p50_ms"])
        if overhead:
            acc = result["profile"]["outside_pf_task_ms"]["p50"]
            overhead.update(accounted_p50_ms=acc, accounted_met=acc is not None and acc <= args.target_ms)


def alternate(side: Sides, *, clients: int, rounds: int, first_prompt: int,
              settle_s: float) -> tuple[list[Trace], list[Trace]]:
    """`rounds` rounds; in each, `clients` requests at once on the engine alone, then the
    same prompts at once on the platform (one websocket per client, kept open). Both
    sides then see the same background load when the machine is shared."""
    e_traces, p_traces = [], []
    chats = [ChatClient(side.ws_url, side.key) for _ in range(clients)]
    try:
        for r in range(rounds):
            base = first_prompt + r * clients

            def on_engine(i: int, r=r, base=base) -> Trace:
                return side.engine_ask(Trace(client=i, seq=r, prompt_n=base + i))

            def on_platform(i: int, r=r, base=base) -> Trace:
                return chats[i].ask(Trace(client=i, seq=r, prompt_n=base + i))

            # Which side goes first alternates (A B B A ...), and each side starts after a
            # pause: neither starts while the other's stragglers (the platform's end of a
            # reply: usage rows, quota reconcile, acks) still run.
            if r % 2 == 0:
                e = together(clients, on_engine)
                time.sleep(settle_s)
                p = together(clients, on_platform)
            else:
                p = together(clients, on_platform)
                time.sleep(settle_s)
                e = together(clients, on_engine)
            time.sleep(settle_s)
            e_traces += e
            p_traces += p
            errors = sorted({t.error for t in p if t.error})
            say(f"  c={clients} round {r + 1}/{rounds}: TTFT p50 engine "
                f"{fmt(percentile([t.ttft_ms for t in e if t.ok], 50))} ms, platform "
                f"{fmt(percentile([t.ttft_ms for t in p if t.ok], 50))} ms"
                + (f"; platform errors {errors}" if errors else ""))
    finally:
        for c in chats:
            c.close()
    return e_traces, p_traces


def profile_pass(site, side: Sides, n: int, *, engine_ttft_p50) -> dict:
    """One client, `n` requests in a row, under Redis MONITOR: where each TTFT went."""
    say(f"profiling: {n} requests, one at a time, under Redis MONITOR")
    prof = profiled(site.redis_url, lambda: chat_loop(side.ws_url, side.key, clients=1, requests_per_client=n,
                                                      next_prompt=side.counter))
    # Everything but the prefill task body (the engine's forward, with the spec read, the
    # batcher hand-off and detokenizing): the platform's own cost, per request.
    outside = [sum(v for k, v in r["stages_ms"].items() if k not in MONITOR_UNCOUNTED and v is not None)
               for r in prof["per_request"] if all(v is not None for v in r["stages_ms"].values())]
    return {**prof, "outside_pf_task_ms": summarize(outside), "engine_alone_ttft_p50_ms": engine_ttft_p50}
