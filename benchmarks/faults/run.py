"""`python -m benchmarks faults`: kill a worker of the running platform mid-load (a real
SIGKILL) and see what the visitors saw, as NVIDIA Dynamo's fault tests report it.

For each scenario, `--clients` websocket chats each ask `--requests` long questions in a
row; during the first round, once the victim holds requests (read from the ownership
records in Redis), it is killed:

- decode kill (disaggregated): the decode worker holding the most streams, once every
  stream has tokens; its replies continue on the other decode worker;
- prefill kill: a prefill worker holding prompts not yet answered (long prompts);
- CPU kill: the CPU worker frozen (SIGSTOP) while it holds a request, then killed;
- colocated kill, and CPU kill in colocated mode.

Each tier that loses a worker runs two (the victim's peer takes over); `--victims` picks
the scenarios by the tier killed, and `--quick` runs the decode kill alone on the tiny
model. Reported per scenario:
requests completed / total, duplicated and missing token indices (as the clients saw
them), how many replies the victim held, and their recovery time: from the kill to the
next token each of them received (p50, max), plus the decode workers' KV recompute time
(tandem_migration_recompute_seconds). JSON goes to var/bench/faults-<stamp>.json;
results and the machine they ran on: docs/benchmarks-faults.md.

Benchmarks, not tests: nothing here asserts. The platform runs with the default settings
(migration limit 3, visibility timeout 60 s, queue timeout 120 s)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..machine import measured_on
from ..paths import BENCH_DIR
from ..quick import add_quick_options, parse_quick
from ..report import say, table, write_json
from ..stack import site as platform_site
from ..stack.site import bench_site, start_run
from ..stack.tenancy import ORIGIN, make_tenant
from ..stats import percentile


@contextmanager
def platform_up(site, workers: list[tuple[str, str, dict]]):
    """daphne and these `workers` (two of each tier, to kill one), logs under the run's
    directory (devstack.processes.running_platform)."""
    from devstack.processes import running_platform

    say(f"starting daphne + {', '.join(env.get('NAME', role) for role, _, env in workers)} (logs: {site.log_dir})")
    with running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=workers,
                          log_dir=site.log_dir) as p:
        yield p

QUESTIONS = [
    "Write a long story about a dragon who learns to bake bread.",
    "Explain in detail how a lighthouse works, step by step.",
    "Describe your ideal weekend in the mountains, with many details.",
    "Tell me a long tale about a sailor lost at sea.",
    "Write a detailed guide to planting a vegetable garden.",
    "Describe the history of the bicycle at length.",
    "Write a long letter to a friend about moving to a new city.",
    "Explain how bread rises, in as much detail as you can.",
]
PADDING = " Please be thorough and consider every aspect of it." * 12  # for prefill kills: slower prompts
MODES = {"disaggregated": ("cpu", "prefill", "decode"), "colocated": ("cpu", "colocated")}
SCENARIOS = [("decode kill", "disaggregated", "decode"), ("prefill kill", "disaggregated", "prefill"),
             ("CPU kill", "disaggregated", "cpu"), ("colocated kill", "colocated", "colocated"),
             ("CPU kill", "colocated", "cpu")]


@dataclass
class Reply:
    client: int
    message_id: str | None = None
    frames: list[tuple[float, dict]] = field(default_factory=list)  # (arrival time, frame)

    @property
    def tokens(self) -> list[tuple[float, int]]:
        return [(t, f["index"]) for t, f in self.frames if f["type"] == "token"]

    @property
    def ended(self) -> str | None:
        last = self.frames[-1][1] if self.frames else {}
        if last.get("type") == "end":
            return "end"
        return last.get("code") if last.get("type") == "error" else None


class Load:
    """`clients` chats, each asking `requests` questions one after another."""

    def __init__(self, ws_url: str, key: str, *, clients: int, requests: int, padding: str = ""):
        self.replies: list[Reply] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(ws_url, key, i, requests, padding), daemon=True)
                        for i in range(clients)]
        for t in self.threads:
            t.start()

    def _client(self, ws_url: str, key: str, i: int, requests: int, padding: str) -> None:
        import websockets.sync.client as ws_client

        with ws_client.connect(f"{ws_url}/ws/chat/?key={key}", origin=ORIGIN, open_timeout=30) as conn:
            for n in range(requests):
                reply = Reply(client=i)
                with self.lock:
                    self.replies.append(reply)
                conn.send(json.dumps({"type": "message", "text": QUESTIONS[(i + n) % len(QUESTIONS)] + padding,
                                      "conversation": None}))
                while True:
                    try:
                        frame = json.loads(conn.recv(timeout=300))
                    except TimeoutError:
                        reply.frames.append((time.time(), {"type": "error", "code": "client_timeout"}))
                        break
                    if frame["type"] == "start":
                        reply.message_id = frame["message"]
                    if frame.get("message") != reply.message_id:
                        continue
                    reply.frames.append((time.time(), frame))
                    if frame["type"] in ("end", "error"):
                        break

    def current(self) -> list[Reply]:
        with self.lock:
            return [r for r in self.replies if r.message_id and r.ended is None]

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=900)


def _held(client, worker: dict) -> set[str]:
    from inference.wire import keys

    return {r.decode() for r in client.smembers(keys.worker_requests(worker["name"]))}


def _choose_victim(client, load: Load, role: str, clients: int, since: float) -> tuple[dict, set[str]] | None:
    """The worker to kill now and the requests it holds (None while it is too early): for
    decode and colocated, the one holding the most streams that have tokens, once it holds
    half the clients' (or any, after 30 s); for prefill and CPU, one holding a request."""
    from inference.wire.workers import live_workers

    tokens = {r.message_id: len(r.tokens) for r in load.current()}
    best = None
    for w in live_workers(client, role=role):
        held = _held(client, w)
        if role in ("decode", "colocated"):
            held = {rid for rid in held if tokens.get(rid, 0) >= 3}
        if held and (best is None or len(held) > len(best[1])):
            best = (w, held)
    if best is None:
        return None
    if role in ("decode", "colocated") and len(best[1]) < max(1, clients // 2) and time.monotonic() - since < 30:
        return None
    return best


def _kill(client, role: str, worker: dict) -> tuple[float, set[str]] | None:
    """SIGKILL `worker`; returns the kill time and every request it held then. A CPU
    worker is frozen first and killed only if it still holds a request (its tasks last
    milliseconds); None if it no longer did."""
    pid = worker["pid"]
    if role == "cpu":
        os.kill(pid, signal.SIGSTOP)
    held = _held(client, worker)
    if role == "cpu" and not held:
        os.kill(pid, signal.SIGCONT)
        return None
    t = time.time()
    os.kill(pid, signal.SIGKILL)
    return t, held


def _recompute_seconds(client, role: str) -> tuple[float, int]:
    """Sum and count of tandem_migration_recompute_seconds over the live workers of `role`."""
    from inference.wire.workers import live_workers

    total, count = 0.0, 0
    for w in live_workers(client, role=role):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{w['metrics_port']}/metrics", timeout=10) as r:
                text = r.read().decode()
        except (OSError, KeyError):
            continue
        for line in text.splitlines():
            if line.startswith("tandem_migration_recompute_seconds_sum"):
                total += float(line.rsplit(" ", 1)[1])
            elif line.startswith("tandem_migration_recompute_seconds_count"):
                count += int(float(line.rsplit(" ", 1)[1]))
    return total, count


def run_scenario(p, client, key: str, *, name: str, mode: str, role: str, clients: int, requests: int,
                 replace: bool = True) -> dict:
    """One kill under load; with `replace`, a new worker takes the victim's place (for the
    next scenario on this platform)."""
    from devstack.processes import start_worker
    from inference.wire.workers import live_workers

    say(f"{name} ({mode}): {clients} clients x {requests} requests")
    before = _recompute_seconds(client, "decode" if mode == "disaggregated" else "colocated")
    load = Load(p.ws_url, key, clients=clients, requests=requests, padding=PADDING if role == "prefill" else "")
    killed = None
    deadline = time.monotonic() + 600
    victim: dict = {}
    started = time.monotonic()
    while killed is None and time.monotonic() < deadline and any(t.is_alive() for t in load.threads):
        choice = _choose_victim(client, load, role, clients, started)
        if choice is not None:
            killed = _kill(client, role, choice[0])
            if killed is not None:
                victim = choice[0]
        if killed is None:
            time.sleep(0.002 if role == "cpu" else 0.02)  # polling the victim's records
    if killed is not None:
        say(f"  killed {victim['name']} holding {len(killed[1])} request(s)")
    load.join()
    t_kill, affected = killed if killed else (None, set())
    replies = load.replies
    dup = missing = 0
    for r in replies:
        indices = [i for _, i in r.tokens]
        dup += len(indices) - len(set(indices))
        missing += (max(indices) + 1 - len(set(indices))) if indices else 0
    recoveries = []
    for r in replies:
        if r.message_id in affected and t_kill is not None:
            after = [t for t, _ in r.tokens if t > t_kill]
            if after:
                recoveries.append(after[0] - t_kill)
    after = _recompute_seconds(client, "decode" if mode == "disaggregated" else "colocated")
    n_recompute = after[1] - before[1]
    # Put the platform back as it was for the next scenario: a worker for the one killed.
    if killed is not None and replace:
        dead = [n for n, proc in p.procs.items() if proc.pid == victim["pid"]]
        for n in dead:
            p.procs.pop(n).wait(timeout=30)
        env = {**ENVS[role][0]}
        start_worker(p, role=role, pool="shared", env=env, concurrency=ENVS[role][1], name=f"{role}-r{int(t_kill)}")
        live = len(live_workers(client, role=role))
        say(f"  replaced it ({live} {role} workers live)")
    return {
        "scenario": name, "mode": mode, "clients": clients, "requests_per_client": requests,
        "total": len(replies), "completed": sum(1 for r in replies if r.ended == "end"),
        "errors": sorted({r.ended for r in replies if r.ended != "end"}, key=str),
        "duplicated_indices": dup, "missing_indices": missing, "affected": len(affected),
        "recovered": len(recoveries), "recovery_p50_s": percentile(recoveries, 50),
        "recovery_max_s": max(recoveries) if recoveries else None, "recoveries_s": recoveries,
        "kv_recompute_mean_ms": ((after[0] - before[0]) / n_recompute * 1000) if n_recompute else None,
        "kv_recomputes": n_recompute,
    }


ENVS = {  # role -> (worker env, Celery slots)
    "cpu": ({}, 1),
    "prefill": ({"TANDEM_THREADS": "1"}, 8),
    "decode": ({"TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "16"}, 16),
    "colocated": ({"TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "16"}, 16),
}


# --quick: the tiny model, one scenario (a decode worker killed), two chats of one
# question each; the tiny model's replies are long enough to be mid-stream at the kill.
QUICK = {"model": "tiny", "modes": "disaggregated", "victims": "decode", "clients": 2, "requests": 1,
         "max_tokens": 256}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks faults", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2, help="questions each client asks in a row")
    ap.add_argument("--max-tokens", type=int, default=64, help="the tenant's output maximum")
    ap.add_argument("--modes", default="disaggregated,colocated")
    ap.add_argument("--victims", default=",".join(sorted({role for _, _, role in SCENARIOS})),
                    help="the tiers whose worker is killed (default: every scenario's)")
    platform_site.add_site_options(ap)
    add_quick_options(ap, default_out=None)
    args = parse_quick(ap, argv, name="faults", default_out=None, quick_defaults=QUICK)
    victims = set(args.victims.split(","))
    unknown = victims - {role for _, _, role in SCENARIOS}
    if unknown:
        ap.error(f"unknown victims {sorted(unknown)}; choose from cpu, prefill, decode, colocated")
    doc = start_run("faults", argv, quick=args.quick)
    doc["settings"] = vars(args)
    results = []
    with bench_site("faults", args) as site:
        import redis

        from tenants.models import Allocation, ComputePool

        client = redis.Redis.from_url(site.redis_url)
        for mode in args.modes.split(","):
            tenant = make_tenant(f"faults-{mode}", quota={"max_output_tokens": args.max_tokens,
                                                          "requests_per_minute": 1000,
                                                          "max_concurrent_streams": 64})
            if mode == "colocated":
                pool, _ = ComputePool.objects.get_or_create(slug="shared", role="colocated")
                Allocation.objects.filter(tenant_id=tenant.tenant_id).update(prefill_pool=pool, decode_pool=pool)
            scenarios = [(name, role) for name, scenario_mode, role in SCENARIOS
                         if scenario_mode == mode and role in victims]
            if not scenarios:
                continue
            # Two workers of each tier that loses one (its peer takes over), one of the others.
            killed = {role for _, role in scenarios}
            workers = [(role, "shared", {**ENVS[role][0], "CONCURRENCY": str(ENVS[role][1]), "NAME": f"{role}-{i}"})
                       for role in MODES[mode] for i in range(2 if role in killed else 1)]
            with platform_up(site, workers) as p:
                for n, (name, role) in enumerate(scenarios):
                    results.append(run_scenario(p, client, tenant.widget_key, name=name, mode=mode, role=role,
                                                clients=args.clients, requests=args.requests,
                                                replace=n < len(scenarios) - 1))
    doc["results"] = results
    rows = [(r["scenario"], r["mode"], f"{r['clients']} x {r['requests_per_client']}",
             f"{r['completed']}/{r['total']}", f"{r['duplicated_indices']}/{r['missing_indices']}", r["affected"],
             r["recovery_p50_s"], r["recovery_max_s"], r["kv_recompute_mean_ms"]) for r in results]
    print(table(["scenario", "mode", "clients x requests", "completed", "dup/missing idx", "victim held",
                 "recovery p50 (s)", "recovery max (s)", "KV recompute (ms)"], rows, digits=2))
    print(f"\n{measured_on(doc['machine'])}")
    out = write_json(args.out or BENCH_DIR / f"faults-{time.strftime('%Y%m%d-%H%M%S')}.json", doc)
    print(f"JSON: {out}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
