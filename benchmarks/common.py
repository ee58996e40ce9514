"""Shared pieces of the platform benchmarks (`e2e`, `fairness`): statistics, tables and
JSON, progress lines, a throwaway platform (its own Redis server, its own SQLite file
under var/bench/, migrated, with tenants), a websocket load client that timestamps every
frame, and two ways to see where a request's time went:

- `stage_times`: after the fact, from what the request left in Redis (its spec's
  `enqueued_at`, the stream's record ids and the first token's `ts`); cheap, any load;
- `RedisMonitor`: Redis's MONITOR, which timestamps every command the web tier and the
  workers send (µs, the server's clock), for a short profiling pass at light load.

Every timestamp is `time.time()` (or Redis's clock, the same host's): the client, the
web tier and the workers run on one machine, so their clocks agree.

Benchmarks, not tests: nothing here asserts; the commands print tables and write JSON.
"""

from __future__ import annotations

import json
import math
import os
import platform as py_platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
BENCH_DIR = BASE_DIR / "var" / "bench"
ORIGIN = "https://bench.tandem.test"
MODEL_DIR = BASE_DIR / "var" / "models" / "smollm2-135m-instruct"

_T0 = time.monotonic()


# -- progress, statistics, tables, JSON -------------------------------------------------


def say(msg: str) -> None:
    """A progress line on stderr, with the seconds since the benchmark started."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def concrete_dtype(name: str) -> str:
    """The dtype a benchmark runs in: "auto" resolves as the workers resolve it (bf16 on a
    CPU with native bf16 units, else float32), so the report names what really ran."""
    if name != "auto":
        return name
    from inference.engine.config import EngineConfig

    return str(EngineConfig(model="", device="cpu").resolve_dtype()).removeprefix("torch.")


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None if empty."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


def summarize(values: Iterable[float | None]) -> dict:
    """n, mean, p50, p90, p99, min, max of the non-None values (None fields if empty)."""
    xs = [float(v) for v in values if v is not None]
    return {
        "n": len(xs),
        "mean": statistics.fmean(xs) if xs else None,
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "min": min(xs) if xs else None,
        "max": max(xs) if xs else None,
    }


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence], *, digits: int = 1) -> str:
    """A GitHub-flavoured markdown table, columns padded so it also reads in a terminal."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths, strict=True)) + " |"  # noqa: E731
    out = [line(headers), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def write_json(path: str | Path, data: dict) -> Path:
    path = Path(path)
    if not path.is_absolute():
        path = BASE_DIR / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
    return path


def _json_default(obj):
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set):
        return sorted(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def machine_info() -> dict:
    """What the numbers were measured on, and how busy the machine was when they were."""
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover
        torch_version = None
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": py_platform.python_version(),
        "torch": torch_version,
        "loadavg_at_start": os.getloadavg(),
        "git": git_state(),
    }


def git_state(directory: Path = BASE_DIR) -> dict:
    """The checkout's commit and its modified files."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10).stdout

    try:
        # Not stripped: a porcelain line starts with its two status columns (" M path").
        return {"commit": git("rev-parse", "--short", "HEAD").strip(),
                "dirty_files": [ln[3:] for ln in git("status", "--porcelain").splitlines() if ln[:2] != "??"]}
    except (OSError, subprocess.SubprocessError):
        return {}


def busy_processes(threshold_pct: float = 20.0) -> list[str]:
    """Other processes using the CPU right now (they skew every number here)."""
    try:
        out = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu", "--no-headers"],
                             capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    mine = {os.getpid()}
    busy = []
    for ln in out.splitlines()[:10]:
        parts = ln.split(None, 2)
        if len(parts) == 3 and float(parts[1]) >= threshold_pct and int(parts[0]) not in mine:
            busy.append(f"{parts[0]} {parts[1]}% {parts[2][:90]}")
    return busy


# -- a throwaway platform -----------------------------------------------------------------


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def start_run(name: str, argv: list[str]) -> dict:
    """What every platform benchmark does first: record the machine and whatever else is
    using the CPU (and warn about it), make sure the model is prepared, and start the
    result document. A SIGTERM (a `kill`, a timeout) unwinds like Ctrl-C, so the
    platform's processes and the throwaway Redis and database are stopped, not orphaned."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    machine = machine_info()
    busy = busy_processes()
    say(f"machine: {machine['cpu_model']}, {machine['cpus']} cpus, load {machine['loadavg_at_start']}")
    if busy:
        say("WARNING: other processes are using the CPU; the numbers will be noisy:\n    " + "\n    ".join(busy))
    from inference.engine.prepare import prepare_model

    prepare_model(MODEL_DIR)
    return {"benchmark": name, "argv": argv, "machine": machine, "busy_processes_at_start": busy}


