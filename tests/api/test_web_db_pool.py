"""A web process's database connections stay a small constant under a burst of REST
requests (tandem/webserver.py's pool), and a request that finds the pool full past its
wait is a 503 to retry, never a 500: the API's, and a console page's.

Each HTTP request runs its sync code on a thread of its own; before the pool, a burst of
a hundred requests over two web processes opened a connection each and passed
PostgreSQL's max_connections (CI saw one such 500)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from django.db import connection
from django.test import Client

from benchmarks.webdb import ConnectionPeak
from devstack.processes import database_url, extra_web, free_port
from tests.api.test_rate_limits import body, burst, model_id
from tests.factories import make_tenant
from tests.world import user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_burst_of_100_requests_holds_at_most_the_pools_connections_and_is_all_answered(platform):
    tenant = make_tenant(requests_per_minute=20, max_concurrent_streams=200, max_output_tokens=4)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    with extra_web(platform, DB_POOL_SIZE="4") as web:
        with ConnectionPeak(database_url(connection.settings_dict), platform.web_pid(web)) as peak:
            responses = asyncio.run(burst([web], key, [body(model)] * 100))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 20, statuses
    assert statuses.count(429) == 80, statuses
    assert 1 <= peak.most <= 4, peak.most  # the pool's size, whatever the burst


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


def test_a_console_page_that_finds_the_pool_full_is_a_503_to_retry_not_a_500(platform):
    client = Client()
    client.force_login(user(is_staff=True))  # a session row: each page reads it, and the user
    cookies = {"sessionid": client.cookies["sessionid"].value}

    async def pages(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60, cookies=cookies) as http:
            return await asyncio.gather(*(http.get(f"{url}/console/") for _ in range(60)))

    with extra_web(platform, DB_POOL_SIZE="1", DB_POOL_WAIT_S="0.001") as web:
        responses = asyncio.run(pages(web))
    assert {r.status_code for r in responses} <= {200, 503}, sorted({r.status_code for r in responses})
    assert any(r.status_code == 200 for r in responses)
    busy = [r for r in responses if r.status_code == 503]
    assert busy, "no page found the pool full"
    assert busy[0].headers["retry-after"] == "1" and "busy" in busy[0].text


def test_a_web_process_just_started_serves_its_first_request_from_a_ready_pool(platform):
    """The process connects before it listens (tandem.db_pool.open_pool): a pool Django
    opened at the first request would still be connecting when that request asked, and
    a wait shorter than a connection's setup made it a 503 (CI saw a whole first burst
    answered so)."""
    client = Client()
    client.force_login(user(is_staff=True))
    with extra_web(platform, DB_POOL_SIZE="1", DB_POOL_WAIT_S="0.001") as web:
        first = httpx.get(f"{web}/console/", cookies={"sessionid": client.cookies["sessionid"].value}, timeout=60)
    assert first.status_code == 200, first.text[:200]


def test_a_web_process_whose_database_does_not_answer_at_start_still_serves(platform):
    """Waiting for the first connection is bounded (OPEN_WAIT_S) and not fatal: a process
    that crashed instead would restart in a loop while the database comes up."""
    nowhere = f"postgres://postgres@127.0.0.1:{free_port()}/tandem"  # a port nothing listens on
    with extra_web(platform, DATABASE_URL=nowhere, DB_POOL_SIZE="1", DB_POOL_WAIT_S="0.5") as web:
        assert httpx.get(f"{web}/healthz", timeout=30).json() == {"status": "ok"}
        page = httpx.get(f"{web}/console/", cookies={"sessionid": "s" * 32}, timeout=30)  # a session to read
    assert page.status_code == 503 and page.headers["retry-after"] == "1", page.text[:200]
