"""Starting the platform as real processes (daphne and Celery workers) from Python, for
the end-to-end tests and the benchmarks: nothing mocked or eager, requests cross process
boundaries exactly as in production."""

from __future__ import annotations

import os
import random
import resource
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from inference.wire.workers import live_workers
from inference.worker.commandline import worker_argv

BASE_DIR = Path(__file__).resolve().parent.parent
# Each platform's process logs go to a folder of their own (one per test session or
# benchmark run), so concurrent sessions never overwrite each other's logs.
LOG_ROOT = BASE_DIR / "var" / "test-logs"


# The web process's listen backlog. Twisted's default of 50 overflows in a burst of
# visitors opening the widget: the kernel drops their SYNs (ListenOverflows), and each
# dropped client waits out TCP's retransmission (1, 3, 7, 15 s ...) while the server
# idles. The kernel caps it at net.core.somaxconn.
WEB_LISTEN_BACKLOG = 4096
# A keepalive ping on an idle socket this often (daphne's default is 20 s): under the 60 s
# after which common proxies and load balancers drop a silent connection, and a third as
# many pings to answer as daphne's default. A peer that vanished is closed by the idle
# timeout (TANDEM_WS_IDLE_TIMEOUT_S) in any case.
WS_PING_INTERVAL_S = "45"


def daphne_argv(host: str, port: int, *extra: str) -> list[str]:
    """The command line of one web process (daphne, tandem/webserver.py) on host:port: the websocket handshake
    may take 30 s under a burst (daphne's 5 s default refused sockets it had accepted), the
    keepalive ping comes every TANDEM_WS_PING_INTERVAL_S (docs/deploy.md)."""
    ping = os.environ.get("TANDEM_WS_PING_INTERVAL_S", WS_PING_INTERVAL_S)
    return [sys.executable, "-m", "tandem.webserver", "--websocket_connect_timeout", "30", "--ping-interval", ping,
            "-e", f"tcp:port={port}:interface={host}:backlog={WEB_LISTEN_BACKLOG}", *extra, "tandem.asgi:application"]


def new_log_dir(label: str = "run") -> Path:
    return LOG_ROOT / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