@dataclass
class BenchSite:
    """Where one benchmark run keeps its state: its Redis, its database, its logs."""

    name: str
    run_dir: Path
    redis_url: str
    db_url: str
    log_dir: Path
    model_dir: Path = MODEL_DIR
    _redis_proc: subprocess.Popen | None = None

    def stop(self) -> None:
        if self._redis_proc is not None:
            self._redis_proc.terminate()
            try:
                self._redis_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._redis_proc.kill()
            self._redis_proc = None


POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@contextmanager
def bench_site(name: str, *, redis_url: str | None = None, db_url: str | None = None, model_dir: Path = MODEL_DIR):
    """Set up, before Django is imported: a Redis server of this run's own (unless
    `redis_url`; a shared one would let other sessions' workers take this run's tasks),
    a fresh SQLite file under var/bench/ (unless `db_url`; `db_url="postgres"` makes a
    throwaway PostgreSQL database on 127.0.0.1:5432 and drops it at the end), the model
    every process loads (`model_dir`), then django.setup() and migrate. Yields a
    BenchSite; stops what it started."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = BENCH_DIR / f"{name}-{stamp}-{os.getpid()}"
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
                     log_dir=run_dir / "logs", model_dir=Path(model_dir), _redis_proc=proc)
    os.environ["REDIS_URL"] = redis_url
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tandem.settings")
    os.environ["TANDEM_MODEL"] = str(model_dir)
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


@dataclass
class BenchTenant:
    slug: str
    tenant_id: int
    widget_key: str
    system_prompt: str
    max_prompt_tokens: int
    max_output_tokens: int


def make_tenant(slug: str, *, quota: dict | None = None, allocation: dict | None = None) -> BenchTenant:
    """A tenant through the real service (quota, allocation on the shared pools, keys),
    its widget key allowed from ORIGIN; `allocation` fields (priority, max_decode_slots)
    are set afterwards."""
    from tenants.models import Allocation
    from tenants.services import tenant_create

    created = tenant_create(slug=slug, name=slug.title(), allowed_origins=[ORIGIN], quota=quota)
    if allocation:
        Allocation.objects.filter(tenant=created.tenant).update(**allocation)
    t = created.tenant
    t.refresh_from_db()
    return BenchTenant(slug=slug, tenant_id=t.pk, widget_key=created.widget_key.plaintext,
                       system_prompt=t.system_prompt, max_prompt_tokens=t.quota.max_prompt_tokens,
                       max_output_tokens=t.quota.max_output_tokens)


def model_worker_env(*, core: int, dtype: str, concurrency: int, **extra: str) -> dict:
    return {"TANDEM_DTYPE": dtype, "TANDEM_THREADS": "1", "TANDEM_CPU_AFFINITY": str(core),
            "CONCURRENCY": str(concurrency), **{k: str(v) for k, v in extra.items()}}


@contextmanager
def platform_up(site: BenchSite, workers: list[tuple[str, str, dict]], *, extra_env: dict | None = None):
    """daphne + `workers` as real processes (devstack.processes.running_platform), with
    their logs under this run's directory."""
    from devstack import processes

    say(f"starting daphne + {', '.join(f'{r}.{p}' for r, p, _ in workers)} (logs: {site.log_dir})")
    t = time.monotonic()
    with processes.running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=workers,
                                    extra_env=extra_env, log_dir=site.log_dir) as p:
        say(f"platform up in {time.monotonic() - t:.1f}s at {p.ws_url}")
        yield p


