"""Starting the platform as real processes (daphne and Celery workers) from Python, for
the end-to-end tests and the benchmarks: nothing mocked or eager, requests cross process
boundaries exactly as in production."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

BASE_DIR = Path(__file__).resolve().parent.parent
LOG_DIR = BASE_DIR / "var" / "test-logs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url(settings_dict: dict) -> str:
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


@dataclass
class Platform:
    base_url: str
    ws_url: str
    env: dict
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _spawn(name: str, argv: list[str], env: dict) -> subprocess.Popen:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = open(LOG_DIR / f"{name}.log", "w")
    return subprocess.Popen(argv, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_for(predicate, *, timeout: float, what: str, procs: dict | None = None):
    """Poll a condition about another process (a server coming up) with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for name, proc in (procs or {}).items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {LOG_DIR / (name + '.log')}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def worker_argv(role: str, pool: str, concurrency: int) -> list[str]:
    from inference.workers import worker_argv as argv

    return argv(role, pool, concurrency=concurrency)


@contextmanager
def running_platform(*, db_url: str, model_dir: str, workers: list[tuple[str, str, dict]], extra_env=None):
    """Start daphne plus `workers` [(role, pool, env)], wait until every model worker
    sends a heartbeat, yield a Platform, stop everything."""
    from inference.heartbeats import live_workers

    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "TANDEM_MODEL": model_dir, "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "tandem.settings", **(extra_env or {})}
    platform = Platform(base_url=f"http://127.0.0.1:{port}", ws_url=f"ws://127.0.0.1:{port}", env=env)
    platform.procs["web"] = _spawn("web", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                           "tandem.asgi:application"], env)
    expected = []
    for role, pool, wenv in workers:
        conc = int(wenv.get("CONCURRENCY", "4"))
        name = f"{role}-{pool}"
        platform.procs[name] = _spawn(name, worker_argv(role, pool, conc),
                                      {**env, "TANDEM_ROLE": role, "TANDEM_POOL": pool, **wenv})
        if role != "cpu":
            expected.append((role, pool))
    client = redis.Redis.from_url(env["REDIS_URL"])
    try:
        wait_for(lambda: _port_open(port), timeout=60, what="daphne", procs=platform.procs)
        for role, pool in expected:
            wait_for(lambda r=role, p=pool: live_workers(client, role=r, pool=p), timeout=180,
                     what=f"{role}.{pool} heartbeat", procs=platform.procs)
        yield platform
    finally:
        for name in list(platform.procs):
            platform.stop(name)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def extra_worker(platform: Platform, *, role: str, pool: str, env: dict, concurrency: int = 4):
    """One more model worker beside a running platform (e.g. a dedicated pool's)."""
    from inference.heartbeats import live_workers

    name = f"{role}-{pool}"
    platform.procs[name] = _spawn(name, worker_argv(role, pool, concurrency),
                                  {**platform.env, "TANDEM_ROLE": role, "TANDEM_POOL": pool, **env})
    client = redis.Redis.from_url(platform.env["REDIS_URL"])
    try:
        wait_for(lambda: live_workers(client, role=role, pool=pool), timeout=180,
                 what=f"{role}.{pool} heartbeat", procs={name: platform.procs[name]})
        yield
    finally:
        platform.stop(name)


@contextmanager
def extra_web(platform: Platform):
    """A second daphne process on the same database and Redis; yields its base URL."""
    port = free_port()
    name = f"web-{port}"
    platform.procs[name] = _spawn(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                         "tandem.asgi:application"], platform.env)
    try:
        wait_for(lambda: _port_open(port), timeout=60, what="second daphne", procs={name: platform.procs[name]})
        yield f"http://127.0.0.1:{port}"
    finally:
        platform.stop(name)
