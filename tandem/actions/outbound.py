"""One call of an action: the URL built from its template (every argument URL-encoded,
so no value can change the host or add a path segment), through the platform's outbound
guard (knowledge.outbound: the host resolved once and checked, the connection made to
that address, redirects never followed), bounded in time (the action's timeout, for the
whole exchange) and in size (at most TANDEM_ACTIONS_MAX_RESPONSE_BYTES read).

The user is named in `Tandem-User` (empty for an anonymous visitor) with
`Tandem-User-Verified`, and `Tandem-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
"<t>.<METHOD>.<path and query>.<Tandem-User>.<raw body>">` with the action's signing
secret, so the endpoint can trust who it acts for (docs/actions.md shows the check)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import time
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

from knowledge.outbound import FetchRefused, _PinnedHTTPConnection, _PinnedHTTPSConnection, resolve
from tandem.webhooks.crypto import secret_decrypt

from . import conf
from .definitions import placeholders
from .models import Action

USER_AGENT = "Tandem-Actions/1.0"
BODY_METHODS = ("POST", "PUT", "PATCH")


@dataclass
class Answer:
    status: int | None  # the HTTP status, None when no answer came
    body: str           # what was read, decoded (at most the cap)
    duration_ms: int
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _piece(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def build_request(action: Action, arguments: dict) -> tuple[str, bytes]:
    """(URL, body): placeholders filled with URL-encoded arguments (safe=""), the other
    arguments as the JSON body (POST, PUT, PATCH) or as query parameters."""
    names = placeholders(action.url_template)
    url = action.url_template.format(**{n: quote(_piece(arguments.get(n, "")), safe="") for n in names})
    rest = {k: v for k, v in arguments.items() if k not in names}
    if action.method in BODY_METHODS:
        return url, json.dumps(rest, ensure_ascii=False).encode()
    if rest:
        url += ("&" if urlsplit(url).query else "?") + urlencode({k: _piece(v) for k, v in rest.items()})
    return url, b""


def sign(*, secret: str, timestamp: int, method: str, target: str, user: str, body: bytes) -> str:
    signed = f"{timestamp}.{method}.{target}.{user}.".encode() + body
    return f"t={timestamp},v1={hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()}"


def call(action: Action, arguments: dict, *, user_id: str, verified: bool, call_id: str) -> Answer:
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    url, body = build_request(action, arguments)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = resolve(parts.hostname or "", port)
    except FetchRefused as exc:
        return Answer(None, "", took(), str(exc))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    user = user_id if verified else ""
    headers = {**action.headers, "User-Agent": USER_AGENT, "Tandem-Action": action.name, "Tandem-Call-Id": call_id,
               "Tandem-User": user, "Tandem-User-Verified": "true" if verified else "false",
               "Tandem-Signature": sign(secret=secret_decrypt(action.signing_secret_encrypted),
                                        timestamp=int(time.time()), method=action.method, target=target,
                                        user=user, body=body)}
    if action.secret_header_name and action.secret_header_encrypted:
        headers[action.secret_header_name] = secret_decrypt(action.secret_header_encrypted)
    if body:
        headers["Content-Type"] = "application/json"
    cls = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    conn = cls(parts.hostname, port, address, timeout=action.timeout_s)
    cap, read = conf.max_response_bytes(), []
    try:
        conn.request(action.method, target, body=body or None, headers=headers)
        raw = conn.getresponse()
        got = 0
        while got < cap:
            if time.monotonic() - started > action.timeout_s:
                return Answer(raw.status, "", took(), f"the answer took longer than {action.timeout_s:g} s")
            piece = raw.read(min(16384, cap - got))
            if not piece:
                break
            read.append(piece)
            got += len(piece)
        text = b"".join(read).decode("utf-8", "replace")
        error = "" if 200 <= raw.status < 300 else f"answered HTTP {raw.status}"
        return Answer(raw.status, text, took(), error)
    except TimeoutError:
        return Answer(None, "", took(), f"no answer within {action.timeout_s:g} s")
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, "", took(), f"{exc.__class__.__name__}: {exc}"[:300])
    finally:
        conn.close()
