"""Quota admission against a real Redis: the counts hold under concurrency (threads and
separate processes, each with its own connection), reservations reconcile and release,
and the answers carry the right retry times and headers.

Each test uses its own tenant id (a uuid), so keys never collide with other tests and the
shared database is never flushed. Time is simulated with `now=`, never slept through."""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from datetime import UTC, datetime

import redis

from tenants.quotas import (
    QuotaLimits,
    admit,
    format_duration,
    quota_key,
    reconcile,
    release,
    touch,
    usage_snapshot,
)

# A fixed simulated clock: noon UTC, so the day has 12 hours left.
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC).timestamp()

ROOMY = QuotaLimits(
    requests_per_minute=10_000,
    tokens_per_minute=10_000_000,
    max_concurrent_streams=10_000,
    daily_token_budget=10**12,
    max_prompt_tokens=4096,
    max_output_tokens=4096,
)


def limits(**tight) -> QuotaLimits:
    """Roomy limits except the ones under test."""
    return replace(ROOMY, **tight)


def new_tenant() -> str:
    return f"test-{uuid.uuid4()}"


def rid() -> str:
    return str(uuid.uuid4())


def burst(n: int, call) -> list:
    """Run `call(i)` in n threads released together; return the results in order."""
    gate = threading.Barrier(n, timeout=30)

    def run(i):
        gate.wait()
        return call(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def _admit_from_another_process(url, tenant_id, limit_fields, tag, n, start, results):
    """A separate 'web process': its own Redis connection pool, n threads."""
    client = redis.Redis.from_url(url)
    lim = QuotaLimits(**limit_fields)
    go = threading.Event()

    def one(i):
        go.wait(30)
        request_id = f"{tag}-{i}"
        adm = admit(client, tenant_id=tenant_id, limits=lim, request_id=request_id,
                    prompt_tokens=10, max_output_tokens=10)
        return request_id if adm.allowed else None

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        start.wait(30)  # every process is ready: fire
        go.set()
        results.put([rid for f in futures if (rid := f.result())])


def test_a_hundred_concurrent_requests_over_three_processes_admit_exactly_the_rpm(redis_client):
    tenant, lim = new_tenant(), limits(requests_per_minute=10)
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(3, timeout=60), ctx.Queue()
    children = [
        ctx.Process(target=_admit_from_another_process,
                    args=(os.environ["REDIS_URL"], tenant, asdict(lim), f"p{k}", 33, start, results))
        for k in range(2)
    ]
    for child in children:
        child.start()

    # This process is the third web process, with the remaining 34 threads.
    go = threading.Event()

    def one(i):
        go.wait(30)
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=f"main-{i}",
                     prompt_tokens=10, max_output_tokens=10).allowed

    with ThreadPoolExecutor(max_workers=34) as pool:
        futures = [pool.submit(one, i) for i in range(34)]
        start.wait()
        go.set()
        admitted_here = sum(f.result() for f in futures)
    admitted_there = [results.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0

    assert admitted_here + sum(len(ids) for ids in admitted_there) == 10
    assert redis_client.zcard(quota_key(tenant, "rpm")) == 10
    assert usage_snapshot(redis_client, tenant_id=tenant, limits=lim)["requests_per_minute"]["used"] == 10


def test_token_reservations_never_let_counted_usage_pass_the_limit_under_concurrency(redis_client):
    tenant, lim = new_tenant(), limits(tokens_per_minute=3000)
    rng = random.Random(6)
    sizes = [(rng.randint(10, 120), rng.randint(10, 120)) for _ in range(100)]
    answers = burst(100, lambda i: admit(
        redis_client, tenant_id=tenant, limits=lim, request_id=f"r{i}",
        prompt_tokens=sizes[i][0], max_output_tokens=sizes[i][1]))

    reserved = [sum(sizes[i]) for i, a in enumerate(answers) if a.allowed]
    used = usage_snapshot(redis_client, tenant_id=tenant, limits=lim)["tokens_per_minute"]["used"]
    assert used == sum(reserved) <= 3000
    refused = [sum(sizes[i]) for i, a in enumerate(answers) if not a.allowed]
    assert refused and {a.reason for a in answers if not a.allowed} == {"tokens_per_minute"}
    # No false refusals: usage only grew during the burst, so each refused request
    # still does not fit now.
    assert all(used + size > 3000 for size in refused)


def test_a_cancelled_request_gives_its_reservation_back(redis_client):
    tenant, lim = new_tenant(), limits(tokens_per_minute=1000)
    answers = burst(30, lambda i: admit(redis_client, tenant_id=tenant, limits=lim,
                                        request_id=f"r{i}", prompt_tokens=40, max_output_tokens=60))
    admitted = [f"r{i}" for i, a in enumerate(answers) if a.allowed]
    assert len(admitted) == 10

    def one_more():
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=40, max_output_tokens=60)

    assert one_more().reason == "tokens_per_minute"
    assert release(redis_client, tenant_id=tenant, request_id=admitted[0]) is True
    assert one_more().allowed
    assert one_more().reason == "tokens_per_minute"

    # Tokens already spent before a cancel stay counted: 100 reserved, 30 kept.
    assert release(redis_client, tenant_id=tenant, request_id=admitted[1], tokens_used=30)
    snapshot = usage_snapshot(redis_client, tenant_id=tenant, limits=lim)
    assert snapshot["tokens_per_minute"]["used"] == 930
    assert snapshot["daily_tokens"]["used"] == 930
    assert not one_more().allowed
    # Releasing twice gives nothing back twice.
    assert release(redis_client, tenant_id=tenant, request_id=admitted[1]) is False
    assert usage_snapshot(redis_client, tenant_id=tenant, limits=lim)["tokens_per_minute"]["used"] == 930


