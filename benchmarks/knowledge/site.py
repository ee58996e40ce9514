"""A generated help centre of N pages served by http.server on 127.0.0.1 (a free port),
with a sitemap and ETags that answer If-None-Match with 304: what the sync benchmark
crawls. Pages are a title, two headings and sentences of the demo help centre."""

from __future__ import annotations

import hashlib
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def generated_pages(n: int, help_centre: Path, seed: int = 1) -> dict[str, bytes]:
    rng = random.Random(seed)
    sentences = []
    for path in sorted(help_centre.rglob("*.md")):
        body = path.read_text().split("---", 2)[2]
        sentences += [s.strip() for s in body.replace("\n", " ").split(". ") if len(s.split()) > 3]
    pages = {}
    for i in range(n):
        parts = [f"<h1>Help article {i}</h1>"]
        for h in ("Overview", "Details"):
            parts.append(f"<h2>{h}</h2><p>{'. '.join(rng.sample(sentences, 5))}.</p>")
        pages[f"/help/{i}"] = (f"<html><head><title>Help article {i}</title></head><body><nav><a href='/'>Home</a>"
                               f"</nav><main><article>{''.join(parts)}</article></main></body></html>").encode()
    return pages


class Site:
    def __init__(self, pages: dict[str, bytes]):
        self.pages = pages
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?")[0]
                if path == "/sitemap.xml":
                    body = ("<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                            + "".join(f"<url><loc>{site.base}{p}</loc></url>" for p in site.pages)
                            + "</urlset>").encode()
                    return self._send(200, "application/xml", body)
                body = site.pages.get(path)
                if body is None:
                    return self._send(404, "text/plain", b"")
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if self.headers.get("If-None-Match") == etag:
                    return self._send(304, "", b"", etag)
                return self._send(200, "text/html; charset=utf-8", body, etag)

            def _send(self, status, ctype, body, etag=""):
                self.send_response(status)
                if ctype:
                    self.send_header("Content-Type", ctype)
                if etag:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
