"""`make run`: the whole platform on one machine with one command.

Starts the embedded Redis (unless REDIS_URL points elsewhere), migrates, seeds the demo,
then runs daphne and the worker tiers as child processes, prints the URLs and the
credentials, and stops everything on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from devstack import embedded_redis
from inference.wire.workers import live_workers
from inference.worker.commandline import devstack_workers

BASE_DIR = Path(__file__).resolve().parent.parent
HOST, PORT = "127.0.0.1", int(os.environ.get("TANDEM_PORT", "8000"))


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None


def _manage(*args: str, capture: bool = False) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True, text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return out.stdout or ""


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def services() -> list[Service]:
    py = sys.executable
    web = Service("web", [py, "-m", "daphne", "-b", HOST, "-p", str(PORT), "tandem.asgi:application"])
    return [web, *worker_services()]


def worker_services() -> list[Service]:
    """The CPU tier and one prefill and one decode worker on the shared pools; each model
    worker gets its own core when there are two or more."""
    return [Service(name, argv, env) for name, argv, env in devstack_workers(_cores())]


def _wait_for_workers(procs: list[Service], should_stop, timeout: float = 300) -> bool:
    """Model workers load their model before they serve; say so rather than print
    "ready" while the first request would still wait."""
    url = os.environ.get("REDIS_URL") or f"redis://127.0.0.1:{os.environ.get('TANDEM_EMBEDDED_REDIS_PORT', '6390')}/0"
    client = redis.Redis.from_url(url)
    wanted = [(p.env["TANDEM_ROLE"], p.env.get("TANDEM_POOL", "shared")) for p in procs
              if p.env.get("TANDEM_ROLE") not in (None, "cpu")]
    deadline = time.monotonic() + timeout
    print(f"[tandem] waiting for {len(wanted)} model worker(s) to load the model…", flush=True)
    while True:
        missing = [w for w in wanted if not live_workers(client, role=w[0], pool=w[1])]
        if not missing:
            return True
        if should_stop():
            return False
        dead = [p.name for p in procs if p.proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise SystemExit(f"[tandem] workers did not come up ({dead or missing}); see their output above")
        time.sleep(0.5)


def main() -> None:
    os.chdir(BASE_DIR)
    redis_proc = None
    if "REDIS_URL" not in os.environ:
        port = int(os.environ.get("TANDEM_EMBEDDED_REDIS_PORT", "6390"))
        redis_proc = embedded_redis.start(port=port, workdir=BASE_DIR / "var" / "redis")
        print(f"[tandem] embedded Redis on 127.0.0.1:{port}", flush=True)
    _manage("migrate", "--noinput", "-v", "0")
    seed = json.loads(_manage("seed_demo", "--json", capture=True))

    procs = services()
    for svc in procs:
        svc.proc = subprocess.Popen(svc.argv, cwd=BASE_DIR, env={**os.environ, **svc.env})
        print(f"[tandem] started {svc.name} (pid {svc.proc.pid})", flush=True)

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if _wait_for_workers(procs, lambda: stopping):
            print(
                "\n[tandem] ready\n"
                f"  admin:   http://{HOST}:{PORT}/admin/   user {seed['admin_user']}  password {seed['admin_password']}\n"
                f"  console: http://{HOST}:{PORT}/console/\n"
                f"  demo:    http://{HOST}:{PORT}/demo/{seed['tenant']}/\n"
                f"  API:     http://{HOST}:{PORT}/v1/chat/completions   docs http://{HOST}:{PORT}/api/docs/\n"
                f"  demo secret key: {seed['secret_key']}\n"
                "  Ctrl-C stops everything.\n",
                flush=True,
            )
        while not stopping:
            for svc in procs:
                if svc.proc.poll() is not None:
                    print(f"[tandem] {svc.name} exited with {svc.proc.returncode}; stopping", flush=True)
                    stopping = True
            time.sleep(0.5)
    finally:
        for svc in procs:
            if svc.proc and svc.proc.poll() is None:
                svc.proc.terminate()
        deadline = time.monotonic() + 15
        for svc in procs:
            if svc.proc:
                try:
                    svc.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    svc.proc.kill()
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=5)
        print("[tandem] stopped", flush=True)


if __name__ == "__main__":
    main()
