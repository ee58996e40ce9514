"""Webhook fan-out, measured (a tool, not a test: `make test` does not collect it; run it
by name): N events emitted as fast as one process can, each to one endpoint on a local
receiver, through a real webhooks worker (4 threads). Prints events delivered per
second and the delay from emitting an event to its arrival (p50, p99).

    .venv/bin/python -m pytest tests/webhooks/fanout.py -s"""

from __future__ import annotations

import os
import time

import pytest

from tandem.webhooks import services
from tandem.webhooks.events import event_emit
from tests.factories import make_tenant

N = int(os.environ.get("FANOUT_EVENTS", "300"))
pytestmark = pytest.mark.django_db(transaction=True)


def test_fanout(webhooks_worker, receiver, allow_loopback):
    t = make_tenant()
    services.endpoint_create(tenant=t.tenant, url=receiver.url, events=["reply.failed"])
    sent: dict[str, float] = {}
    start = time.monotonic()
    for i in range(N):
        event = event_emit(tenant_id=t.tenant.pk, type="reply.failed", data={"message": str(i), "code": "x"})
        sent[event.id] = time.monotonic()
    got = receiver.wait_for(N, timeout=300)
    elapsed = max(r.at for r in got) - start
    delays = sorted(r.at - sent[r.headers["tandem-event-id"]] for r in got)
    assert len({r.headers["tandem-event-id"] for r in got}) == N
    print(f"\n{N} events in {elapsed:.2f} s: {N / elapsed:.0f} events/s delivered; emit to arrival "
          f"p50 {delays[len(delays) // 2] * 1000:.0f} ms, p99 {delays[int(len(delays) * 0.99) - 1] * 1000:.0f} ms")
