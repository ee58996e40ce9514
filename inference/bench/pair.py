"""`python -m inference.bench pair --other PATH`: this checkout's platform against another
checkout's (a git worktree at an earlier commit, say), request by request.

Why: on a small VM the machine's speed drifts by tens of percent from one minute to the
next, so two e2e runs made minutes apart cannot resolve a change of a few ms. Here both
platforms run at once, each with its own Redis and its own copy of the same SQLite
database and tenant (daphne, a CPU worker, a prefill worker on core 0 and a decode worker
on core 1 each; the idle one only sends heartbeats). One websocket client per platform
sends the same prompt to each in turn, which one goes first alternating, after a pause
(--settle), so both see the same machine state. The other checkout runs its own code
with this one's Python environment (its processes start in its directory).

Per side: TTFT, the stages from the marks in Redis (see common.stage_times) and, where
the checkout reports its prefill engine's share of the TTFT, the platform's own time;
and the median of the per-prompt TTFT differences.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from . import common
from .common import Trace, say


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m inference.bench pair", description=__doc__.split("\n\n")[0])
    p.add_argument("--other", required=True, help="the other checkout's directory (e.g. a git worktree)")
    p.add_argument("--rounds", type=int, default=24, help="prompts, each sent to both platforms")
    p.add_argument("--settle", type=float, default=0.5, help="seconds of pause before each request")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests per platform first")
    p.add_argument("--out", default="var/bench/pair.json")
    return p.parse_args(argv)


STAGES = ("web", "cpu", "prefill", "deliver", "engine", "outside_engine")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    other_dir = Path(args.other).resolve()
    result = common.start_run("pair", argv)
    result["other"] = {"dir": str(other_dir), "git": common.git_state(other_dir)}
    with common.bench_site("pair") as site:
        import redis
        from django.db import connection, connections

        from tandem import embedded_redis, processes

        tenant = common.make_tenant("bench-pair", quota={
            "requests_per_minute": 100_000, "tokens_per_minute": 100_000_000, "max_concurrent_streams": 1000,
            "daily_token_budget": 10**12, "max_output_tokens": 64})
        # The other platform gets a copy of this database, tenant and keys included.
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connections.close_all()
        other_db = site.run_dir / "other.sqlite3"
        shutil.copy(site.run_dir / "bench.sqlite3", other_db)
        port = common.free_port()
        other_redis_proc = embedded_redis.start(port=port, workdir=site.run_dir / "redis-other")
        other_redis = f"redis://127.0.0.1:{port}/0"
        workers = [
            ("cpu", "shared", {"CONCURRENCY": "2"}),
            ("prefill", "shared", common.model_worker_env(core=0, concurrency=8, dtype="bfloat16")),
            ("decode", "shared", common.model_worker_env(core=1, concurrency=64, TANDEM_MAX_BATCH=64,
                                                         dtype="bfloat16")),
        ]
        env, model = {"DEBUG": "0"}, str(common.MODEL_DIR)
        try:
            with processes.running_platform(db_url=site.db_url, model_dir=model, workers=workers, extra_env=env,
                                            log_dir=site.run_dir / "logs-this") as this:
                this_dir, processes.BASE_DIR = processes.BASE_DIR, other_dir  # where its processes start
                try:
                    other_cm = processes.running_platform(
                        db_url=f"sqlite:///{other_db}", model_dir=model, workers=workers,
                        extra_env={**env, "REDIS_URL": other_redis}, log_dir=site.run_dir / "logs-other")
                    other = other_cm.__enter__()
                finally:
                    processes.BASE_DIR = this_dir
                try:
                    sides = {"this": (this, redis.Redis.from_url(site.redis_url)),
                             "other": (other, redis.Redis.from_url(other_redis))}
                    traces = run_rounds(sides, tenant.widget_key, args)
                finally:
                    other_cm.__exit__(None, None, None)
        finally:
            if other_redis_proc is not None:
                other_redis_proc.terminate()

    summary = {k: {"ttft": common.summarize(t.ttft_ms for t in ts if t.ok),
                   **{s: common.summarize(t.stages.get(f"{s}_ms") for t in ts if t.ok) for s in STAGES}}
               for k, ts in traces.items()}
    by_prompt = {t.prompt_n: t for t in traces["other"] if t.ok}
    paired = [t.ttft_ms - by_prompt[t.prompt_n].ttft_ms for t in traces["this"] if t.ok and t.prompt_n in by_prompt]
    result.update(summary=summary, paired_ttft_this_minus_other=common.summarize(paired),
                  traces={k: [t.to_json() for t in v] for k, v in traces.items()})
    print(common.table(
        ["side", "ok", "TTFT p50", "TTFT p90", "web", "cpu tier", "prefill tier", "deliver", "its prefill engine",
         "TTFT - its engine"],
        [[k, s["ttft"]["n"], s["ttft"]["p50"], s["ttft"]["p90"], s["web"]["p50"], s["cpu"]["p50"],
          s["prefill"]["p50"], s["deliver"]["p50"], s["engine"]["p50"], s["outside_engine"]["p50"]]
         for k, s in summary.items()]))
    print(f"\nTTFT, this minus other, median of the per-prompt differences: "
          f"{common.fmt(statistics.median(paired) if paired else None)} ms")
    say(f"wrote {common.write_json(args.out, result)}")


def run_rounds(sides: dict, key: str, args) -> dict[str, list[Trace]]:
    chats = {k: common.ChatClient(p.ws_url, key) for k, (p, _) in sides.items()}
    try:
        for chat in chats.values():
            for i in range(args.warmup):
                chat.ask(Trace(client=0, seq=i, prompt_n=10_000 + i), common.prompt_text(10_000 + i))
        traces: dict[str, list[Trace]] = {k: [] for k in sides}
        for r in range(args.rounds):
            for k in (["this", "other"] if r % 2 == 0 else ["other", "this"]):
                time.sleep(args.settle)
                traces[k].append(chats[k].ask(Trace(client=0, seq=r, prompt_n=r, tenant=k), common.prompt_text(r)))
            say(f"round {r + 1}/{args.rounds}: TTFT this {common.fmt(traces['this'][-1].ttft_ms)} ms, "
                f"other {common.fmt(traces['other'][-1].ttft_ms)} ms")
    finally:
        for chat in chats.values():
            chat.close()
    for k, (_, client) in sides.items():
        common.fill_stages(client, traces[k])
    return traces
