"""The endpoints' signing secrets at rest: Fernet (AES-128-CBC + HMAC) with a key derived
from SECRET_KEY, so a database dump alone does not let anyone forge Tandem's signatures.
Rotating SECRET_KEY makes stored secrets unreadable: endpoints then need a new secret."""

from __future__ import annotations

import base64
import secrets

from cryptography.fernet import Fernet
from django.utils.crypto import salted_hmac


def _fernet() -> Fernet:
    key = salted_hmac("tandem.webhooks.secret", "fernet-key", algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(key))


def secret_generate() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def secret_encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def secret_decrypt(token: str) -> str:
    return _fernet().decrypt(token.encode()).decode()
