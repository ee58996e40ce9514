"""The client's real IP address. `X-Forwarded-For` is believed only when the connection
comes from a proxy listed in TANDEM_TRUSTED_PROXIES (addresses or CIDR networks): the
header is then read from the right, skipping every trusted proxy, and the first address
that is not one is the client. Anyone else's header is ignored (it is theirs to forge)."""

from __future__ import annotations

import functools
import ipaddress

from django.conf import settings


@functools.cache
def _trusted(proxies: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _is_trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in _trusted(tuple(settings.TANDEM_TRUSTED_PROXIES)))


def client_ip(peer: str | None, forwarded_for: str | None) -> str:
    """The client's address, from the socket's peer and its X-Forwarded-For header."""
    address = peer or ""
    if not forwarded_for or not _is_trusted(address):
        return address
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return address  # a malformed chain: trust nothing beyond the proxy
        if not _is_trusted(hop):
            return hop
        address = hop
    return address


def scope_client_ip(scope: dict) -> str:
    """client_ip for an ASGI scope (a websocket's or an HTTP request's)."""
    peer = (scope.get("client") or [None])[0]
    headers = dict(scope.get("headers") or [])
    forwarded = headers.get(b"x-forwarded-for", b"").decode("latin-1") or None
    return client_ip(peer, forwarded)