# Ports handed out by free_port: a port checked but not yet bound by its server is
# otherwise free, and must not be handed out twice.
_handed_out: set[int] = set()
LOWEST_PORT = 20000


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive ports on 127.0.0.1 that nothing holds, chosen below
    the kernel's ephemeral range (net.ipv4.ip_local_port_range). A port inside that range
    can go, between this check and the server's own bind, to any socket that binds port 0
    or connects out: a worker's metrics server took `make run`'s second web port that way
    (port + 1 of an ephemeral port), and the web process restarted until the test gave up."""
    top = _ephemeral_low() - count
    if top <= LOWEST_PORT:  # no room below the range: the kernel chooses
        if count != 1:
            raise RuntimeError(f"no room for {count} consecutive ports below the ephemeral range")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(1000):
        first = random.randrange(LOWEST_PORT, top)
        ports = range(first, first + count)
        if not _handed_out.intersection(ports) and all(_bindable(p) for p in ports):
            _handed_out.update(ports)
            return first
    raise RuntimeError(f"no {count} free consecutive ports between {LOWEST_PORT} and {top}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind (Twisted, Redis)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def database_url(settings_dict: dict) -> str:
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (children inherit
    it): a web process holding thousands of sockets, and the client opening them, need
    more than the usual 1,024. Returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@dataclass
class Platform:
    base_url: str
    ws_url: str
    env: dict
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    # Every web process's base URL, the first being base_url (running_platform's
    # web_processes): the processes "web", "web-2", ...
    web_urls: list[str] = field(default_factory=list)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)  # reaped, so its database connections are gone with it

    def kill(self, name: str) -> int:
        """SIGKILL one process (no warm shutdown: nothing is cleaned up, as when a host or
        the OOM killer takes it) and reap it; returns its PID."""
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait(timeout=20)
        return proc.pid

    def web_pid(self, url: str) -> int:
        """The PID of the web process at `url` (one of web_urls, or extra_web's)."""
        if url in self.web_urls:
            i = self.web_urls.index(url)
            return self.procs["web" if i == 0 else f"web-{i + 1}"].pid
        return self.procs[f"web-{url.rsplit(':', 1)[1]}"].pid

    def worker_name(self, name: str, client: redis.Redis) -> str | None:
        """The worker name (as heartbeats and ownership record it) of process `name`."""
        pid = self.procs[name].pid
        return next((w["name"] for w in live_workers(client) if w.get("pid") == pid), None)


def _spawn(name: str, argv: list[str], env: dict, log_dir: Path) -> subprocess.Popen:
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{name}.log", "w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(argv, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_for(predicate, *, timeout: float, what: str, procs: dict | None = None, log_dir: Path | None = None):
    """Poll a condition about another process (a server coming up) with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for name, proc in (procs or {}).items():
            if proc.poll() is not None:
                where = f"; see {log_dir / (name + '.log')}" if log_dir else ""
                raise RuntimeError(f"{name} exited with {proc.returncode}{where}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def running_platform(*, db_url: str, model_dir: str, workers: list[tuple[str, str, dict]], extra_env=None,
                     log_dir: Path | None = None, web_processes: int = 1):
    """Start daphne (`web_processes` of them, each on a port of its own: "web", "web-2",
    ...) plus `workers` [(role, pool, env)], wait until every model worker sends a
    heartbeat, yield a Platform, stop everything. Logs go to `log_dir` (default: a new
    folder under var/test-logs/)."""
    ports = [free_port() for _ in range(web_processes)]
    port = ports[0]
    env = {**os.environ, "DATABASE_URL": db_url, "TANDEM_MODEL": model_dir, "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "tandem.settings", **(extra_env or {})}
    platform = Platform(base_url=f"http://127.0.0.1:{port}", ws_url=f"ws://127.0.0.1:{port}", env=env,
                        log_dir=log_dir or new_log_dir(), web_urls=[f"http://127.0.0.1:{p}" for p in ports])
    for i, web_port in enumerate(ports):
        name = "web" if i == 0 else f"web-{i + 1}"
        platform.procs[name] = _spawn(name, daphne_argv("127.0.0.1", web_port), env, platform.log_dir)
    pids = []
    for role, pool, wenv in workers:
        conc = int(wenv.get("CONCURRENCY", "4"))
        name = wenv.get("NAME", f"{role}-{pool}")  # NAME: for two workers of one tier and pool
        platform.procs[name] = _spawn(name, worker_argv(role, pool, concurrency=conc),
                                      {**env, "TANDEM_ROLE": role, "TANDEM_POOL": pool, **wenv}, platform.log_dir)
        pids.append(platform.procs[name].pid)
    client = redis.Redis.from_url(env["REDIS_URL"])
    try:
        wait_for(lambda: all(_port_open(p) for p in ports), timeout=180, what="daphne", procs=platform.procs,
                 log_dir=platform.log_dir)
        # Every worker, CPU tier included, beats once it is ready to take tasks.
        wait_for(lambda: {w.get("pid") for w in live_workers(client)} >= set(pids), timeout=180,
                 what="every worker's heartbeat", procs=platform.procs, log_dir=platform.log_dir)
        yield platform
    finally:
        for name in list(platform.procs):
            platform.stop(name)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_worker(platform: Platform, *, role: str, pool: str, env: dict, concurrency: int = 4,
                 name: str | None = None, wait: bool = True) -> str:
    """One more worker beside a running platform; returns its process name (for
    `Platform.stop`/`kill`). With `wait`, once it beats (it is ready to take tasks)."""
    name = name or f"{role}-{pool}"
    platform.procs[name] = proc = _spawn(name, worker_argv(role, pool, concurrency=concurrency),
                                         {**platform.env, "TANDEM_ROLE": role, "TANDEM_POOL": pool, **env},
                                         platform.log_dir)
    if wait:
        client = redis.Redis.from_url(platform.env["REDIS_URL"])
        wait_for(lambda: any(w.get("pid") == proc.pid for w in live_workers(client, role=role, pool=pool)),
                 timeout=180, what=f"{role}.{pool} heartbeat", procs={name: proc}, log_dir=platform.log_dir)
    return name


@contextmanager
def extra_worker(platform: Platform, *, role: str, pool: str, env: dict, concurrency: int = 4,
                 name: str | None = None):
    """One more model worker beside a running platform (e.g. a dedicated pool's)."""
    name = start_worker(platform, role=role, pool=pool, env=env, concurrency=concurrency, name=name)
    try:
        yield name
    finally:
        if name in platform.procs:
            platform.stop(name)


@contextmanager
def extra_web(platform: Platform, **env: str):
    """A second daphne process on the same database and Redis, with `env` over the
    platform's environment; yields its base URL."""
    port = free_port()
    name = f"web-{port}"
    platform.procs[name] = _spawn(name, daphne_argv("127.0.0.1", port), {**platform.env, **env}, platform.log_dir)
    try:
        wait_for(lambda: _port_open(port), timeout=60, what="second daphne", procs={name: platform.procs[name]},
                 log_dir=platform.log_dir)
        yield f"http://127.0.0.1:{port}"
    finally:
        platform.stop(name)
