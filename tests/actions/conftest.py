"""Action test parts: a real HTTP server on 127.0.0.1 (http.server on a thread of the
test) standing for a tenant's endpoint, which records every request and answers from a
script; and a real actions worker (Celery, the CPU tier's `actions` queue) on the test
database and Redis, allowed to reach 127.0.0.1 by the operator setting."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tandem.actions.queue import worker_argv
from tests.outbound import allow_loopback, outbound_worker  # noqa: F401  (allow_loopback: a fixture)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Endpoint:
    url: str
    status: int = 200
    body: bytes = b'{"order": "A-17", "state": "shipped", "eta": "Friday"}'
    delay_s: float = 0.0
    requests: list[Request] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 60) -> list[Request]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= count, timeout), \
                f"{len(self.requests)} of {count} requests arrived"
            return list(self.requests)


@pytest.fixture
def endpoint():
    box: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            e = box["endpoint"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with e.arrived:
                e.requests.append(Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                          body))
                e.arrived.notify_all()
            if e.delay_s:
                threading.Event().wait(e.delay_s)  # an endpoint slower than the action's timeout
            self.send_response(e.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(e.body)))
            self.end_headers()
            self.wfile.write(e.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box["endpoint"] = Endpoint(url=f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box["endpoint"]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def actions_worker(django_db_setup, django_db_blocker):
    with outbound_worker("actions-worker", worker_argv(concurrency=2)) as proc:
        yield proc



@pytest.fixture(scope="session")
def grammar_warm(platform, django_db_blocker):
    """One grammar-constrained reply through the platform before the tests' own: the
    model workers build llguidance's tokenizer on their first constrained request
    (seconds on a busy machine), which could otherwise pass the platform's 8 s queue
    timeout. A JSON-mode completion over the REST API; its answer (or its timeout) does
    not matter, only that the workers have met a grammar."""
    import openai

    from tests.factories import make_tenant

    with django_db_blocker.unblock():
        key = make_tenant(max_output_tokens=8).secret_key.plaintext
    client = openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=key, max_retries=0, timeout=120)
    try:
        client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=8,
                                       messages=[{"role": "user", "content": "Say hi as JSON."}],
                                       response_format={"type": "json_object"})
    except openai.APIError:
        pass  # a timeout on a cold, busy machine: the workers are warm all the same
