"""`make run` (devstack) as a person runs it: it comes up with the embedded Redis,
answers the official `openai` client through every tier with the demo key it prints,
and a Ctrl-C in the terminal stops every process cleanly."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import openai
import pytest

from devstack import embedded_redis
from devstack.processes import free_port
from tests.conftest import BASE_DIR

pytestmark = pytest.mark.timeout(400)  # migrations, seeding and two model loads, then a stop


class _Output:
    """The run's terminal output, read on a thread so a wait can time out."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self._q.put(line)
        self._q.put(None)

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                return False
            self.lines.append(line)
            if text in line:
                return True
        return False

    def drain(self) -> str:
        while (line := self._q.get(timeout=30)) is not None:
            self.lines.append(line)
        return "".join(self.lines)


def test_make_run_answers_and_stops_cleanly_on_ctrl_c(tmp_path):
    port, redis_port = free_port(count=2), free_port()  # two web processes, on consecutive ports
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(TANDEM_PORT=str(port), TANDEM_EMBEDDED_REDIS_PORT=str(redis_port), TANDEM_WEB_PROCESSES="2",
               DATABASE_URL=f"sqlite:///{tmp_path / 'devstack.sqlite3'}", PYTHONUNBUFFERED="1")
    # Its own process group, as a shell gives a foreground job: the Ctrl-C below goes to
    # the whole group, as a terminal's does.
    proc = subprocess.Popen([sys.executable, "-m", "devstack"], cwd=BASE_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    out = _Output(proc)
    try:
        assert out.wait_for("[tandem] ready", timeout=300), "".join(out.lines)
        assert out.wait_for("demo secret key", timeout=10)
        secret = re.search(r"demo secret key: (\S+)", out.lines[-1]).group(1)

        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0)
        reply = client.chat.completions.create(
            model=client.models.list().data[0].id, messages=[{"role": "user", "content": "Hello! Who are you?"}], max_tokens=8)
        assert reply.choices[0].message.content
        assert reply.usage.completion_tokens >= 1
        # The second web process (TANDEM_WEB_PROCESSES=2) serves the same platform.
        second = openai.OpenAI(base_url=f"http://127.0.0.1:{port + 1}/v1", api_key=secret, max_retries=0)
        again = second.chat.completions.create(
            model=second.models.list().data[0].id, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert again.usage.completion_tokens >= 1

        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = out.drain()
    assert "[tandem] stopped" in log
    # The embedded Redis outlived the workers that use it (it is stopped last): no worker
    # logged a lost connection while shutting down.
    assert "Traceback" not in log, log[-4000:]
    assert not embedded_redis.is_up(f"redis://127.0.0.1:{redis_port}/0")
    # No process of the run is left running. An exited child that init has not reaped yet
    # (a zombie: its exit status kept for a parent) is not one.
    assert not _running_in_group(proc.pid)


def _running_in_group(pgid: int) -> list[str]:
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(" ".join(p.info["cmdline"] or [])[:120])
        except (ProcessLookupError, psutil.Error):
            continue
    return left
