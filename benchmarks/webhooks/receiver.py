"""The receiving end of the benchmark's webhooks: a real ThreadingHTTPServer on 127.0.0.1
that answers every POST 200 and records when each event arrived (by its Tandem-Event-Id),
verifying the signature of every `verify_every`-th request with docs/webhooks.md's recipe
(so that what the benchmark counts as delivered is what a receiver would accept)."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def verify_tandem_signature(secret: str, header: str, body: bytes, tolerance_s: int = 300) -> bool:
    """docs/webhooks.md's Python recipe, as a receiver would paste it."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


class Receiver:
    """`with Receiver() as r:` ... r.url, r.arrivals {event id: first arrival, time.time()}."""

    def __init__(self, *, verify_every: int = 10):
        self.verify_every = verify_every
        self.secret = ""  # the endpoint's, once it is made (shown once, by endpoint_create)
        self.arrivals: dict[str, float] = {}
        self.requests = 0
        self.duplicates = 0
        self.verified = 0
        self.bad_signatures = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.time()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver._record(self.headers.get("Tandem-Event-Id", ""), self.headers.get("Tandem-Signature", ""),
                                 body, at)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        self._thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)

    def _record(self, event_id: str, signature: str, body: bytes, at: float) -> None:
        with self.changed:
            self.requests += 1
            check = self.requests % self.verify_every == 1 or self.verify_every == 1
            if event_id in self.arrivals:
                self.duplicates += 1
            else:
                self.arrivals[event_id] = at
            self.changed.notify_all()
        if check:
            ok = verify_tandem_signature(self.secret, signature, body)
            with self.changed:
                self.verified += ok
                self.bad_signatures += not ok

    def wait_for(self, ids, *, timeout: float) -> int:
        """Wait until every event of `ids` arrived (or `timeout`); how many did."""
        ids = set(ids)
        with self.changed:
            self.changed.wait_for(lambda: ids <= self.arrivals.keys(), timeout)
            return len(ids & self.arrivals.keys())

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
