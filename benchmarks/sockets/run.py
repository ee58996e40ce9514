"""`python -m benchmarks sockets`: the web tier at scale, thousands of idle widget sockets
and visitors chatting beside them, against the engine alone on the same cores.

Starts a throwaway platform (its own Redis, database and logs under var/bench/, as e2e
does): the CPU, prefill and decode workers, and one daphne process for the one-process
phase plus two fresh ones for the two-process phase (each phase measures processes that
held no sockets before). Every simulated visitor comes from an address of its own
(X-Forwarded-For, believed from 127.0.0.1 with TANDEM_TRUSTED_PROXIES). For each phase:

- idle: N sockets (each level adds to the last), opened evenly over --burst-s; the web
  processes' RSS, CPU over --idle-cpu-s, Redis connections (CLIENT LIST) and open files;
- streaming: M visitors send one message each at the same moment while the idle sockets
  stay open; TTFT, inter-token gaps as the client sees them, streamed tok/s, beside the
  engine alone (benchmarks/e2e/engine_alone.py) asked the same prompts at the same
  concurrency just before, so both see the same background load;
- slow: --slow-among visitors, once all reading at full speed and once with one of them
  reading a frame a second; the others' inter-token gaps both times.

It raises its own and daphne's open-file limit to the hard limit, bounds every wait, and
stops everything it started. --quick is a smoke run of seconds on the tiny model.
"""

from __future__ import annotations

import argparse
import threading

from devstack.processes import raise_open_files_limit, running_platform

from ..e2e.engine_alone import widget_sampling
from ..quick import add_quick_options, parse_quick
from ..report import fmt, say, write_json
from ..stack import site as platform_site
from ..stack.chat_client import together
from ..stack.prompts import Counter, prompt_ids, prompt_text
from ..stack.tenancy import make_tenant
from ..stats import percentile
from ..traces import Trace, summarize_traces
from . import visitors as vis
from .cpu_share import CpuShare
from .idle import IdleSockets
from .report import report
from .webproc import WebProbe

# --quick: every code path in seconds, on the tiny model; its figures mean nothing.
QUICK = {"idle": "40", "chats": "1,4", "single_rounds": 2, "slow_among": 4, "max_output_tokens": 8, "idle_cpu_s": 0.5,
         "model": "tiny", "frame_every_s": 0.2, "warmup": 1, "decode_slots": 8, "slow_pairs": 1}
