"""A small help centre served by a real http.server on 127.0.0.1, on a free port, whose
pages a test can change, remove or redirect while it runs. It honours If-None-Match
(ETag: the page's hash) and counts the requests it answered, by path."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def page(title: str, body: str, *, links: tuple[str, ...] = (), canonical: str = "") -> str:
    nav = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (f"<html><head><title>{title}</title>{link}</head><body><nav>{nav}</nav>"
            f"<main><article><h1>{title}</h1>{body}</article></main><footer>© Bike Co.</footer></body></html>")


class Site:
    def __init__(self):
        # path -> (status, content type, body, extra headers)
        self.routes: dict[str, tuple[int, str, bytes, dict]] = {}
        self.hits: Counter = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?")[0]
                site.hits[path] += 1
                route = site.routes.get(path)
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, ctype, body, extra = route
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if status == 200 and self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if status == 200:
                    self.send_header("ETag", etag)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def html(self, path: str, html: str) -> None:
        self.routes[path] = (200, "text/html; charset=utf-8", html.encode(), {})

    def file(self, path: str, ctype: str, body: bytes, status: int = 200) -> None:
        self.routes[path] = (status, ctype, body, {})

    def redirect(self, path: str, to: str) -> None:
        self.routes[path] = (301, "text/html", b"", {"Location": to})

    def remove(self, path: str) -> None:
        self.routes.pop(path, None)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