def test_reconcile_replaces_the_reservation_with_the_real_count_exactly_once(redis_client):
    tenant, lim = new_tenant(), limits(tokens_per_minute=1000)
    request_id = rid()
    adm = admit(redis_client, tenant_id=tenant, limits=lim, request_id=request_id,
                prompt_tokens=200, max_output_tokens=300)
    assert adm.allowed and adm.reserved_tokens == 500 and adm.remaining_tokens == 500

    assert reconcile(redis_client, tenant_id=tenant, request_id=request_id, actual_tokens=260)
    assert not reconcile(redis_client, tenant_id=tenant, request_id=request_id, actual_tokens=260)
    assert not release(redis_client, tenant_id=tenant, request_id=request_id)

    snapshot = usage_snapshot(redis_client, tenant_id=tenant, limits=lim)
    assert snapshot["tokens_per_minute"]["used"] == 260
    assert snapshot["daily_tokens"]["used"] == 260
    assert snapshot["concurrent_streams"]["used"] == 0
    assert snapshot["requests_per_minute"]["used"] == 1  # the request itself still counts


def test_the_concurrent_streams_limit_holds_under_a_burst_and_slots_return(redis_client):
    tenant, lim = new_tenant(), limits(max_concurrent_streams=3)
    answers = burst(50, lambda i: admit(redis_client, tenant_id=tenant, limits=lim,
                                        request_id=f"r{i}", prompt_tokens=5, max_output_tokens=5))
    admitted = [f"r{i}" for i, a in enumerate(answers) if a.allowed]
    assert len(admitted) == 3
    refused = [a for a in answers if not a.allowed]
    assert {a.reason for a in refused} == {"concurrent_streams"}
    assert {a.retry_after_s for a in refused} == {1.0}

    def one_more():
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=5, max_output_tokens=5)

    assert not one_more().allowed
    reconcile(redis_client, tenant_id=tenant, request_id=admitted[0], actual_tokens=8)
    assert one_more().allowed  # the ended stream's slot
    assert not one_more().allowed
    release(redis_client, tenant_id=tenant, request_id=admitted[1])
    assert one_more().allowed  # the cancelled stream's slot
    assert usage_snapshot(redis_client, tenant_id=tenant, limits=lim)["concurrent_streams"]["used"] == 3


def test_a_crashed_workers_slot_frees_when_its_lease_lapses_unless_touched(redis_client):
    tenant, lim = new_tenant(), limits(max_concurrent_streams=2)

    def go(request_id, at):
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=request_id,
                     prompt_tokens=5, max_output_tokens=5, now=at, stream_lease_s=30)

    assert go("crashed", T0).allowed
    assert go("alive", T0).allowed
    assert touch(redis_client, tenant_id=tenant, request_id="alive", stream_lease_s=30, now=T0 + 20)
    assert not go("new", T0 + 29.9).allowed
    assert go("new", T0 + 30).allowed  # "crashed" lapsed, "alive" holds until T0 + 50
    assert not go("newer", T0 + 49).allowed
    # A lapsed request can no longer be touched, and settling it is a no-op.
    assert not touch(redis_client, tenant_id=tenant, request_id="crashed", now=T0 + 49)
    assert not reconcile(redis_client, tenant_id=tenant, request_id="crashed", actual_tokens=9,
                         now=T0 + 49)


def test_rpm_retry_after_is_when_the_oldest_blocking_request_leaves_the_window(redis_client):
    tenant, lim = new_tenant(), limits(requests_per_minute=2)

    def go(at):
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=1, max_output_tokens=1, now=at)

    assert go(T0).allowed
    assert go(T0 + 10).allowed
    refused = go(T0 + 20)
    assert (refused.reason, refused.retry_after_s) == ("requests_per_minute", 40.0)
    assert go(T0 + 59.75).retry_after_s == 0.25
    assert go(T0 + 60).allowed  # exactly when the first left the window
    assert go(T0 + 60.5).retry_after_s == 9.5  # now the one at T0 + 10 blocks


