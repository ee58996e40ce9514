"""`python -m benchmarks webdb [--bursts 50,100,200] [--rounds 2] [--quick]`: a burst of
REST requests against one web process, with its database pool (as shipped:
tandem/webserver.py, DB_POOL_SIZE) and without one (the peer: DB_POOL_SIZE=0, a connection
per request, as before the pool), in the same run on the same PostgreSQL.

Each burst is N requests sent at once to one process, half creating a conversation and
half listing them (POST and GET /api/v1/conversations/: the API's database work without
a model). For each: statuses (a 5xx is a failure), latency p50/p99 as the client sees it,
and the most PostgreSQL connections the process held (pg_stat_activity, by the
application_name each process's connections carry). Rounds alternate A B, B A, so a
change in the machine's load falls on both. Needs PostgreSQL on 127.0.0.1:5432 (a throwaway
database, dropped at the end); starts its own Redis and two daphne processes, no model
workers. Prints a Markdown table; writes JSON (var/bench/webdb.json)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time

from .quick import add_quick_options, parse_quick
from .report import fmt, say, table, write_json
from .stack import site as platform_site
from .stats import percentile

DEFAULT_OUT = "var/bench/webdb.json"
QUICK = {"bursts": "10,20", "rounds": 1, "model": "tiny"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks webdb", description=__doc__.split("\n\n")[0])
    p.add_argument("--bursts", default="50,100,200", help="requests sent at once, per burst (default 50,100,200)")
    p.add_argument("--rounds", type=int, default=2, help="pairs of bursts per size, alternated A B B A (default 2)")
    p.add_argument("--pool-size", type=int, default=10,
                   help="DB_POOL_SIZE of the pooled process (default 10, the web process's: tandem/webserver.py)")
    platform_site.add_site_options(p)
    p.set_defaults(db_url="postgres")
    add_quick_options(p, default_out=DEFAULT_OUT)
    return parse_quick(p, argv, name="webdb", default_out=DEFAULT_OUT, quick_defaults=QUICK,
                       parse=platform_site.parse)


class ConnectionPeak:
    """The most connections the process `pid` holds at once, sampled on a connection of
    its own until stopped."""

    def __init__(self, db_url: str, pid: int):
        self.db_url, self.name, self.most = db_url, f"tandem-{pid}", 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-conns", daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.db_url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
            while not self._stop.is_set():
                (count,) = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                        [self.name]).fetchone()
                self.most = max(self.most, count)
                self._stop.wait(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)


async def _burst(url: str, key: str, n: int) -> list[tuple[int, float]]:
    import httpx

    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)

    async def one(client, i: int) -> tuple[int, float]:
        t0 = time.perf_counter()
        try:
            if i % 2:
                r = await client.get(f"{url}/api/v1/conversations/?limit=20", headers=headers)
            else:
                r = await client.post(f"{url}/api/v1/conversations/", json={"visitor_id": f"bench-{i}"},
                                      headers=headers)
            status = r.status_code
        except httpx.HTTPError:
            status = 0  # no answer at all
        return status, (time.perf_counter() - t0) * 1000

    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(*(one(client, i) for i in range(n)))


def measure(url: str, key: str, n: int, peak: ConnectionPeak) -> dict:
    with peak:
        results = asyncio.run(_burst(url, key, n))
    ok = [ms for status, ms in results if 200 <= status < 300]
    statuses: dict[str, int] = {}
    for status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"n": n, "ok": len(ok), "ok_ms": ok, "statuses": statuses,
            "failed": sum(c for s, c in statuses.items() if s == "0" or s.startswith("5")),
            "p50_ms": percentile(ok, 50), "p99_ms": percentile(ok, 99), "db_connections_max": peak.most}


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    bursts = [int(x) for x in args.bursts.split(",") if x.strip()]
    if not bursts or min(bursts) < 1 or args.rounds < 1 or args.pool_size < 1:
        raise SystemExit("--bursts takes positive counts, --rounds and --pool-size at least 1")
    if args.db_url and not args.db_url.startswith("postgres"):
        raise SystemExit("--db-url must be PostgreSQL: the pool is PostgreSQL's (psycopg_pool)")
    result = platform_site.start_run("webdb", argv, quick=args.quick)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    from devstack.processes import extra_web, running_platform

    with platform_site.bench_site("webdb", args) as site:
        from tenants.services import tenant_create

        key = tenant_create(slug="bench-webdb", name="Bench webdb", quota={
            "requests_per_minute": 1_000_000, "tokens_per_minute": 10**9}).secret_key.plaintext
        env = platform_site.platform_env(args, DB_POOL_SIZE=str(args.pool_size))
        result["config"] = {"bursts": bursts, "rounds": args.rounds, "pool_size": args.pool_size,
                            "platform_env": env, "run_dir": str(site.run_dir)}
        say(f"starting daphne with its pool and one without (logs: {site.log_dir})")
        with running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=[], extra_env=env,
                              log_dir=site.log_dir) as plat, extra_web(plat, DB_POOL_SIZE="0") as peer_url:
            sides = {"pooled": (plat.base_url, plat.web_pid(plat.base_url)),
                     "no pool": (peer_url, plat.web_pid(peer_url))}
            for url, pid in sides.values():  # warm-up: code paths loaded
                measure(url, key, 4, ConnectionPeak(site.db_url, pid))
            runs: dict[str, dict[int, list[dict]]] = {side: {n: [] for n in bursts} for side in sides}
            for n in bursts:
                for r in range(args.rounds):
                    order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                    for side in order:
                        url, pid = sides[side]
                        runs[side][n].append(m := measure(url, key, n, ConnectionPeak(site.db_url, pid)))
                        say(f"  {side}, {n} at once: {m['ok']}/{n} ok, statuses {m['statuses']}, "
                            f"p50 {fmt(m['p50_ms'])} ms, p99 {fmt(m['p99_ms'])} ms, "
                            f"{m['db_connections_max']} connections at most")
    result["runs"] = runs
    result["summary"] = [_summary(side, n, runs[side][n]) for n in bursts for side in runs]
    rows = [(s["burst"], s["side"], f"{s['ok']}/{s['sent']}", s["failed"], fmt(s["p50_ms"]), fmt(s["p99_ms"]),
             s["db_connections_max"]) for s in result["summary"]]
    print(f"\nREST bursts against one web process ({result['machine']['cpu_model']}):\n")
    print(table(["at once", "web process", "2xx", "5xx or none", "p50 ms", "p99 ms", "DB connections, most"], rows))
    say(f"wrote {write_json(args.out, result)}")


def _summary(side: str, n: int, rounds: list[dict]) -> dict:
    """A side's bursts of one size together: latencies over every 2xx of them."""
    ok_ms = [ms for m in rounds for ms in m["ok_ms"]]
    return {"burst": n, "side": side, "sent": n * len(rounds), "ok": len(ok_ms),
            "failed": sum(m["failed"] for m in rounds), "p50_ms": percentile(ok_ms, 50),
            "p99_ms": percentile(ok_ms, 99), "db_connections_max": max(m["db_connections_max"] for m in rounds)}
