"""A platform of its own for the fault tests, whose workers they kill: daphne, a CPU
worker, a prefill worker and two decode workers on the real model in float32 (greedy
output is compared token for token), on a Redis database of its own (so the session's
other platform never takes its tasks).

Its settings make faults quick to see: the broker's visibility timeout is 4 s (long
replies outlast it, so redelivered live tasks are exercised in every test), a reply
may migrate once, and a request waits 30 s for a worker before it fails."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from contextlib import contextmanager

import pytest
import redis as redis_lib

from devstack.processes import database_url, new_log_dir, running_platform, start_worker, wait_for
from inference.wire import keys
from inference.wire.workers import live_workers
from tests.platform_fixtures import LOAD_GENERATOR_LIMITS, chat_socket, settle

COMMON = {"TANDEM_DTYPE": "float32", "TANDEM_THREADS": "1"}
ENVS = {
    "cpu": ({"CONCURRENCY": "1"}, 1),
    "prefill": ({**COMMON, "TANDEM_PREFILL_MAX_BATCH": "4"}, 8),
    "decode": ({**COMMON, "TANDEM_MAX_BATCH": "12"}, 24),
}
SETTINGS = {**LOAD_GENERATOR_LIMITS, "TANDEM_QUEUE_TIMEOUT_S": "30", "TANDEM_STALL_TIMEOUT_S": "60", "TANDEM_MIGRATION_LIMIT": "1",
            "TANDEM_BROKER_VISIBILITY_TIMEOUT_S": "4"}


# Package-scoped: it stops once the fault tests are done. Its CPU worker shares the test
# database but not the session's Redis, so left running it would go on doing the CPU
# tier's scheduled rounds (webhook retries among them) into a broker nobody else reads.
@pytest.fixture(scope="package")
def faults_platform(django_db_setup, django_db_blocker, model_dir):
    from django.db import connection

    base = os.environ["REDIS_URL"].rsplit("/", 1)[0]
    redis_lib.Redis.from_url(f"{base}/3").flushdb()  # what an earlier session left behind
    workers = [(role, "shared", {**env, "CONCURRENCY": str(conc), "NAME": f"{role}-0"})
               for role, (env, conc) in ENVS.items()]
    workers.append(("decode", "shared", {**ENVS["decode"][0], "CONCURRENCY": "24", "NAME": "decode-1"}))
    with running_platform(db_url=database_url(connection.settings_dict), model_dir=model_dir, workers=workers,
                          extra_env={**SETTINGS, "REDIS_URL": f"{base}/3", "CELERY_BROKER_URL": f"{base}/3"},
                          log_dir=new_log_dir("faults")) as p:
        p.client = redis_lib.Redis.from_url(p.env["REDIS_URL"])
        yield p


_counter = iter(range(2, 10_000))


@pytest.fixture(autouse=True)
def faults_platform_idle(request):
    """As tests.platform_fixtures.platform_idle, for this platform: its workers hold
    nothing when the test's database is flushed (this teardown runs first)."""
    if "faults_platform" not in request.fixturenames:
        yield
        return
    p = request.getfixturevalue("faults_platform")
    request.getfixturevalue("transactional_db")
    yield
    settle(p.client, timeout=120)


def workers_of(platform, role: str) -> list[str]:
    """Process names of the platform's live workers of `role`."""
    return [n for n, p in platform.procs.items() if n.startswith(f"{role}-") and p.poll() is None]


def ensure_workers(platform, role: str, count: int) -> list[str]:
    """Exactly `count` live workers of `role` (started or stopped as needed)."""
    names = workers_of(platform, role)
    for name in names[count:]:
        platform.stop(name)
    env, conc = ENVS[role]
    started = [start_worker(platform, role=role, pool="shared", env=env, concurrency=conc, name=f"{role}-{next(_counter)}",
                            wait=False) for _ in range(count - len(names))]
    pids = {platform.procs[n].pid for n in started}
    wait_for(lambda: pids <= {w.get("pid") for w in live_workers(platform.client)}, timeout=180,
             what=f"{role} workers", procs={n: platform.procs[n] for n in started}, log_dir=platform.log_dir)
    return workers_of(platform, role)[:count]


def held(platform, proc_name: str) -> set[str]:
    """The requests the worker process `proc_name` owns now."""
    name = platform.worker_name(proc_name, platform.client)
    return {r.decode() for r in platform.client.smembers(keys.worker_requests(name))} if name else set()


def stream_tokens(platform, request_id: str) -> list[dict]:
    from inference.wire import streams

    return [r for r in streams.read_all(platform.client, request_id) if r["type"] == "token"]


def scrape(platform, role: str) -> str:
    """The metrics of every live worker of `role`, concatenated."""
    out = []
    for w in live_workers(platform.client, role=role):
        if w.get("metrics_port"):
            with urllib.request.urlopen(f"http://127.0.0.1:{w['metrics_port']}/metrics", timeout=10) as r:
                out.append(r.read().decode())
    return "\n".join(out)


def counter_sum(text: str, family: str, **labels) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(family + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Chat(threading.Thread):
    """One websocket chat asking one question, its frames recorded as they arrive."""

    def __init__(self, platform, key: str, text: str):
        super().__init__(daemon=True)
        self.platform, self.key, self.text = platform, key, text
        self.frames: list[dict] = []
        self.message_id: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with chat_socket(self.platform, self.key) as chat:
                chat.send({"type": "message", "text": self.text, "conversation": None})
                while True:
                    frame = chat.recv(timeout=240)
                    self.frames.append(frame)
                    if frame["type"] == "start":
                        self.message_id = frame["message"]
                    if frame.get("message") == self.message_id and frame["type"] in ("end", "error"):
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    @property
    def tokens(self) -> list[dict]:
        return [f for f in self.frames if f["type"] == "token"]

    @property
    def last(self) -> dict:
        return self.frames[-1] if self.frames else {}


@contextmanager
def chats(platform, key: str, texts: list[str]):
    started = [Chat(platform, key, t) for t in texts]
    for c in started:
        c.start()
    yield started
    for c in started:
        c.join(timeout=300)
        assert not c.is_alive(), f"chat {c.text!r} did not end: {c.frames[-3:]}"
        assert c.error is None, repr(c.error)


def until(predicate, *, timeout: float, what: str):
    """Wait on a condition (polling), failing with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def dumps(frames: list[dict]) -> str:
    return json.dumps(frames[-6:], indent=1)
