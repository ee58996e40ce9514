"""What a load balancer, an orchestrator and Prometheus ask the web tier:

- `/healthz`: the process is alive and serving (no dependency is checked: a liveness
  probe that fails because the database is down would only restart healthy processes);
- `/readyz`: it can serve requests: the database and Redis answer, a CPU worker is
  alive, and every pool that has tenants allocated to it has a live worker. Otherwise
  503, with a JSON body naming what is missing;
- `/metrics`: this process's metrics (inference.wire.metrics) and, read from Redis at
  each scrape, the platform's: live workers per role and pool, and each queue's length.
  With TANDEM_METRICS_TOKEN set, a scrape must send it as a bearer token.

They are answered by `OpsMiddleware`, first in the middleware stack: probes and scrapers
reach a process by its address (a Host header ALLOWED_HOSTS does not list) over plain
HTTP (which production would redirect to HTTPS). Keep them off the public proxy."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY

from inference.wire import broker, metrics
from inference.wire.connections import get_redis
from inference.wire.workers import live_workers
from tenants.models import Allocation, ComputePool


class OpsMiddleware:
    """Answers /healthz, /readyz and /metrics before host validation and the SSL redirect."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.views = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics_view}

    def __call__(self, request):
        view = self.views.get(request.path_info)
        return view(request) if view is not None else self.get_response(request)


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def needed_tiers() -> set[tuple[str, str]]:
    """(role, pool) of every tier some active tenant's allocation sends requests to."""
    needed = set()
    for p_role, p_slug, d_slug in Allocation.objects.filter(tenant__is_active=True).values_list(
            "prefill_pool__role", "prefill_pool__slug", "decode_pool__slug").distinct():
        if p_role == ComputePool.Role.COLOCATED:
            needed.add(("colocated", p_slug))
        else:
            needed |= {("prefill", p_slug), ("decode", d_slug)}
    return needed


def readiness() -> dict:
    """What /readyz answers, as a dict (the operators' console overview shows it too):
    {"ready", "checks": {"database", "redis", "workers": {queue: live count}}, "missing"}."""
    checks, missing = {}, []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - whatever the failure, it is the answer
        checks["database"] = f"failed: {exc.__class__.__name__}"
        missing.append("database")
    workers = None
    try:
        get_redis().ping()
        workers = live_workers(get_redis())
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = f"failed: {exc.__class__.__name__}"
        missing.append("redis")
    if workers is not None:
        tiers = [("cpu", None), *sorted(needed_tiers() if checks["database"] == "ok" else ())]
        pools = {}
        for role, pool in tiers:
            count = sum(1 for w in workers if w["role"] == role and (pool is None or w["pool"] == pool))
            pools["cpu" if pool is None else broker.queue_name(role, pool)] = count
            if not count:
                missing.append(f"a live {role} worker" + (f" for pool '{pool}'" if pool else ""))
        checks["workers"] = pools
    body = {"ready": not missing, "checks": checks}
    if missing:
        body["missing"] = missing
    return body


@require_GET
def readyz(request):
    body = readiness()
    return JsonResponse(body, status=200 if body["ready"] else 503)


class PlatformCollector:
    """Gauges read from Redis when scraped: what every web process sees alike."""

    def collect(self):
        live = GaugeMetricFamily("tandem_workers_live", "Workers whose heartbeat is live.", labels=["role", "pool"])
        depth = GaugeMetricFamily("tandem_queue_length", "Tasks waiting in a broker queue (all priorities).",
                                  labels=["queue"])
        try:
            client = get_redis()
            counts: dict[tuple[str, str], int] = {}
            for w in live_workers(client):
                counts[(w["role"], w["pool"])] = counts.get((w["role"], w["pool"]), 0) + 1
            for (role, pool), n in sorted(counts.items()):
                live.add_metric([role, pool], n)
            queues = sorted({broker.queue_name(role, pool) for role, pool in counts} | {"cpu"})
            pipe = client.pipeline(transaction=False)
            for q in queues:
                for name in broker.priority_lists(q):
                    pipe.llen(name)
            lengths = pipe.execute()
            for i, q in enumerate(queues):
                depth.add_metric([q], sum(lengths[i * broker.PRIORITY_STEPS:(i + 1) * broker.PRIORITY_STEPS]))
        except Exception:  # noqa: BLE001 - a scrape while Redis is away shows no platform gauges
            pass
        yield live
        yield depth


_registered = False


def _register_platform_collector() -> None:
    global _registered
    if not _registered:
        REGISTRY.register(PlatformCollector())
        _registered = True


@require_GET
def metrics_view(request):
    token = settings.TANDEM_METRICS_TOKEN
    if token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return HttpResponse("metrics need the bearer token\n", status=401, content_type="text/plain")
    _register_platform_collector()
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
