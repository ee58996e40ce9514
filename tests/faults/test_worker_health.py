"""Every running model worker answers its own /healthz (the port its heartbeat gives):
the engine's stepping thread is alive, and the heartbeat beats."""

from __future__ import annotations

import json
import urllib.request

import pytest

from inference.wire.connections import get_redis
from inference.wire.workers import live_workers

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_running_worker_answers_healthz_with_its_engine_threads(platform):
    workers = {w["role"]: w for w in live_workers(get_redis()) if w.get("metrics_port")}
    assert {"cpu", "prefill", "decode"} <= set(workers)
    for role, w in workers.items():
        with urllib.request.urlopen(f"http://127.0.0.1:{w['metrics_port']}/healthz", timeout=10) as r:
            body = json.loads(r.read())
        assert r.status == 200 and body["heartbeat"] is True, (role, body)
        if role == "decode":
            assert body["engine_threads"] == {"decode": True}
