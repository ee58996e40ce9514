"""`make run`: the whole platform on one machine with one command.

Starts the embedded Redis (unless REDIS_URL points elsewhere), migrates, seeds the demo,
then runs daphne and the worker tiers as child processes, prints the URLs and the
credentials, and stops everything on Ctrl-C. A process that exits is started again
(devstack/supervise.py: backoff, restart count, the reason printed); the others go on.

TANDEM_WEB_PROCESSES=N runs N daphne processes on consecutive ports from TANDEM_PORT, as
a deployment runs N web replicas behind its proxy: they share nothing but Redis and the
database, so a visitor may reconnect to any of them and resume.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from devstack import embedded_redis
from devstack.processes import daphne_argv, raise_open_files_limit
from devstack.supervise import Service, Supervisor
from inference.wire.workers import live_workers
from inference.worker.commandline import devstack_workers

BASE_DIR = Path(__file__).resolve().parent.parent
HOST, PORT = "127.0.0.1", int(os.environ.get("TANDEM_PORT", "8000"))
WEB_PROCESSES = int(os.environ.get("TANDEM_WEB_PROCESSES", "1"))


def _manage(*args: str, capture: bool = False) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True, text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return out.stdout or ""


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def services() -> list[Service]:
    return [*web_services(WEB_PROCESSES, host=HOST, port=PORT), *worker_services()]


def web_services(count: int, *, host: str, port: int) -> list[Service]:
    """`count` daphne processes on ports port, port + 1, ...; one is just `web`."""
    if count < 1:
        raise SystemExit(f"TANDEM_WEB_PROCESSES must be 1 or more, not {count}")
    return [Service("web" if count == 1 else f"web-{i + 1}",
                    daphne_argv(host, port + i))
            for i in range(count)]


def worker_services() -> list[Service]:
    """The CPU tier and one prefill and one decode worker on the shared pools; each model
    worker gets its own core when there are two or more. Plus the CPU tier's webhooks and
    actions workers (queues of their own: a slow receiver or tenant endpoint never holds
    up a chat's prompt)."""
    from tandem.actions.queue import worker_argv as actions_worker_argv
    from tandem.webhooks.queue import worker_argv as webhooks_worker_argv

    return [*(Service(name, argv, env) for name, argv, env in devstack_workers(_cores())),
            Service("webhooks-worker", webhooks_worker_argv(concurrency=4), {"TANDEM_ROLE": "cpu"}),
            Service("actions-worker", actions_worker_argv(concurrency=4), {"TANDEM_ROLE": "cpu"})]


def _redis_url() -> str:
    return os.environ.get("REDIS_URL") or f"redis://127.0.0.1:{os.environ.get('TANDEM_EMBEDDED_REDIS_PORT', '6390')}/0"


def _missing_workers(client: redis.Redis, procs: list[Service]) -> list[tuple[str, str]]:
    """Model workers not beating yet (they load their model before they serve)."""
    wanted = [(p.env["TANDEM_ROLE"], p.env.get("TANDEM_POOL", "shared")) for p in procs
              if p.env.get("TANDEM_ROLE") not in (None, "cpu")]
    return [w for w in wanted if not live_workers(client, role=w[0], pool=w[1])]


def _web_listening() -> bool:
    """Every web process accepts connections (daphne binds its port after loading the app)."""
    def open_(port: int) -> bool:
        with socket.socket() as s:
            return s.connect_ex((HOST, port)) == 0

    return all(open_(PORT + i) for i in range(WEB_PROCESSES))


def main() -> None:
    os.chdir(BASE_DIR)
    raise_open_files_limit()  # daphne inherits it: each socket is a descriptor
    redis_proc = None
    if "REDIS_URL" not in os.environ:
        port = int(os.environ.get("TANDEM_EMBEDDED_REDIS_PORT", "6390"))
        redis_proc = embedded_redis.start(port=port, workdir=BASE_DIR / "var" / "redis")
        print(f"[tandem] embedded Redis on 127.0.0.1:{port}", flush=True)
    _manage("migrate", "--noinput", "-v", "0")
    seed = json.loads(_manage("seed_demo", "--json", capture=True))

    procs = services()
    supervisor = Supervisor(procs, cwd=BASE_DIR, base_env=dict(os.environ))
    supervisor.start_all()

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = supervisor.stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    client = redis.Redis.from_url(_redis_url())
    print(f"[tandem] waiting for {len(_missing_workers(client, procs))} model worker(s) to load the model…", flush=True)
    ready, started = False, time.monotonic()
    try:
        while not stopping:
            supervisor.poll()
            if not ready:
                missing = _missing_workers(client, procs)
                if not missing and _web_listening():
                    ready = True
                    print(
                        "\n[tandem] ready\n"
                        f"  admin:   http://{HOST}:{PORT}/admin/   user {seed['admin_user']}  password {seed['admin_password']}\n"
                        f"  console: http://{HOST}:{PORT}/console/\n"
                        f"  demo:    http://{HOST}:{PORT}/demo/{seed['tenant']}/\n"
                        f"  API:     http://{HOST}:{PORT}/v1/chat/completions   docs http://{HOST}:{PORT}/api/docs/\n"
                        f"  health:  http://{HOST}:{PORT}/readyz   metrics http://{HOST}:{PORT}/metrics\n"
                        + (f"  web processes: {WEB_PROCESSES}, on ports {PORT}-{PORT + WEB_PROCESSES - 1} "
                           "(any of them serves every URL above)\n" if WEB_PROCESSES > 1 else "") +
                        f"  demo secret key: {seed['secret_key']}\n"
                        "  Ctrl-C stops everything.\n",
                        flush=True,
                    )
                elif time.monotonic() - started > 300:
                    print(f"[tandem] still waiting for {missing}; see their output above", flush=True)
                    started = time.monotonic()
            time.sleep(0.25)
    finally:
        supervisor.stop_all()
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=5)
        print("[tandem] stopped", flush=True)


if __name__ == "__main__":
    main()