# Sockets opened beside the idle ones in each phase (chat visitors, the benchmark's own
# connections) that must fit under the open-file limit too.
FD_HEADROOM = 512


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks sockets", description=__doc__.split("\n\n")[0])
    p.add_argument("--idle", default="1000,5000,10000", help="idle socket counts, ascending (default 1000,5000,10000)")
    p.add_argument("--chats", default="1,32,64,128",
                   help="visitors chatting at once (default 1,32,64,128; 1 gives the TTFT overhead over the engine)")
    p.add_argument("--slow-among", type=int, default=64, help="clients in the slow-client test; 0 skips it")
    p.add_argument("--web-processes", default="1,2", help="phases: web processes each (default 1,2)")
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--burst-s", type=float, default=1.0, help="seconds over which a level's connects start")
    p.add_argument("--idle-cpu-s", type=float, default=10.0, help="window over which idle CPU is measured")
    p.add_argument("--frame-every-s", type=float, default=1.0, help="the slow client's pace")
    p.add_argument("--slow-pairs", type=int, default=2,
                   help="pairs of rounds without and with the slow client, alternated A B B A (default 2)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests each side before measuring")
    p.add_argument("--single-rounds", type=int, default=10,
                   help="requests in turn at the one-visitor level, for its TTFT (default 10)")
    p.add_argument("--no-engine", action="store_true", help="skip the engine-alone comparison")
    p.add_argument("--token-per-frame", dest="batch_frames", action="store_false",
                   help="chat clients speak the protocol without batch=1, one token a frame, as clients "
                        "older than token batching do (by default they ask for frames carrying several "
                        "tokens, as the widget does: docs/protocol.md)")
    platform_site.add_site_options(p)
    add_quick_options(p, default_out="var/bench/sockets.json")
    return parse_quick(p, argv, name="sockets", default_out="var/bench/sockets.json", quick_defaults=QUICK,
                       parse=platform_site.parse)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    idle_levels = sorted(int(x) for x in args.idle.split(",") if x.strip())
    chat_levels = [int(x) for x in args.chats.split(",") if x.strip()]
    phases = [int(x) for x in args.web_processes.split(",") if x.strip()]
    if (min(idle_levels + chat_levels + phases, default=1) < 1 or not phases or args.slow_among == 1
            or args.slow_pairs < 1):
        raise SystemExit("--idle, --chats, --web-processes and --slow-pairs take positive counts; "
                         "--slow-among 0 or 2+")
    limit = raise_open_files_limit()  # daphne, started below, inherits it
    need = max(idle_levels, default=0) + max(chat_levels, default=0) + args.slow_among + FD_HEADROOM
    if need > limit:
        raise SystemExit(f"{need} open files needed, the hard limit is {limit}: raise it (ulimit -Hn) or "
                         "ask for fewer sockets")
    result = platform_site.start_run("sockets", argv, quick=args.quick)
    with platform_site.bench_site("sockets", args) as site:
        tenant = make_tenant("bench-sockets", quota={
            "requests_per_minute": 1_000_000, "tokens_per_minute": 10**9, "max_concurrent_streams": 100_000,
            "daily_token_budget": 10**12, "max_output_tokens": args.max_output_tokens,
        }, allocation=platform_site.whole_pool(args))
        env = platform_site.platform_env(args, TANDEM_TRUSTED_PROXIES="127.0.0.1",
                                         TANDEM_WS_IDLE_TIMEOUT_S="86400")  # idle is what is measured
        result["config"] = {
            "idle": idle_levels, "chats": chat_levels, "slow_among": args.slow_among, "web_processes": phases,
            "max_output_tokens": args.max_output_tokens, "burst_s": args.burst_s, "idle_cpu_s": args.idle_cpu_s,
            "batch_frames": args.batch_frames,
            "model": str(site.model_dir), "dtype": args.dtype, "decode_slots": args.decode_slots,
            "open_files_limit": limit, "platform_env": env, "run_dir": str(site.run_dir),
        }
        engine = None if args.no_engine else _engine(args, site)
        try:
            workers = platform_site.model_workers(args)
            say(f"starting {sum(phases)} daphne + {', '.join(f'{r}.{p}' for r, p, _ in workers)} "
                f"(logs: {site.log_dir})")
            with running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=workers,
                                  extra_env=env, log_dir=site.log_dir, web_processes=sum(phases)) as plat:
                bench = Bench(args, site, plat, tenant, engine)
                bench.warm_up()
                result["phases"] = []
                first = 0
                for w in phases:
                    names = ["web" if i == 0 else f"web-{i + 1}" for i in range(first, first + w)]
                    first += w
                    result["phases"].append(bench.phase(names, idle_levels, chat_levels))
                say("stopping the platform")
        finally:
            if engine is not None:
                engine.shutdown()
    report(result)
    say(f"wrote {write_json(args.out, result)}")


def _engine(args, site):
    from django.conf import settings

    from ..e2e.engine_alone import EngineAlone

    say(f"loading the engine in-process ({args.dtype}, prefill on core {args.prefill_core}, "
        f"decode on core {args.decode_core})")
    return EngineAlone(model_dir=site.model_dir, dtype=args.dtype, prefill_core=args.prefill_core,
                       decode_core=args.decode_core, decode_slots=args.decode_slots,
                       max_context=settings.TANDEM_MAX_CONTEXT)


