"""Prometheus metrics (prometheus_client), one registry per process: the web process
serves them at `/metrics`, every worker on a port of its own (`TANDEM_METRICS_PORT`, with
`/healthz` beside it).

Names follow Prometheus' conventions, in the shape of vLLM's (`vllm:time_to_first_token_seconds`):
a namespace, what is measured, its base unit, `_total` on counters. The namespace is
`tandem_`, not `tandem:`: Prometheus reserves colons for recording rules.

Labels: `pool` (bounded by the operator's pools), `stage`/`role`, `code`, and `tenant`
where the cardinality is bounded: the first TANDEM_METRICS_MAX_TENANTS tenants a process
sees get their id, later ones share `other` (0 turns the label off: always `""`)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_TOKEN = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
_REQUEST = (0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 120.0, 300.0, 600.0)

TIME_TO_FIRST_TOKEN = Histogram(
    "tandem_time_to_first_token_seconds", "From the web tier's enqueueing to the first token.",
    ["pool", "tenant"], buckets=_LATENCY)
INTER_TOKEN_LATENCY = Histogram(
    "tandem_inter_token_latency_seconds", "Between two consecutive tokens of one reply.",
    ["pool"], buckets=_TOKEN)
E2E_LATENCY = Histogram(
    "tandem_e2e_request_latency_seconds", "From the web tier's enqueueing to the reply's end.",
    ["pool", "tenant"], buckets=_REQUEST)
QUEUE_TIME = Histogram(
    "tandem_request_queue_time_seconds",
    "Waiting before a tier works on a request: prefill, from the enqueueing to its task's "
    "start; decode, from its task's start to a batch slot.", ["stage", "pool"], buckets=_LATENCY)
MIGRATION_RECOMPUTE = Histogram(
    "tandem_migration_recompute_seconds", "Rebuilding a migrated reply's KV (prompt + tokens streamed).",
    ["pool"], buckets=_LATENCY)

BATCH_OCCUPANCY = Gauge("tandem_batch_occupancy", "Sequences in the running decode batch.", ["role", "pool"])
BATCH_SLOTS = Gauge("tandem_batch_slots", "Decode slots (the most sequences a batch steps together).",
                    ["role", "pool"])
KV_TOKENS = Gauge("tandem_kv_tokens", "KV positions held by the running batch.", ["role", "pool"])
REQUESTS_WAITING = Gauge("tandem_requests_waiting", "Requests queued inside the worker (engine or batcher).",
                         ["role", "pool"])
REQUESTS_RUNNING = Gauge("tandem_requests_running", "Requests this worker owns now.", ["role", "pool"])

REQUESTS_FINISHED = Counter("tandem_requests_finished_total", "Replies that ended, by finish reason.",
                            ["pool", "finish_reason"])
REQUEST_ERRORS = Counter("tandem_request_errors_total", "Replies that ended in an error, by code.", ["code"])
MIGRATIONS = Counter("tandem_migrations_total", "Requests moved off a dead worker, by the stage they were in.",
                     ["stage", "pool"])
REDELIVERIES = Counter(
    "tandem_task_redeliveries_total",
    "Task deliveries that found their stage already taken: duplicate (a live worker runs it: the "
    "broker's visibility timeout passed) or stale (a later delivery, or the stage is done).",
    ["stage", "outcome"])
RETRIES = Counter("tandem_retries_total", "Operations tried again after a failure (e.g. publishing tokens).",
                  ["operation"])

_tenants: set[str] = set()
_tenants_lock = threading.Lock()


def tenant_label(tenant_id) -> str:
    limit = getattr(settings, "TANDEM_METRICS_MAX_TENANTS", 100)
    if limit <= 0:
        return ""
    value = str(tenant_id)
    with _tenants_lock:
        if value in _tenants:
            return value
        if len(_tenants) < limit:
            _tenants.add(value)
            return value
    return "other"


def exposition() -> tuple[bytes, str]:
    """This process's metrics in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def configured_port() -> int | None:
    """TANDEM_METRICS_PORT: a port, 0 (any free one) when unset, None when `off`."""
    raw = os.environ.get("TANDEM_METRICS_PORT", "0").strip().lower()
    return None if raw in ("off", "none", "-1", "") else int(raw)


def serve(port: int, health: Callable[[], tuple[bool, dict]], *, host: str = "0.0.0.0") -> int:
    """A worker's own endpoint, on a daemon thread: `/metrics`, and `/healthz` (200 or
    503 with health()'s JSON). Returns the port it bound."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] == "/healthz":
                ok, detail = health()
                body, ctype, status = json.dumps({"ok": ok, **detail}).encode(), "application/json", 200 if ok else 503
            elif self.path.split("?")[0] == "/metrics":
                (body, ctype), status = exposition(), 200
            else:
                body, ctype, status = b"not found\n", "text/plain", 404
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes every few seconds: keep the worker's log quiet
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server.server_address[1]