def pin_all_threads(pid: int, cores: set[int]) -> int:
    """Pin every thread of process `pid` (sched_setaffinity on a pid moves only the
    thread with that id; threads started later inherit from their creator). Returns the
    number of threads pinned."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
            n += 1
        except (ProcessLookupError, PermissionError):
            continue
    return n


def renice_all_threads(pid: int, nice: int) -> int:
    """Set the nice value of every thread of `pid` (on Linux nice is per thread; threads
    started later inherit it). Negative values need root or CAP_SYS_NICE."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
            n += 1
        except (ProcessLookupError, PermissionError):
            continue
    return n


def isolate_core(site: BenchSite, plat, *, keep: int, move_to: int) -> dict:
    """An experiment: move everything that is not a model worker (daphne, the CPU worker,
    this run's Redis, this benchmark process) off core `keep`, onto core `move_to`, so
    that the worker pinned to `keep` has its core to itself (other sessions' processes
    aside). The shipped launcher leaves those processes free to run on any core."""
    moved = {}
    for name, proc in plat.procs.items():
        if name == "web" or name.startswith("cpu"):
            moved[name] = pin_all_threads(proc.pid, {move_to})
    if site._redis_proc is not None:
        moved["redis"] = pin_all_threads(site._redis_proc.pid, {move_to})
    moved["bench"] = pin_all_threads(os.getpid(), {move_to})
    say(f"isolated core {keep}: moved {moved} (threads) to core {move_to}")
    return moved


# -- prompts ------------------------------------------------------------------------------

QUESTIONS = [
    "my package arrived damaged and the box was crushed. Please explain step by step how I return it, "
    "get a full refund, and what I should do with the broken item.",
    "I was charged twice for the same subscription this month. Can you walk me through how to get the "
    "duplicate charge refunded and how to stop it from happening again?",
    "the tracking page has said 'in transit' for nine days. Explain what could be going on, what you "
    "can check on your side, and what my options are if it never arrives.",
    "I want to change the shipping address on an order I placed an hour ago. Describe the process in "
    "detail and tell me what happens if the order has already been packed.",
    "the wireless headphones I bought will not pair with my laptop. Give me a detailed troubleshooting "
    "guide, starting with the simplest fixes and ending with a warranty claim.",
    "I forgot my password and the reset email never comes. Explain every step I can try to get back "
    "into my account, including what to do if my email address has changed.",
    "please compare your standard, express and overnight shipping options for a heavy parcel, and "
    "explain how each one affects the delivery date and the total price.",
    "a coupon code from your newsletter is rejected at checkout. List the reasons this might happen, "
    "how I can check each one, and how to get the discount applied anyway.",
]


def prompt_text(n: int) -> str:
    """Prompt number n. The order number comes first, so two prompts never share a
    prefix-cache block beyond the system prompt (every prefill computes its whole prompt,
    in the platform and in the engine alike)."""
    return f"Order {10000 + n}: {QUESTIONS[n % len(QUESTIONS)]}"


def prompt_ids(tokenizer, tenant: BenchTenant, text: str, *, max_context: int) -> list[int]:
    """The prompt the CPU tier builds for a new conversation's first message (same
    function, same arguments as inference.pipeline.cpu.preprocess_request)."""
    from inference.text.prompting import build_prompt

    room = max(16, max_context - tenant.max_output_tokens)
    return build_prompt(tokenizer, system_prompt=tenant.system_prompt or None,
                        history=[{"role": "user", "content": text}],
                        max_prompt_tokens=min(tenant.max_prompt_tokens, room)).token_ids


# -- the websocket load client -------------------------------------------------------------