def test_tpm_retry_after_waits_until_enough_tokens_have_left_the_window(redis_client):
    tenant, lim = new_tenant(), limits(tokens_per_minute=1000)

    def go(at, size):
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=size // 2, max_output_tokens=size - size // 2, now=at)

    assert go(T0, 300).allowed
    assert go(T0 + 5, 300).allowed
    assert go(T0 + 10, 300).allowed
    # 900 counted; 500 more needs the first two entries (600 tokens) gone: at T0 + 65.
    refused = go(T0 + 20, 500)
    assert (refused.reason, refused.retry_after_s) == ("tokens_per_minute", 45.0)
    assert go(T0 + 64, 500).retry_after_s == 1.0
    assert go(T0 + 65, 500).allowed


def test_headers_carry_the_limits_remaining_and_reset_times(redis_client):
    tenant, lim = new_tenant(), limits(requests_per_minute=3, tokens_per_minute=1000)
    first = admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                  prompt_tokens=100, max_output_tokens=150, now=T0)
    assert first.http_status == 200
    assert first.headers() == {
        "x-ratelimit-limit-requests": "3",
        "x-ratelimit-remaining-requests": "2",
        "x-ratelimit-reset-requests": "1m0s",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "750",
        "x-ratelimit-reset-tokens": "1m0s",
    }
    for at in (T0 + 1, T0 + 2.5):
        admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
              prompt_tokens=100, max_output_tokens=150, now=at)
    refused = admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                    prompt_tokens=100, max_output_tokens=150, now=T0 + 30.25)
    assert refused.http_status == 429
    assert refused.headers() == {
        "x-ratelimit-limit-requests": "3",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "32.25s",  # until the newest (T0 + 2.5) leaves
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "250",
        "x-ratelimit-reset-tokens": "32.25s",
        "retry-after": "30",  # until the oldest (T0) leaves: 29.75 s, rounded up
        "retry-after-ms": "29750",
    }


def test_format_duration_follows_openais_style():
    assert [format_duration(s) for s in (0, 0.25, 0.0004, 1, 8.64, 59.999, 60, 360, 3723.5)] == [
        "0s", "250ms", "0s", "1s", "8.64s", "59.999s", "1m0s", "6m0s", "1h2m3.5s"]


def test_the_daily_budget_refuses_once_spent_until_utc_midnight(redis_client):
    tenant, lim = new_tenant(), limits(daily_token_budget=1000)

    def go(at, out=200):
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=200, max_output_tokens=out, now=at)

    late = datetime(2030, 1, 1, 23, 0, tzinfo=UTC).timestamp()
    assert go(late).allowed
    assert go(late + 1).allowed
    assert go(late + 2, out=0).allowed  # 1000 reserved: the budget is spent
    refused = go(late + 3.5, out=0)
    assert refused.reason == "daily_token_budget"
    assert refused.retry_after_s == 3600 - 3.5  # to 2030-01-02 00:00 UTC
    assert refused.headers()["retry-after"] == "3597"
    assert refused.daily_tokens_used == 1000
    midnight = datetime(2030, 1, 2, 0, 0, tzinfo=UTC).timestamp()
    assert go(midnight).allowed  # a new day, a new budget
    assert usage_snapshot(redis_client, tenant_id=tenant, limits=lim, now=midnight)[
        "daily_tokens"] == {"used": 400, "limit": 1000, "remaining": 600, "reset_s": 86400.0}


def test_prompt_and_max_tokens_limits_have_their_own_reasons_and_record_nothing(redis_client):
    tenant, lim = new_tenant(), limits(max_prompt_tokens=100, max_output_tokens=50)

    def go(prompt, out):
        return admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                     prompt_tokens=prompt, max_output_tokens=out)

    too_long = go(101, 10)
    assert (too_long.reason, too_long.retry_after_s, too_long.http_status) == (
        "prompt_too_long", None, 400)
    assert "retry-after" not in too_long.headers()
    assert go(10, 51).reason == "max_tokens_too_large"
    assert go(100, 50).allowed
    snapshot = usage_snapshot(redis_client, tenant_id=tenant, limits=lim)
    assert snapshot["requests_per_minute"]["used"] == 1
    assert snapshot["tokens_per_minute"]["used"] == 150


def test_a_refused_request_counts_in_no_limit(redis_client):
    tenant, lim = new_tenant(), limits(max_concurrent_streams=1)
    assert admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                 prompt_tokens=10, max_output_tokens=10).allowed
    for _ in range(5):
        assert not admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                         prompt_tokens=10, max_output_tokens=10).allowed
    snapshot = usage_snapshot(redis_client, tenant_id=tenant, limits=lim)
    assert [snapshot[k]["used"] for k in (
        "requests_per_minute", "tokens_per_minute", "concurrent_streams", "daily_tokens")] == [
        1, 20, 1, 20]


