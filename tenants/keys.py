"""API key material: generation, hashing and display prefixes. Pure functions, no ORM."""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "sk_"
WIDGET_PREFIX = "pk_"
DISPLAY_CHARS = 10


def generate_key(prefix: str) -> str:
    # 32 random bytes: far beyond guessing, which is why a fast hash is enough at rest.
    return prefix + secrets.token_urlsafe(32)


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def display_prefix(plaintext: str) -> str:
    return plaintext[:DISPLAY_CHARS]


def generate_identity_secret() -> str:
    return secrets.token_hex(32)


def identity_hash(secret: str, user_id: str) -> str:
    """What a tenant's server computes for a signed-in user: HMAC-SHA256(secret, user id),
    hex, as Intercom and Chatwoot do it."""
    return hmac.new(secret.encode("utf-8"), user_id.encode("utf-8"), hashlib.sha256).hexdigest()


def identity_hash_matches(secret: str, user_id: str, claimed: str) -> bool:
    if not secret or not isinstance(claimed, str):
        return False
    return hmac.compare_digest(identity_hash(secret, user_id).encode(), claimed.strip().lower().encode("utf-8"))