@dataclass
class Trace:
    """One request as a client saw it. Times are time.time() seconds."""

    client: int
    seq: int
    prompt_n: int
    tenant: str = ""
    t_send: float = 0.0
    t_start: float | None = None  # the `start` frame (the request was admitted and stored)
    t_first: float | None = None  # the first token frame
    t_end: float | None = None  # the `end` (or error) frame
    token_times: list[float] = field(default_factory=list)
    message_id: str | None = None
    n_tokens: int = 0
    usage: dict | None = None
    error: str | None = None  # an error code (rate_limited, timeout, ...)
    retry_after: float | None = None
    stages: dict = field(default_factory=dict)  # filled in afterwards (stage_times)

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_first is not None

    @property
    def ttft_ms(self) -> float | None:
        return (self.t_first - self.t_send) * 1e3 if self.t_first is not None else None

    @property
    def itl_ms(self) -> list[float]:
        ts = self.token_times
        return [(b - a) * 1e3 for a, b in zip(ts, ts[1:], strict=False)]

    @property
    def tpot_ms(self) -> float | None:
        """Mean time per output token after the first."""
        ts = self.token_times
        return (ts[-1] - ts[0]) * 1e3 / (len(ts) - 1) if len(ts) > 1 else None

    @property
    def e2e_tps(self) -> float | None:
        """Output tokens per second of the whole request, send to last token."""
        if not self.token_times:
            return None
        dt = self.token_times[-1] - self.t_send
        return len(self.token_times) / dt if dt > 0 else None

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("token_times")
        d.update(ttft_ms=self.ttft_ms, tpot_ms=self.tpot_ms, e2e_tps=self.e2e_tps,
                 itl_first_ms=self.itl_ms[0] if self.itl_ms else None)
        return d


class ChatClient:
    """One websocket connection speaking the chat protocol (see tandem/chat/consumers.py)."""

    def __init__(self, ws_url: str, key: str, *, origin: str = ORIGIN, timeout: float = 180):
        import websockets.sync.client as ws_client

        self.timeout = timeout
        self.conn = ws_client.connect(f"{ws_url}/ws/chat/?key={key}", origin=origin, open_timeout=30,
                                      max_size=2**22)

    def close(self) -> None:
        self.conn.close()

    def ask(self, trace: Trace, text: str) -> Trace:
        """Send `text` as a new conversation; fill `trace` until the reply ends."""
        trace.t_send = time.time()
        self.conn.send(json.dumps({"type": "message", "text": text, "conversation": None}))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                trace.error = trace.error or "client_timeout"
                return trace
            try:
                raw = self.conn.recv(timeout=left)
            except TimeoutError:
                trace.error = "client_timeout"
                return trace
            now = time.time()
            frame = json.loads(raw)
            kind = frame.get("type")
            if kind == "start":
                trace.t_start, trace.message_id = now, frame["message"]
            elif kind == "token" and frame.get("message") == trace.message_id:
                if trace.t_first is None:
                    trace.t_first = now
                trace.token_times.append(now)
                trace.n_tokens += 1
            elif kind == "end" and frame.get("message") == trace.message_id:
                trace.t_end, trace.usage = now, frame.get("usage")
                return trace
            elif kind == "error" and (trace.message_id is None or frame.get("message") == trace.message_id):
                # before `start`: the request was refused (quota, validation); after: it failed
                trace.t_end, trace.error = now, frame.get("code", "error")
                trace.retry_after = frame.get("retry_after")
                return trace


def closed_loop(
    ws_url: str, key: str, *, clients: int, requests_per_client: int | None = None,
    stop: threading.Event | None = None, next_prompt: Callable[[], int], tenant: str = "",
    on_trace: Callable[[Trace], None] | None = None, retry_refused: bool = False,
    think_s: float = 0.0,
) -> list[Trace]:
    """`clients` websocket connections, each sending one request at a time (the next as
    soon as the previous reply ends, after `think_s`), `requests_per_client` each or
    until `stop` is set. With `retry_refused`, a refused request (rate_limited) is
    recorded and retried after its retry_after (a well-behaved client); otherwise it
    counts as a request. Connections are opened before the first request is sent."""
    traces: list[Trace] = []
    lock = threading.Lock()
    conns = [ChatClient(ws_url, key) for _ in range(clients)]
    barrier = threading.Barrier(clients)

    def run(i: int) -> None:
        conn = conns[i]
        barrier.wait()
        done = 0
        try:
            while (requests_per_client is None or done < requests_per_client) and not (stop and stop.is_set()):
                n = next_prompt()
                tr = conn.ask(Trace(client=i, seq=done, prompt_n=n, tenant=tenant), prompt_text(n))
                with lock:
                    traces.append(tr)
                if on_trace:
                    on_trace(tr)
                if tr.error == "rate_limited" and retry_refused:
                    wait = min(max(tr.retry_after or 0.5, 0.05), 2.0)
                    (stop.wait(wait) if stop else time.sleep(wait))
                    continue
                done += 1
                if think_s:
                    (stop.wait(think_s) if stop else time.sleep(think_s))
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(i,), name=f"ws-client-{i}", daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return traces


