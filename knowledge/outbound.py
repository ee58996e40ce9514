"""Fetching a page from the outside, SSRF-guarded: what every crawl request goes
through, and only ever on the CPU tier (a sync's Celery task), never on a web request or
a model worker.

The host is resolved once and the connection made to the address that was checked (a
second lookup, DNS rebinding, cannot swap in another). An address that is not globally
routable (loopback, private, link-local and so the cloud metadata address 169.254.169.254,
carrier-grade NAT, multicast, reserved, unspecified; IPv4-mapped IPv6 is read as IPv4)
is refused unless the operator lists the host in TANDEM_OUTBOUND_ALLOW_HOSTS (names or
addresses, as the URL spells them). Redirects are followed by hand, at most
MAX_REDIRECTS, each target checked again. A response is bounded in time (the connect
and every read, and the whole response against a deadline) and in size (read up to the
cap, never past it), and its content type must be one the caller accepts."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from django.conf import settings

MAX_REDIRECTS = 5
TIMEOUT_S = 10.0
MAX_BYTES = 5 * 1024 * 1024
USER_AGENT = "TandemBot/1.0 (+help-centre sync)"


class FetchRefused(Exception):
    """The request was not made or its answer not taken; `code` names why (`address`,
    `scheme`, `size`, `content_type`, `redirects`, `timeout`, `network`, `status`)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Response:
    url: str                    # after redirects
    status: int
    headers: dict[str, str]     # lower-cased names
    body: bytes = b""
    redirects: list[str] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"')
        return "utf-8"

    def text(self) -> str:
        try:
            return self.body.decode(self.charset, "replace")
        except LookupError:
            return self.body.decode("utf-8", "replace")


def allowed_hosts() -> set[str]:
    return {h.strip().lower() for h in getattr(settings, "TANDEM_OUTBOUND_ALLOW_HOSTS", []) if h.strip()}


def address_refusal(address: str) -> str | None:
    """Why an address may not be reached, or None when it is globally routable."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    # The most specific name first: 0.0.0.0 and 240.0.0.0/4 count as private too.
    for kind, test in (("loopback", ip.is_loopback), ("unspecified", ip.is_unspecified),
                       ("link-local", ip.is_link_local), ("multicast", ip.is_multicast),
                       ("reserved", ip.is_reserved), ("private", ip.is_private)):
        if test:
            return kind
    if not ip.is_global:  # carrier-grade NAT (100.64/10) and the like
        return "not public"
    return None


def resolve(host: str, port: int) -> str:
    """The address to connect to for `host`: its first resolved address, refused when
    any of them is not public (a name with one private address among public ones is
    refused whole) unless the operator allows the host."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise FetchRefused("network", f"{host} does not resolve ({exc.strerror}).") from None
    addresses = [info[4][0] for info in infos]
    if host.lower().strip("[]") not in allowed_hosts():
        for address in addresses:
            why = address_refusal(address)
            if why:
                raise FetchRefused("address", f"{host} resolves to {address}, a {why} address: refused "
                                              f"(the operator may allow it in TANDEM_OUTBOUND_ALLOW_HOSTS).")
    return addresses[0]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, port, address, **kwargs):
        super().__init__(host, port, **kwargs)
        self._address = address

    def connect(self):
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, address, **kwargs):
        super().__init__(host, port, context=ssl.create_default_context(), **kwargs)
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def fetch(url: str, *, accept: tuple[str, ...], headers: dict[str, str] | None = None,
          max_bytes: int = MAX_BYTES, timeout_s: float = TIMEOUT_S) -> Response:
    """GET `url` through the guard. A 304 comes back as it is (no body); another status
    of 400 or more raises FetchRefused("status"), as does a content type not in `accept`
    (matched as a prefix: "text/" takes every text type)."""
    deadline = time.monotonic() + timeout_s
    redirects: list[str] = []
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        response = _get_once(current, headers or {}, max_bytes=max_bytes, deadline=deadline)
        if response.status in (301, 302, 303, 307, 308) and response.headers.get("location"):
            redirects.append(current)
            current = urljoin(current, response.headers["location"])
            continue
        response.url, response.redirects = current, redirects
        if response.status == 304:
            return response
        if response.status >= 400:
            raise FetchRefused("status", f"{current} answered HTTP {response.status}.")
        if not any(response.content_type.startswith(a) for a in accept):
            raise FetchRefused("content_type", f"{current} is {response.content_type or 'of no stated type'}; "
                                               f"expected {', '.join(accept)}.")
        return response
    raise FetchRefused("redirects", f"{url} redirects more than {MAX_REDIRECTS} times.")


def _get_once(url: str, headers: dict[str, str], *, max_bytes: int, deadline: float) -> Response:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchRefused("scheme", f"{url} is not an http(s) URL.")
    if parts.username or parts.password:
        raise FetchRefused("scheme", f"{url} carries credentials.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve(parts.hostname, port)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchRefused("timeout", f"{url} took longer than allowed.")
    cls = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    conn = cls(parts.hostname, port, address, timeout=remaining)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("GET", path, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers})
        raw = conn.getresponse()
        got = {k.lower(): v for k, v in raw.getheaders()}
        declared = got.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise FetchRefused("size", f"{url} is {int(declared)} bytes; the limit is {max_bytes}.")
        body = bytearray()
        if raw.status not in (301, 302, 303, 307, 308, 304) and raw.status < 400:
            while True:
                if time.monotonic() > deadline:
                    raise FetchRefused("timeout", f"{url} took longer than allowed.")
                piece = raw.read(65536)
                if not piece:
                    break
                body += piece
                if len(body) > max_bytes:
                    raise FetchRefused("size", f"{url} is over {max_bytes} bytes.")
        return Response(url=url, status=raw.status, headers=got, body=bytes(body))
    except TimeoutError:
        raise FetchRefused("timeout", f"{url} took longer than allowed.") from None
    except (OSError, http.client.HTTPException) as exc:
        raise FetchRefused("network", f"{url}: {exc.__class__.__name__}: {exc}") from None
    finally:
        conn.close()