def test_the_reason_is_the_limit_that_keeps_the_request_out_longest(redis_client):
    tenant = new_tenant()
    lim = limits(requests_per_minute=1, max_concurrent_streams=1, daily_token_budget=30)
    assert admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                 prompt_tokens=10, max_output_tokens=10, now=T0).allowed
    # rpm (60 s), streams (1 s) and the daily budget (12 h) all refuse it.
    refused = admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                    prompt_tokens=10, max_output_tokens=10, now=T0)
    assert (refused.reason, refused.retry_after_s) == ("daily_token_budget", 12 * 3600)


def test_a_request_larger_than_a_rate_limit_is_refused_with_no_retry_time(redis_client):
    tenant, lim = new_tenant(), limits(tokens_per_minute=100)
    refused = admit(redis_client, tenant_id=tenant, limits=lim, request_id=rid(),
                    prompt_tokens=60, max_output_tokens=60)
    assert (refused.reason, refused.retry_after_s, refused.http_status) == (
        "tokens_per_minute", None, 429)
    assert "retry-after" not in refused.headers()


def test_admitting_the_same_request_twice_counts_it_once(redis_client):
    tenant, lim, request_id = new_tenant(), limits(requests_per_minute=1), rid()
    for _ in range(2):
        assert admit(redis_client, tenant_id=tenant, limits=lim, request_id=request_id,
                     prompt_tokens=10, max_output_tokens=10).allowed
    assert usage_snapshot(redis_client, tenant_id=tenant, limits=lim)["tokens_per_minute"]["used"] == 20


def test_every_key_expires_on_its_own(redis_client):
    tenant = new_tenant()
    admit(redis_client, tenant_id=tenant, limits=ROOMY, request_id=rid(),
          prompt_tokens=10, max_output_tokens=10)
    keys = redis_client.keys(quota_key(tenant, "*"))
    assert len(keys) == 6
    assert all(redis_client.pttl(k) > 0 for k in keys)
    assert redis_client.pttl(quota_key(tenant, "rpm")) <= 60_000


def test_limits_come_from_a_quota_row():
    # Imported here: the spawned processes above import this module without Django set up.
    from tenants.models import Quota

    quota = Quota(requests_per_minute=7, tokens_per_minute=7000, max_concurrent_streams=2,
                  daily_token_budget=10**6, max_prompt_tokens=512, max_output_tokens=256)
    assert QuotaLimits.from_quota(quota) == QuotaLimits(7, 7000, 2, 10**6, 512, 256)


def test_an_admission_stores_the_requests_keys_with_it_and_a_refusal_stores_none(redis_client):
    tenant = new_tenant()
    ok, refused = f"test-spec-{uuid.uuid4()}", f"test-spec-{uuid.uuid4()}"
    adm = admit(redis_client, tenant_id=tenant, limits=limits(requests_per_minute=1), request_id=rid(),
                prompt_tokens=10, max_output_tokens=10, now=T0, store={ok: ("spec", 30)})
    assert adm.allowed and redis_client.get(ok) == b"spec"
    assert 29_000 < redis_client.pttl(ok) <= 30_000
    adm = admit(redis_client, tenant_id=tenant, limits=limits(requests_per_minute=1), request_id=rid(),
                prompt_tokens=10, max_output_tokens=10, now=T0 + 1, store={refused: ("spec", 30)})
    assert adm.reason == "requests_per_minute" and redis_client.exists(refused) == 0


def test_limits_read_before_a_counted_change_are_stale_and_count_nothing(redis_client):
    tenant, counter = new_tenant(), f"test-changes-{uuid.uuid4()}"
    redis_client.set(counter, 4, ex=60)
    spec_key = f"test-spec-{uuid.uuid4()}"
    stale = admit(redis_client, tenant_id=tenant, limits=ROOMY, request_id=rid(), prompt_tokens=10,
                  max_output_tokens=10, now=T0, if_current=(counter, 3), store={spec_key: ("spec", 30)})
    assert not stale.allowed and stale.reason == "stale" and stale.current == 4
    assert stale.remaining_requests == ROOMY.requests_per_minute  # nothing counted
    assert redis_client.exists(spec_key) == 0
    fresh = admit(redis_client, tenant_id=tenant, limits=ROOMY, request_id=rid(), prompt_tokens=10,
                  max_output_tokens=10, now=T0, if_current=(counter, stale.current), store={spec_key: ("spec", 30)})
    assert fresh.allowed and fresh.remaining_requests == ROOMY.requests_per_minute - 1
    assert redis_client.get(spec_key) == b"spec"