class Counter:
    """A thread-safe source of unique prompt numbers."""

    def __init__(self, start: int = 0):
        self._n = start
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self.reserve(1)

    def reserve(self, count: int) -> int:
        """Take `count` consecutive numbers; returns the first."""
        with self._lock:
            n = self._n
            self._n += count
            return n


# -- where the time went --------------------------------------------------------------------


def _entry_ms(entry_id) -> float:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.split("-", 1)[0]) / 1e3


def stage_times(client, trace: Trace) -> dict:
    """Split a request's TTFT by what it left in Redis (no extra instrumentation):

    web       client send -> spec.enqueued_at (consumer, executor thread, token
              estimate; set just before the admission script, which stores the spec)
    cpu       -> the `status: prefilling` record (admission, Celery publish, broker, CPU
              task up to its hand-off report; ms precision)
    prefill   -> token 0's `ts` (broker, prefill queue, batcher, forward, detokenize)
    deliver   -> the client's first token frame (XADD, the consumer's XREAD, websocket)
    And from the `end` record: engine, the prefill engine's share of the TTFT (waiting for
    a batch, forward, sampling), and outside_engine = TTFT - engine: the platform's own
    time, whatever the forward took. Also returns the spec's prompt ids (to check the
    engine-alone run used the same)."""
    from inference.wire import keys
    from inference.wire.spec import load
    from inference.wire.streams import decode_record

    if trace.message_id is None:
        return {}
    spec = load(client, trace.message_id)
    out: dict = {}
    t_enq = spec.enqueued_at if spec else None
    t_cpu = t_tok0 = engine_ms = None
    for entry_id, fields in client.xrange(keys.stream(trace.message_id)):
        rec = decode_record(fields)
        if rec["type"] == "status" and rec.get("state") == "prefilling" and t_cpu is None:
            t_cpu = _entry_ms(entry_id)
        elif rec["type"] == "token" and rec["index"] == 0:
            t_tok0 = float(rec["ts"])
        elif rec["type"] == "end":
            engine_ms = (rec.get("timings") or {}).get("prefill_engine_ms")
    points = [("web", t_enq), ("cpu", t_cpu), ("prefill", t_tok0), ("deliver", trace.t_first)]
    prev = trace.t_send
    for name, t in points:
        out[f"{name}_ms"] = (t - prev) * 1e3 if (t is not None and prev is not None) else None
        prev = t if t is not None else None
    out["engine_ms"] = engine_ms
    out["outside_engine_ms"] = trace.ttft_ms - engine_ms if (engine_ms is not None and trace.ttft_ms) else None
    out["prompt_ids"] = spec.prompt_token_ids if spec else None
    return out


def fill_stages(client, traces: Iterable[Trace]) -> None:
    for tr in traces:
        if tr.ok:
            tr.stages = stage_times(client, tr)


def stage_summary(traces: Iterable[Trace]) -> dict:
    ok = [t for t in traces if t.ok and t.stages]
    return {k: summarize(t.stages.get(f"{k}_ms") for t in ok)
            for k in ("web", "cpu", "prefill", "deliver", "engine", "outside_engine")}


class RedisMonitor:
    """Redis MONITOR in a background thread: (server time, command line) for every
    command any client sends. Each line is kept up to `keep` bytes (KV payloads are
    megabytes). Costs Redis some CPU per command: use it for light-load profiling."""

    def __init__(self, url: str, *, keep: int = 3000):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.addr = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.keep = keep
        self.lines: list[tuple[float, str]] = []
        self._sock = socket.create_connection(self.addr)
        self._sock.sendall(b"MONITOR\r\n")
        self._file = self._sock.makefile("rb")
        if not self._file.readline().startswith(b"+OK"):
            raise RuntimeError("MONITOR refused")
        self._thread = threading.Thread(target=self._run, name="redis-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                line = self._file.readline()
                if not line:
                    return
                head = line[: self.keep].decode("utf-8", "replace")
                if head.startswith("+"):
                    t, _, rest = head[1:].partition(" ")
                    try:
                        self.lines.append((float(t), rest.rstrip("\r\n")))
                    except ValueError:
                        pass
        except OSError:
            return

    def stop(self) -> list[tuple[float, str]]:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=5)
        return self.lines


