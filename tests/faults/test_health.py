"""The web tier's probes and metrics, in process (no worker processes: heartbeats are
written as a worker writes them)."""

from __future__ import annotations

import uuid

import pytest

from inference.wire import keys, workers
from tenants.models import ComputePool
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def test_healthz_answers_any_host_over_plain_http(client):
    response = client.get("/healthz", HTTP_HOST="10.1.2.3:8000")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_names_the_pool_that_has_tenants_but_no_live_worker_until_one_beats(client, redis_client):
    pool = f"nobody-{uuid.uuid4().hex[:6]}"
    tenant = make_tenant()
    allocation = tenant.tenant.allocation
    allocation.decode_pool = ComputePool.objects.create(slug=pool, role="decode")
    allocation.save()

    response = client.get("/readyz", HTTP_HOST="10.1.2.3:8000")
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert f"a live decode worker for pool '{pool}'" in body["missing"]
    assert body["checks"]["database"] == "ok" and body["checks"]["redis"] == "ok"
    assert body["checks"]["workers"][f"decode.{pool}"] == 0

    name = f"decode.{pool}@test:1"
    workers.heartbeat_write(redis_client, name, {"name": name, "role": "decode", "pool": pool})
    try:
        body = client.get("/readyz").json()
        assert f"a live decode worker for pool '{pool}'" not in body.get("missing", [])
        assert body["checks"]["workers"][f"decode.{pool}"] == 1
    finally:
        redis_client.delete(keys.WORKER_HASH_PREFIX + name)
        redis_client.zrem(keys.WORKERS_SET, name)


def test_readyz_is_ready_when_every_tier_in_use_has_a_live_worker(client, redis_client):
    make_tenant()  # on the shared pools
    names = []
    for role in ("cpu", "prefill", "decode"):
        names.append(name := f"{role}.shared@test:{uuid.uuid4().hex[:6]}")
        workers.heartbeat_write(redis_client, name, {"name": name, "role": role, "pool": "shared"})
    other_pools = {(p.role, p.slug) for p in ComputePool.objects.exclude(slug="shared")}
    try:
        body = client.get("/readyz").json()
        missing = [m for m in body.get("missing", []) if not any(f"'{slug}'" in m for _, slug in other_pools)]
        assert missing == [], body
    finally:
        for name in names:
            redis_client.delete(keys.WORKER_HASH_PREFIX + name)
            redis_client.zrem(keys.WORKERS_SET, name)


def test_metrics_follow_prometheus_conventions_and_show_the_platform(client, redis_client, settings):
    name = f"decode.shared@test:{uuid.uuid4().hex[:6]}"
    workers.heartbeat_write(redis_client, name, {"name": name, "role": "decode", "pool": "shared"})
    try:
        response = client.get("/metrics", HTTP_HOST="web:8000")
        text = response.content.decode()
        assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
        for family in ("tandem_time_to_first_token_seconds", "tandem_inter_token_latency_seconds",
                       "tandem_request_queue_time_seconds", "tandem_e2e_request_latency_seconds",
                       "tandem_migrations_total", "tandem_request_errors_total", "tandem_batch_occupancy",
                       "tandem_kv_tokens", "tandem_workers_live", "tandem_queue_length"):
            assert f"# TYPE {family.removesuffix('_total')}" in text, family
        assert 'tandem_workers_live{pool="shared",role="decode"}' in text
        assert 'tandem_queue_length{queue="decode.shared"}' in text

        settings.TANDEM_METRICS_TOKEN = "s3cret"
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
    finally:
        redis_client.delete(keys.WORKER_HASH_PREFIX + name)
        redis_client.zrem(keys.WORKERS_SET, name)
