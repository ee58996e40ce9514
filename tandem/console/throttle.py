"""Failed sign-ins are throttled: after `MAX_PER_USERNAME` failures for one username, or
`MAX_PER_ADDRESS` from one client address, within `WINDOW_S`, sign-in is refused for the
rest of the window without checking the password (so guessing cannot go on, and the
answer does not tell whether the password was right). Counters live in Redis, so every
web process shares them, and expire on their own; a successful sign-in clears the
username's counter.

A username is counted as Django authenticates it (NFKC-normalised, as its form and
`normalize_username` do), so look-alikes such as a full-width "ｓ" count with the
plain name; the address is the client's through the platform's trusted-proxy rule
(tandem.net), so behind the proxy every client is not one address."""

from __future__ import annotations

import hashlib
import logging
import unicodedata

import redis

from ..net import client_ip
from .workers import redis_client

WINDOW_S = 15 * 60
MAX_PER_USERNAME = 5
MAX_PER_ADDRESS = 30
PREFIX = "tandem:console:signin-failures"

log = logging.getLogger(__name__)


def normalise_username(username: str) -> str:
    """The name Django looks up (NFKC, as django.contrib.auth's UsernameField), folded
    to lower case: every spelling that can reach one account counts as one."""
    return unicodedata.normalize("NFKC", username).strip().lower()


def _keys(username: str, address: str) -> list[str]:
    # Hashed: a username typed into the form is not stored as it was typed.
    name = hashlib.sha256(normalise_username(username).encode()).hexdigest()[:32]
    return [f"{PREFIX}:user:{name}", f"{PREFIX}:addr:{address}"]


def client_address(request) -> str:
    return client_ip(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR")) or "unknown"


def retry_after_s(*, username: str, address: str) -> int:
    """Seconds until sign-in is allowed again for this username and address (0: now)."""
    user_key, addr_key = _keys(username, address)
    try:
        pipe = redis_client().pipeline(transaction=False)
        pipe.get(user_key).ttl(user_key).get(addr_key).ttl(addr_key)
        user_n, user_ttl, addr_n, addr_ttl = pipe.execute()
    except redis.RedisError:
        log.exception("sign-in throttle: Redis unavailable, not throttling")
        return 0
    waits = []
    if int(user_n or 0) >= MAX_PER_USERNAME:
        waits.append(max(1, user_ttl))
    if int(addr_n or 0) >= MAX_PER_ADDRESS:
        waits.append(max(1, addr_ttl))
    return max(waits, default=0)


def count_failure(*, username: str, address: str) -> None:
    try:
        pipe = redis_client().pipeline(transaction=True)
        for key in _keys(username, address):
            # The window starts at the first failure (SET NX), the count only grows.
            pipe.set(key, 0, ex=WINDOW_S, nx=True)
            pipe.incr(key)
        pipe.execute()
    except redis.RedisError:
        log.exception("sign-in throttle: could not count a failure")


def clear(*, username: str, address: str) -> None:
    try:
        redis_client().delete(_keys(username, address)[0])
    except redis.RedisError:
        log.exception("sign-in throttle: could not clear")
