"""API key material: generation, hashing and display prefixes. Pure functions, no ORM."""

from __future__ import annotations

import hashlib
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
