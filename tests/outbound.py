"""Parts the tests of the CPU tier's outbound queues share (webhook deliveries, tenant
actions): a real Celery worker on a queue of its own, on the test database and Redis and
allowed to reach 127.0.0.1 by the operator setting; and that same setting in the test
process, where an endpoint's or an action's URL is checked when it is saved."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
import redis

from devstack.processes import _spawn, database_url, live_workers, new_log_dir, wait_for

# The outbound queues a worker of this test session consumes now: the platform's
# settle waits for their tasks before a test's database is flushed.
CONSUMED: set[str] = set()


@contextmanager
def outbound_worker(name: str, argv: list[str], **extra_env: str):
    """The worker `argv` (a queue.worker_argv) started as `name`, yielded once its
    heartbeat reaches Redis; stopped (terminated, killed if it lingers) on exit."""
    from django.db import connection

    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "tandem.settings", "TANDEM_ROLE": "cpu", "TANDEM_POOL": "shared",
           "TANDEM_OUTBOUND_ALLOW_HOSTS": "127.0.0.1", **extra_env}
    log_dir = new_log_dir(name)
    proc = _spawn(name, argv, env, log_dir)
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        wait_for(lambda: any(w.get("pid") == proc.pid for w in live_workers(client)), timeout=180,
                 what=f"the {name}'s heartbeat", procs={name: proc}, log_dir=log_dir)
        queue = argv[argv.index("-Q") + 1]
        CONSUMED.add(queue)
        try:
            yield proc
        finally:
            CONSUMED.discard(queue)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except Exception:
            proc.kill()
            proc.wait()


@pytest.fixture
def allow_loopback(settings):
    """The operator allows 127.0.0.1 (the test's server) in this process too."""
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
