"""The signature every delivery carries, as Stripe makes it:
`Tandem-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. The
verifying side is documented in docs/webhooks.md (and tested with that very snippet)."""

from __future__ import annotations

import hashlib
import hmac


def signature_header(*, secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"
