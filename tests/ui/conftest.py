"""Browser tests: Debian's Chromium driven by Playwright, against the running platform
(daphne + workers on the real model, shared by the whole session). Pages that embed the
widget are served by a host site of their own on another port: another origin, as a
company's site is."""

from __future__ import annotations

import html
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture
def context(browser):
    """A fresh browser profile (its own localStorage) per test."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    yield ctx
    ctx.close()


@dataclass
class HostSite:
    """A site of its own origin serving the pages registered with `page`."""

    server: ThreadingHTTPServer
    pages: dict = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def page(self, path: str, body: str) -> str:
        self.pages[path] = body
        return self.origin + path


def _serve() -> HostSite:
    site = HostSite(server=None)  # type: ignore[arg-type]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = site.pages.get(self.path.split("?")[0])
            data = (body or "not found").encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    site.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=site.server.serve_forever, daemon=True).start()
    return site


@pytest.fixture(scope="session")
def host_site():
    site = _serve()
    yield site
    site.server.shutdown()


@pytest.fixture(scope="session")
def other_site():
    """A second host, whose origin no key in these tests allows."""
    site = _serve()
    yield site
    site.server.shutdown()


# What every test page records, through the widget's public API only: the queue stub (so
# calls made before widget.js loads are exercised too) and `Tandem.on`.
RECORDER = """
window.Tandem = window.Tandem || {q: []};
["open", "close", "toggle", "reset", "identify", "on"].forEach(function (m) {
  Tandem[m] = Tandem[m] || function () { Tandem.q.push([m, [].slice.call(arguments)]); };
});
window.__events = [];
["ready", "open", "close", "message", "error"].forEach(function (e) {
  Tandem.on(e, function (d) { __events.push({event: e, data: d || null}); });
});
"""


def embed_page(platform, key: str, *, title: str = "A shop", head: str = "", body: str = "",
               settings: dict | None = None, base: str | None = None) -> str:
    """A host page that embeds the widget with the snippet exactly as documented (from
    Tandem at `base`, by default the platform itself)."""
    src = f"{base or platform.base_url}/static/tandem/widget.js"
    config = f"window.TandemSettings = {json.dumps(settings)};" if settings is not None else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{head}
<script>{config}{RECORDER}</script>
</head><body>
<h1>{html.escape(title)}</h1>
<p>Welcome to our shop.</p>
{body}
<script src="{src}" data-tandem-key="{key}" async></script>
</body></html>"""


def events(page, name: str) -> list:
    return [e["data"] for e in page.evaluate("window.__events") if e["event"] == name]


def wait_for_event(page, name: str, count: int = 1, timeout: float = 120_000, **match):
    """Wait until the page's widget has emitted `count` `name` events (whose data has the
    key/values in `match`), and return them."""
    page.wait_for_function(
        """([name, count, match]) => window.__events.filter(e => e.event === name &&
             Object.entries(match).every(([k, v]) => e.data && e.data[k] === v)).length >= count""",
        arg=[name, count, match], timeout=timeout)
    return [d for d in events(page, name) if all(d and d.get(k) == v for k, v in match.items())]


def wait_for_reply_text(page, chars: int = 12, timeout: float = 120_000):
    """Wait until the reply being written (the bubble after the greeting) shows `chars`."""
    page.wait_for_function("""chars => { const bubbles = document.querySelector("tandem-chat").shadowRoot
        .querySelectorAll(".msg.assistant");
      return bubbles.length > 1 && bubbles[bubbles.length - 1].textContent.length > chars; }""",
                           arg=chars, timeout=timeout)


class CuttableProxy:
    """A TCP proxy in front of the platform whose connections can be cut, and new ones
    refused, until it is restored: a network that goes away and comes back."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.up = threading.Event()
        self.up.set()
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                self._close(s)

    def _close(self, s: socket.socket):
        with self.lock:
            self.open.discard(s)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def cut(self):
        self.up.clear()
        with self.lock:
            current = list(self.open)
        for s in current:
            self._close(s)

    def restore(self):
        self.up.set()

    def close(self):
        self.cut()
        self.listener.close()


@pytest.fixture
def cuttable(platform):
    proxy = CuttableProxy(int(platform.base_url.rsplit(":", 1)[1]))
    yield proxy
    proxy.close()
