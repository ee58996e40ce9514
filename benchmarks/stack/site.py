"""A benchmark's throwaway site: its own Redis server and database under var/bench/,
migrated, with the platform (daphne and real Celery workers) started on it.

A Redis of the run's own, because other sessions' workers on a shared Redis would take
this run's tasks; a database of its own, so that runs never see each other's rows.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..machine import busy_processes, concrete_dtype, describe, machine_info
from ..paths import BASE_DIR, BENCH_DIR, MODEL_DIR
from ..report import say

POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def add_site_options(p: argparse.ArgumentParser) -> None:
    """The options every platform benchmark takes: where its state lives, how the model
    workers run, and settings for the platform's processes."""
    p.add_argument("--model", choices=["real", "tiny"], default="real",
                   help="tiny: a 2-layer random-weight model whose forwards are short, for iterating on the "
                        "platform's own time (and for smoke runs; its comparisons with the engine mean little)")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has native bf16 units, else float32")
    p.add_argument("--prefill-core", type=int, default=0)
    p.add_argument("--decode-core", type=int, default=1)
    p.add_argument("--decode-slots", type=int, default=64, help="the decode engine's batch slots (TANDEM_MAX_BATCH)")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private one)")
    p.add_argument("--db-url", default=None,
                   help="use this database (default: a new SQLite file under var/bench/); 'postgres' makes a "
                        "throwaway database on 127.0.0.1:5432 and drops it afterwards")
    p.add_argument("--conn-max-age", type=int, default=None,
                   help="DB_CONN_MAX_AGE for the platform's processes (default: the settings' default)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the platform's processes (repeatable), e.g. "
                        "TANDEM_TENANT_REFRESH_S=30")


