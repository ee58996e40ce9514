"""Webhook test parts: a real HTTP receiver on 127.0.0.1 (http.server on a thread of the
test) that records every request and answers from a script, and a real webhooks worker
(Celery, the CPU tier's `webhooks` queue) on the test database and Redis, allowed to
reach 127.0.0.1 by the operator setting and retrying fast."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tandem.webhooks.queue import worker_argv
from tests.outbound import allow_loopback, outbound_worker  # noqa: F401  (allow_loopback: a fixture)

RETRY_BASE_S = 0.3


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    answers: list[int] = field(default_factory=list)   # statuses to answer in turn; then 200
    delay_s: float = 0.0                                 # how long each answer waits
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.received) >= count, timeout), \
                f"{len(self.received)} of {count} requests arrived"
            return list(self.received)


@pytest.fixture
def receiver():
    box: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            r = box["receiver"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = r.answers.pop(0) if r.answers else 200
            if r.delay_s:
                threading.Event().wait(r.delay_s)  # a receiver too slow to answer in time
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            with r.arrived:
                r.received.append(Received({k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
                r.arrived.notify_all()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box["receiver"] = Receiver(url=f"http://127.0.0.1:{server.server_port}/hooks")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box["receiver"]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def webhooks_worker(django_db_setup, django_db_blocker):
    with outbound_worker("webhooks-worker", worker_argv(concurrency=4), TANDEM_WEBHOOK_RETRY_BASE_S=str(RETRY_BASE_S)) as proc:
        yield proc