_CMD_RE = re.compile(r'^\[\d+ [^\]]*\] "([A-Za-z]+)"(?: "([^"]*)")?')


def monitor_timeline(lines: list[tuple[float, str]], trace: Trace) -> dict:
    """One request's milestones from MONITOR lines (server time, seconds):

    admit        the web tier's quota script (admission, which stores the spec)
    web_spec     the script's SET of the request spec (before the message rows are written)
    cpu_enqueue  LPUSH of the preprocess task onto `cpu`
    stored       the web tier reported its rows committed (its RPUSH to the hand-off list;
                 beside the CPU tier)
    cpu_fetched  the CPU worker took it off the queue (kombu's unacked bookkeeping)
    cpu_start    the task body started (GET of the request spec)
    cpu_spec     the CPU tier stored the prompt ids (with its hand-off report)
    cpu_done     LPUSH of the prefill task (by the CPU tier, or by the web tier when its
                 commit came second)
    pf_fetched   the prefill worker took it off the queue
    pf_start     the prefill task body started (GET of the spec)
    tok0         XADD of token 0 to the stream (after the forward and detokenizing)
    """
    rid = trace.message_id
    if not rid:
        return {}
    spec_key, stream_key, handoff_key = f"tandem:req:{rid}", f"tandem:stream:{rid}", f"tandem:handoff:{rid}"
    marks: dict[str, float] = {}
    gets = sets = 0
    for t, line in lines:
        if t < trace.t_send - 1 or rid not in line:
            continue
        m = _CMD_RE.match(line)
        if not m:
            continue
        cmd, key = m.group(1).upper(), m.group(2) or ""
        if cmd in ("EVALSHA", "EVAL") and "web_spec" not in marks:
            marks["admit"] = t  # the last script before the spec is stored: admission
        elif cmd == "SET" and key == spec_key:
            sets += 1
            marks.setdefault("web_spec" if sets == 1 else "cpu_spec", t)
        elif cmd == "LPUSH" and key.split(":")[0] == "cpu":
            marks.setdefault("cpu_enqueue", t)
        elif cmd == "RPUSH" and key == handoff_key and '\\"party\\": \\"web\\"' in line:
            marks.setdefault("stored", t)
        elif cmd == "LPUSH" and key.startswith("prefill."):
            marks.setdefault("cpu_done", t)
        elif cmd in ("HSET", "ZADD") and "unacked" in key:
            if "cpu_enqueue" in marks and "cpu_done" not in marks:
                marks.setdefault("cpu_fetched", t)
            elif "cpu_done" in marks:
                marks.setdefault("pf_fetched", t)
        elif cmd == "GET" and key == spec_key:
            gets += 1
            marks.setdefault("cpu_start" if gets == 1 else "pf_start", t)
        elif cmd == "XADD" and key == stream_key and '"type" "token"' in line and '"index" "0"' in line:
            marks.setdefault("tok0", t)
            break
    return marks


MONITOR_STAGES = [
    ("ingress", "t_send", "admit", "websocket frame -> consumer -> executor thread; route, spec, token estimate"),
    ("web_spec", "admit", "web_spec", "admission script until it stores the spec (and listener lease)"),
    ("web_publish", "web_spec", "cpu_enqueue", "Celery publish to the CPU tier"),
    ("web_store", "cpu_enqueue", "stored", "(beside the CPU tier) message rows, COMMIT, hand-off report"),
    ("cpu_broker", "cpu_enqueue", "cpu_fetched", "Redis broker -> CPU worker"),
    ("cpu_dispatch", "cpu_fetched", "cpu_start", "Celery starts the task"),
    ("cpu_prompt", "cpu_start", "cpu_spec", "spec + cancel flag (one round trip), build_prompt; no DB reads"),
    ("cpu_publish", "cpu_spec", "cpu_done", "hand-off report (spec, status), Celery publish to prefill"),
    ("pf_broker", "cpu_done", "pf_fetched", "Redis broker -> prefill worker"),
    ("pf_dispatch", "pf_fetched", "pf_start", "Celery hands the task to a pool thread"),
    ("pf_task", "pf_start", "tok0", "spec, batcher, forward + sampling (engine), detokenize, XADD"),
    ("deliver", "tok0", "t_first", "XREAD wakes the consumer -> websocket frame -> client"),
]
# Left out of the platform's own time: web_store runs beside the CPU tier, and pf_task
# holds the engine's forward.
MONITOR_UNCOUNTED = {"web_store", "pf_task"}