def parse(p: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`argv` parsed, "auto" dtype resolved to the one that will run."""
    args = p.parse_args(argv)
    args.dtype = concrete_dtype(args.dtype)
    return args


def model_dir(args: argparse.Namespace) -> Path:
    if args.model != "tiny":
        return MODEL_DIR
    from inference.engine.tiny import build_tiny_model

    path = build_tiny_model(BASE_DIR / "var" / "models" / "tiny-bench")
    say(f"model: the tiny random-weight model ({path}): the platform's own time only")
    return path


LOAD_GENERATOR_LIMITS = {name: "1000000" for name in (
    "TANDEM_WIDGET_VISITOR_RPM", "TANDEM_WIDGET_VISITOR_TPM", "TANDEM_WIDGET_VISITOR_STREAMS",
    "TANDEM_WIDGET_IP_RPM", "TANDEM_WIDGET_IP_TPM", "TANDEM_WIDGET_IP_STREAMS",
    "TANDEM_WS_MAX_PER_KEY", "TANDEM_WS_MAX_PER_IP", "TANDEM_WS_FRAME_BURST")}


def platform_env(args: argparse.Namespace, **extra: str) -> dict:
    # DEBUG off, as deployed (no per-query logging in the web tier and the workers).
    # The load comes from one address, often one visitor: lift the per-visitor and per-IP
    # limits of widget keys and the socket caps (docs/security.md), which a benchmark
    # would otherwise measure instead of the platform.
    env = {"DEBUG": "0", **LOAD_GENERATOR_LIMITS, **extra}
    if args.conn_max_age is not None:
        env["DB_CONN_MAX_AGE"] = str(args.conn_max_age)
    env.update(item.split("=", 1) for item in args.env)
    return env


def model_workers(args: argparse.Namespace) -> list[tuple[str, str, dict]]:
    """One CPU worker, and a prefill and a decode worker on the shared pool, each pinned
    to its core with one torch thread (so that pinning the process pins its compute)."""
    def pinned(core: int, concurrency: int, **extra) -> dict:
        return {"TANDEM_DTYPE": args.dtype, "TANDEM_THREADS": "1", "TANDEM_CPU_AFFINITY": str(core),
                "CONCURRENCY": str(concurrency), **{k: str(v) for k, v in extra.items()}}

    return [
        ("cpu", "shared", {"CONCURRENCY": "1"}),
        ("prefill", "shared", pinned(args.prefill_core, 8)),
        ("decode", "shared", pinned(args.decode_core, args.decode_slots, TANDEM_MAX_BATCH=args.decode_slots)),
    ]


def whole_pool(args: argparse.Namespace) -> dict:
    """The benchmark tenant's allocation: every decode slot of the pool. A new tenant's
    default (max_decode_slots 16, tenants.models.Allocation) is a fair-share cap among
    tenants; a benchmark that compares one tenant's visitors with the engine alone at the
    same concurrency must let that tenant use the slots the engine alone has."""
    return {"max_decode_slots": args.decode_slots}


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def start_run(name: str, argv: list[str], *, quick: bool = False) -> dict:
    """What every platform benchmark does first: record the machine and whatever else is
    using the CPU (and warn about it), make sure the model is prepared, and start the
    result document. A SIGTERM (a `kill`, a timeout) unwinds like Ctrl-C, so the
    platform's processes and the throwaway Redis and database are stopped, not orphaned."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    machine = machine_info()
    busy = busy_processes()
    say(f"machine: {describe(machine)}, load {machine['loadavg_at_start']}")
    if busy:
        say("WARNING: other processes are using the CPU; the numbers will be noisy:\n    " + "\n    ".join(busy))
    from inference.engine.prepare import prepare_model

    prepare_model(MODEL_DIR)
    return {"benchmark": name, "quick": quick, "argv": argv, "machine": machine, "busy_processes_at_start": busy}


@dataclass
class BenchSite:
    """Where one benchmark run keeps its state: its Redis, its database, its logs."""

    name: str
    run_dir: Path
    redis_url: str
    db_url: str
    log_dir: Path
    model_dir: Path = MODEL_DIR
    redis_proc: subprocess.Popen | None = None  # None when the run uses a Redis it did not start

    def stop(self) -> None:
        if self.redis_proc is not None:
            self.redis_proc.terminate()
            try:
                self.redis_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.redis_proc.kill()
            self.redis_proc = None


@contextmanager
def bench_site(name: str, args: argparse.Namespace):
    """Set up, before Django is imported: a Redis server of this run's own (unless
    --redis-url), a fresh SQLite file under var/bench/ (unless --db-url; "postgres"
    makes a throwaway PostgreSQL database on 127.0.0.1:5432 and drops it at the end), the
    model every process loads (--model), then django.setup() and migrate. Yields a
    BenchSite; stops what it started."""
    redis_url, db_url, model = args.redis_url, args.db_url, model_dir(args)
    run_dir = BENCH_DIR / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = None
    if redis_url is None:
        from devstack import embedded_redis
        from devstack.processes import free_port

        port = free_port()
        proc = embedded_redis.start(port=port, workdir=run_dir / "redis")
        redis_url = f"redis://127.0.0.1:{port}/0"
    throwaway_pg = None
    if db_url == "postgres":
        throwaway_pg = f"tandem_bench_{name}_{os.getpid()}"
        _pg_admin(f'CREATE DATABASE "{throwaway_pg}"')
        db_url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + "/" + throwaway_pg
    db_url = db_url or f"sqlite:///{run_dir / 'bench.sqlite3'}"
    site = BenchSite(name=name, run_dir=run_dir, redis_url=redis_url, db_url=db_url,
                     log_dir=run_dir / "logs", model_dir=Path(model), redis_proc=proc)
    os.environ["REDIS_URL"] = redis_url
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")
    os.environ["TANDEM_MODEL"] = str(model)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        yield site
    finally:
        site.stop()
        if throwaway_pg:
            from django.db import connections

            connections.close_all()
            _pg_admin(f'DROP DATABASE IF EXISTS "{throwaway_pg}" WITH (FORCE)')


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(sql)


@contextmanager
def platform_up(site: BenchSite, args: argparse.Namespace, **extra_env: str):
    """daphne and the model workers (model_workers) as real processes
    (devstack.processes.running_platform), with their logs under this run's directory."""
    from devstack.processes import running_platform

    workers = model_workers(args)
    say(f"starting daphne + {', '.join(f'{r}.{p}' for r, p, _ in workers)} (logs: {site.log_dir})")
    t = time.monotonic()
    with running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=workers,
                          extra_env=platform_env(args, **extra_env), log_dir=site.log_dir) as p:
        say(f"platform up in {time.monotonic() - t:.1f}s at {p.ws_url}")
        yield p