class Bench:
    def __init__(self, args, site, plat, tenant, engine):
        from django.conf import settings

        from inference.text.tokenizer import get_tokenizer

        self.args, self.site, self.plat, self.tenant, self.engine = args, site, plat, tenant, engine
        self.key = tenant.widget_key
        self.prompts = Counter(0)
        self.addresses = Counter(0)  # every visitor of the run has an address of its own
        self.tokenizer, self.max_context = get_tokenizer(), settings.TANDEM_MAX_CONTEXT
        self._ids: dict[int, list[int]] = {}
        self.sampling = widget_sampling(tenant_id=tenant.tenant_id, max_tokens=args.max_output_tokens)

    def ws_urls(self, names: list[str]) -> list[str]:
        urls = {"web" if i == 0 else f"web-{i + 1}": u for i, u in enumerate(self.plat.web_urls)}
        return ["ws" + urls[n].removeprefix("http") for n in names]

    def ids_for(self, n: int) -> list[int]:
        if n not in self._ids:
            self._ids[n] = prompt_ids(self.tokenizer, self.tenant, prompt_text(n), max_context=self.max_context)
        return self._ids[n]

    def engine_ask(self, trace: Trace) -> Trace:
        return self.engine.ask(trace, self.ids_for(trace.prompt_n), max_tokens=self.args.max_output_tokens,
                               salt=f"tenant:{self.tenant.tenant_id}", sampling=self.sampling)

    def warm_up(self) -> None:
        say(f"warm-up: {self.args.warmup} request(s) each side")
        for _ in range(self.args.warmup):
            if self.engine is not None:
                self.engine_ask(Trace(prompt_n=self.prompts()))
            [v] = vis.open_visitors(self.ws_urls(["web"]), self.key, 1, first_address=self.addresses.reserve(1),
                                      batch=self.args.batch_frames)
            try:
                tr = v.ask(Trace(prompt_n=self.prompts()))
            finally:
                v.close()
            if not tr.ok:
                raise RuntimeError(f"warm-up failed: {tr.error}")

    def phase(self, names: list[str], idle_levels: list[int], chat_levels: list[int]) -> dict:
        w = len(names)
        urls = self.ws_urls(names)
        probes = [WebProbe(self.plat.procs[n].pid, self.site.redis_url) for n in names]
        cpu_s = self.args.idle_cpu_s
        say(f"phase: {w} web process(es) {names}")
        out = {"web_processes": w, "names": names,
               "start": [p.snapshot(cpu_window_s=cpu_s) for p in probes], "idle": [], "streaming": []}
        rss0 = sum(s["rss_mb"] for s in out["start"])
        idle = IdleSockets(self.key)
        try:
            opened = 0
            for n in idle_levels:
                idle.next_address = self.addresses.reserve(n - opened)
                burst = idle.open(n - opened, urls, burst_s=self.args.burst_s)
                opened = n
                procs = [p.snapshot(cpu_window_s=cpu_s) for p in probes]
                still = idle.still_open()
                grown = sum(s["rss_mb"] for s in procs) - rss0
                level = {"sockets": n, "connected": len(idle.conns), "still_open": still,
                         "refused": burst.refused, "closed_by_server": idle.closed_codes(),
                         "burst_span_s": burst.span_s, "connect_ms": _pcts(burst.connect_ms), "procs": procs,
                         "rss_kb_per_socket": grown * 1024 / still if still else None}
                out["idle"].append(level)
                say(f"  idle {n}: {still} open, refused {burst.refused or 'none'}, burst {burst.span_s:.1f}s, "
                    f"{fmt(level['rss_kb_per_socket'])} KB/socket, CPU "
                    f"{fmt(sum(s['idle_cpu_percent'] for s in procs))}%, Redis conns "
                    f"{sum(s['redis_connections'] for s in procs)}")
            for m in chat_levels:
                out["streaming"].append(self.streaming(urls, probes, m, idle_open=idle.still_open()))
            if self.args.slow_among:
                out["slow"] = self.slow(urls, self.args.slow_among)
            out["idle_still_open_at_end"] = idle.still_open()
        finally:
            idle.shutdown()
        return out

    def streaming(self, urls: list[str], probes: list[WebProbe], m: int, *, idle_open: int) -> dict:
        # One visitor is asked --single-rounds times in turn: one request's TTFT is noise.
        rounds = self.args.single_rounds if m == 1 else 1
        first = self.prompts.reserve(m * rounds)
        engine, engine_cpu = None, None
        if self.engine is not None:
            before = self.engine.thread_cpu_s()
            e_traces = [t for r in range(rounds) for t in
                        together(m, lambda i, r=r: self.engine_ask(Trace(client=i, prompt_n=first + r * m + i)))]
            engine = summarize_traces(e_traces)
            engine_cpu = {k: round(v - before[k], 3) for k, v in self.engine.thread_cpu_s().items()}
        visitors = vis.open_visitors(urls, self.key, m, first_address=self.addresses.reserve(m),
                                     batch=self.args.batch_frames)
        peak = _Peak(probes)
        share = CpuShare({name: proc.pid for name, proc in self.plat.procs.items()})
        try:
            with share:
                traces = [t for r in range(rounds) for t in vis.chat_round(visitors, first_prompt=first + r * m)]
        finally:
            peak.stop()
            vis.close_all(visitors)
        platform = summarize_traces(traces)
        ratio = (platform["aggregate_tps"] / engine["aggregate_tps"]
                 if engine and engine["aggregate_tps"] and platform["aggregate_tps"] else None)
        say(f"  {m} chats beside {idle_open} idle: {m - platform['error_count']}/{m} completed "
            f"{platform['errors'] or ''}, {fmt(platform['aggregate_tps'])} tok/s vs engine "
            f"{fmt(engine and engine['aggregate_tps'])} (ratio {fmt(ratio, 2)}); Redis connections at the peak "
            f"{peak.clients_at_peak}")
        return {"chats": m, "idle_open": idle_open, "platform": platform, "engine": engine, "ratio": ratio,
                "redis_connections_max": peak.max,
                "redis_connections_max_per_process": peak.per_process,
                "redis_clients_at_peak": peak.clients_at_peak, "cores": share.cores, "cpu_s": share.cpu_s,
                "engine_cpu_s": engine_cpu,
                "traces": [t.to_json() for t in traces]}

    def slow(self, urls: list[str], n: int) -> dict:
        """--slow-pairs pairs of rounds, one without the slow reader and one with it, in
        the order A B B A ..., so a change in the machine's background load falls on both."""
        visitors = vis.open_visitors(urls, self.key, n, first_address=self.addresses.reserve(n),
                                     batch=self.args.batch_frames)
        without: list[Trace] = []
        with_slow: list[Trace] = []
        slow_traces: list[Trace] = []
        try:
            for pair in range(self.args.slow_pairs):
                for slowed in ((False, True) if pair % 2 == 0 else (True, False)):
                    traces = vis.chat_round(visitors, first_prompt=self.prompts.reserve(n),
                                            slow=0 if slowed else None, frame_every_s=self.args.frame_every_s)
                    # Visitor 0 is the slow one when there is one: the others are 1..n-1 always.
                    (with_slow if slowed else without).extend(traces[1:])
                    if slowed:
                        slow_traces.append(traces[0])
        finally:
            vis.close_all(visitors)
        a, b = summarize_traces(without), summarize_traces(with_slow)
        p99a, p99b = a["itl_ms"]["p99"], b["itl_ms"]["p99"]
        change = (p99b - p99a) * 100 / p99a if p99a and p99b is not None else None
        say(f"  slow client among {n}: others' ITL p99 {fmt(p99a)} -> {fmt(p99b)} ms ({fmt(change)}%)")
        return {"clients": n, "pairs": self.args.slow_pairs, "without": a, "with": b, "p99_change_percent": change,
                "slow_client": [t.to_json() for t in slow_traces]}


def _pcts(values: list[float]) -> dict:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99)}


class _Peak:
    """The most Redis connections each web process held while a round ran, sampled on a
    thread twice a second."""

    def __init__(self, probes: list[WebProbe]):
        self.probes, self.per_process = probes, [0] * len(probes)
        self.clients_at_peak: list[dict] = [{} for _ in probes]  # by client name, when each peaked
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-conns", daemon=True)
        self._thread.start()

    @property
    def max(self) -> int:
        return max(self.per_process, default=0)

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, probe in enumerate(self.probes):
                try:
                    clients = probe.redis_clients()
                    if sum(clients.values()) > self.per_process[i]:
                        self.per_process[i], self.clients_at_peak[i] = sum(clients.values()), clients
                except Exception:  # noqa: BLE001, S110 - a sample missed is not a failed run
                    pass
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
