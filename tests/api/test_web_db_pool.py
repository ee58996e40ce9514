"""A web process's database connections stay a small constant under a burst of REST
requests (tandem/webserver.py's pool), and a request that finds the pool full past its
wait is a 503 to retry, never a 500.

Each HTTP request runs its sync code on a thread of its own; before the pool, a burst of
a hundred requests over two web processes opened a connection each and passed
PostgreSQL's max_connections (CI saw one such 500)."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from django.db import connection

from devstack.processes import database_url, extra_web
from tests.api.test_rate_limits import body, burst, model_id
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


class ConnectionCounter:
    """The most connections the process `pid` held at once (its application_name, from
    tandem/settings.py), read from pg_stat_activity on a connection of its own until
    stopped."""

    def __init__(self, pid: int):
        self.name, self.most, self._stop = f"tandem-{pid}", 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as conn:
            while not self._stop.is_set():
                (count,) = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                        [self.name]).fetchone()
                self.most = max(self.most, count)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)


def web_pid(platform, url: str) -> int:
    return platform.procs[f"web-{url.rsplit(':', 1)[1]}"].pid


def test_a_burst_of_100_requests_holds_at_most_the_pools_connections_and_is_all_answered(platform):
    tenant = make_tenant(requests_per_minute=20, max_concurrent_streams=200, max_output_tokens=4)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    with extra_web(platform, DB_POOL_SIZE="4") as web, ConnectionCounter(web_pid(platform, web)) as counter:
        responses = asyncio.run(burst([web], key, [body(model)] * 100))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 20, statuses
    assert statuses.count(429) == 80, statuses
    assert 1 <= counter.most <= 4, counter.most  # the pool's size, whatever the burst


def test_a_request_that_waits_past_the_pools_wait_is_a_503_to_retry_not_a_500(platform):
    tenant = make_tenant(requests_per_minute=1000, max_concurrent_streams=200, max_output_tokens=4)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    # One connection, and no wait for it: requests arriving together find it taken.
    with extra_web(platform, DB_POOL_SIZE="1", DB_POOL_WAIT_S="0.001") as web:
        responses = asyncio.run(burst([web], key, [body(model)] * 60))
    statuses = {r.status_code for r in responses}
    assert statuses <= {200, 503}, sorted(statuses)
    busy = [r for r in responses if r.status_code == 503]
    assert busy, "no request found the pool full"
    assert busy[0].json()["error"]["code"] == "server_busy"
    assert busy[0].headers["retry-after"] == "1"


def test_streams_give_their_connection_back_while_they_stream(platform):
    """A stream's database work is done before its first token: it must not keep a
    pooled connection for as long as it streams, or a few long streams would starve
    every other request of the process."""
    tenant = make_tenant(requests_per_minute=1000, max_concurrent_streams=200, max_output_tokens=48)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    # One connection, a short wait, and more concurrent streams than the wait is long.
    with extra_web(platform, DB_POOL_SIZE="1", DB_POOL_WAIT_S="3") as web:
        responses = asyncio.run(burst([web], key, [body(model, "Tell me a long story.", 48, stream=True)] * 6))
    assert [r.status_code for r in responses] == [200] * 6, [r.text[:200] for r in responses]
    assert all(r.text.rstrip().endswith("data: [DONE]") for r in responses)
