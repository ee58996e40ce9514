"""`make run` keeps its processes up: a process that exits is started again (backoff,
restart count, the reason printed) and the platform keeps serving."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import openai
import pytest
import redis as redis_lib

from devstack.processes import free_port
from devstack.supervise import BACKOFF_FIRST_S, Service, Supervisor, exit_reason
from inference.engine.tiny import build_tiny_model
from inference.wire.workers import live_workers
from tests.conftest import BASE_DIR
from tests.test_devstack import _Output

from .conftest import until


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_process_that_exits_is_started_again_with_a_growing_backoff_and_its_reason(tmp_path):
    said, clock = [], Clock()
    svc = Service("flaky", [sys.executable, "-c", "import sys; sys.exit(3)"])
    steady = Service("steady", [sys.executable, "-c", "import time; time.sleep(600)"])
    sup = Supervisor([svc, steady], cwd=tmp_path, base_env=dict(os.environ), say=said.append, clock=clock)
    sup.start_all()
    try:
        first_pid = svc.proc.pid
        until(lambda: svc.proc.poll() is not None, timeout=30, what="the process to exit")
        sup.poll()
        assert said[-1] == f"flaky (pid {first_pid}) exited: exit status 3; restarting in 1 s (restart 1)"
        sup.poll()
        assert svc.proc.pid == first_pid  # not before its backoff
        clock.now += BACKOFF_FIRST_S
        sup.poll()
        assert svc.proc.pid != first_pid and svc.restarts == 1
        assert said[-1] == f"restarted flaky (pid {svc.proc.pid}, restart 1)"
        until(lambda: svc.proc.poll() is not None, timeout=30, what="the process to exit again")
        sup.poll()
        assert said[-1].endswith("restarting in 2 s (restart 2)")  # doubled
        assert steady.proc.poll() is None and steady.restarts == 0  # the others go on
    finally:
        sup.stop_all(timeout=5)
    assert exit_reason(-signal.SIGKILL) == "killed by SIGKILL"


@pytest.mark.timeout(500)
def test_make_run_restarts_a_killed_decode_worker_and_keeps_serving(tmp_path):
    tiny = build_tiny_model(tmp_path / "tiny")
    port, redis_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TANDEM_PORT=str(port), TANDEM_EMBEDDED_REDIS_PORT=str(redis_port), TANDEM_MODEL=str(tiny),
               DATABASE_URL=f"sqlite:///{tmp_path / 'devstack.sqlite3'}", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "devstack"], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out = _Output(proc)
    try:
        assert out.wait_for("[tandem] ready", timeout=300), "".join(out.lines)
        assert out.wait_for("demo secret key", timeout=10)
        secret = re.search(r"demo secret key: (\S+)", out.lines[-1]).group(1)
        client = redis_lib.Redis.from_url(f"redis://127.0.0.1:{redis_port}/0")
        [decode] = live_workers(client, role="decode")
        os.kill(decode["pid"], signal.SIGKILL)

        assert out.wait_for("[tandem] decode-worker", timeout=60), "".join(out.lines[-20:])
        assert f"decode-worker (pid {decode['pid']}) exited: killed by SIGKILL; restarting in 1 s (restart 1)" \
            in out.lines[-1]
        assert out.wait_for("[tandem] restarted decode-worker", timeout=60)
        until(lambda: [w for w in live_workers(client, role="decode") if w["pid"] != decode["pid"]], timeout=180,
              what="the restarted decode worker's heartbeat")

        api = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=120)
        reply = api.chat.completions.create(model=api.models.list().data[0].id, max_tokens=8,
                                            messages=[{"role": "user", "content": "Hello?"}])
        assert reply.usage.completion_tokens >= 1
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "[tandem] stopped" in out.drain()
