"""One POST to an endpoint, through the platform's outbound guard (knowledge.outbound):
the host resolved once and checked (loopback, private, link-local and metadata
addresses refused unless the operator allows the host in TANDEM_OUTBOUND_ALLOW_HOSTS),
the connection made to that checked address, redirects never followed, 5 s for the
whole exchange, and at most MAX_RESPONSE_BYTES of the answer read."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from knowledge.outbound import FetchRefused, _PinnedHTTPConnection, _PinnedHTTPSConnection, resolve

TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "Tandem-Webhooks/1.0"


@dataclass
class Sent:
    status: int | None      # the HTTP status, None when no answer came
    duration_ms: int
    error: str = ""         # why it failed, for the delivery log

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def url_refusal(url: str) -> str | None:
    """Why `url` can never be an endpoint (scheme, credentials), or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "The URL must be http(s) with a host."
    if parts.username or parts.password:
        return "The URL must not carry credentials."
    return None


def post(url: str, *, body: bytes, headers: dict[str, str], timeout_s: float = TIMEOUT_S) -> Sent:
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    why = url_refusal(url)
    if why:
        return Sent(None, took(), why)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = resolve(parts.hostname, port)
    except FetchRefused as exc:
        return Sent(None, took(), str(exc))
    cls = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    conn = cls(parts.hostname, port, address, timeout=timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers={
            "User-Agent": USER_AGENT, "Content-Type": "application/json", **headers})
        raw = conn.getresponse()
        read = 0
        while read < MAX_RESPONSE_BYTES and time.monotonic() - started < timeout_s:
            piece = raw.read(min(65536, MAX_RESPONSE_BYTES - read))
            if not piece:
                break
            read += len(piece)
        return Sent(raw.status, took(), "" if 200 <= raw.status < 300 else f"answered HTTP {raw.status}")
    except TimeoutError:
        return Sent(None, took(), f"no answer within {timeout_s:g} s")
    except (OSError, http.client.HTTPException) as exc:
        return Sent(None, took(), f"{exc.__class__.__name__}: {exc}"[:300])
    finally:
        conn.close()