def monitor_stages(marks: dict, trace: Trace) -> dict:
    points = {**marks, "t_send": trace.t_send, "t_first": trace.t_first}
    out = {}
    for name, a, b, _ in MONITOR_STAGES:
        out[name] = (points[b] - points[a]) * 1e3 if points.get(a) is not None and points.get(b) is not None else None
    return out


def monitor_profile(lines: list[tuple[float, str]], traces: Iterable[Trace]) -> dict:
    """Per-stage summaries (ms) of `traces` from MONITOR lines, and each request's marks."""
    first_tokens = [t for t, ln in lines if '"XADD"' in ln and '"type" "token" "index" "0"' in ln]
    per_request = []
    for tr in traces:
        if tr.ok:
            marks = monitor_timeline(lines, tr)
            a, b = marks.get("pf_start"), marks.get("tok0")
            # other requests' first tokens produced while this one was in its prefill task:
            # prompts it shared a forward with, or waited behind
            others = sum(1 for t in first_tokens if a is not None and b is not None and a < t < b)
            per_request.append({"ttft_ms": tr.ttft_ms, "marks": marks, "stages_ms": monitor_stages(marks, tr),
                                "other_prefills_during": others})
    return {
        "requests": len(per_request),
        "other_prefills_during_mean": statistics.fmean(r["other_prefills_during"] for r in per_request)
        if per_request else None,
        "monitor_lines": len(lines),
        "ttft_ms": summarize(r["ttft_ms"] for r in per_request),
        "stages": {name: summarize(r["stages_ms"].get(name) for r in per_request) for name, *_ in MONITOR_STAGES},
        "per_request": per_request,
    }


@contextmanager
def monitored(redis_url: str):
    """Redis MONITOR for the duration of the block; yields a list filled at the end."""
    lines: list[tuple[float, str]] = []
    mon = RedisMonitor(redis_url)
    try:
        yield lines
    finally:
        time.sleep(0.2)  # the last commands reach the monitor
        lines.extend(mon.stop())


# -- sampling the workers' state while a phase runs ------------------------------------------


class StateSampler:
    """Every `interval` s: each model worker's heartbeat (batch, engine queue, prefill
    queue) and the Celery queues' lengths (every priority list of each queue)."""

    def __init__(self, redis_url: str, queues: list[str], *, interval: float = 0.5):
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.queues, self.interval = queues, interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="state-sampler", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from inference.wire.workers import live_workers

        while not self._stop.wait(self.interval):
            try:
                sample = {"t": time.time(), "queues": {}, "workers": {}}
                pipe = self.client.pipeline(transaction=False)
                names = [q if p == 0 else f"{q}:{p}" for q in self.queues for p in range(10)]
                for n in names:
                    pipe.llen(n)
                lengths = pipe.execute()
                for q in self.queues:
                    sample["queues"][q] = sum(n for name, n in zip(names, lengths, strict=True)
                                              if name == q or name.startswith(q + ":"))
                for w in live_workers(self.client):
                    key = f"{w.get('role')}.{w.get('pool')}"
                    sample["workers"][key] = {k: w.get(k) for k in ("batch", "queue_depth", "prefill_queue",
                                                                     "active_requests", "tokens_per_s")}
                self.samples.append(sample)
            except Exception:  # noqa: BLE001 - a sampler must never take the benchmark down
                continue

    def summary(self) -> dict:
        out: dict = {}
        for q in self.queues:
            out[f"queue:{q}"] = summarize(s["queues"].get(q) for s in self.samples)
        keys = {(w, k) for s in self.samples for w, d in s["workers"].items() for k in d}
        for w, k in sorted(keys):
            out[f"{w}:{k}"] = summarize(s["workers"].get(w, {}).get(k) for s in self.samples)
        return out
