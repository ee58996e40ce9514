"""Per-tenant quotas, enforced in Redis with atomic Lua scripts so that every web process
and worker shares one count (no check-here-count-later overshoot under concurrency).

Limits: requests per minute and tokens per minute (sliding 60 s logs), concurrent
streams (leased slots), a daily token budget (UTC day), and the size of one request
(max prompt tokens, max output tokens). The request lifecycle:

    adm = admit(r, tenant_id=..., limits=QuotaLimits.from_quota(quota), request_id=msg_id,
                prompt_tokens=n, max_output_tokens=m)   # before anything is enqueued
    ... on finish:          reconcile(r, tenant_id=..., request_id=msg_id, actual_tokens=t)
    ... on failure/cancel:  release(r, tenant_id=..., request_id=msg_id, tokens_used=t)

See docs/quotas.md. Owns nothing of the ORM: callers pass `QuotaLimits`."""

from .limiter import (
    DEFAULT_STREAM_LEASE_S,
    admit,
    quota_key,
    reconcile,
    release,
    touch,
    usage_snapshot,
)
from .limits import (
    RATE_REASONS,
    SIZE_REASONS,
    Admission,
    QuotaLimits,
    SubjectLimits,
    format_duration,
)

__all__ = [
    "DEFAULT_STREAM_LEASE_S",
    "RATE_REASONS",
    "SIZE_REASONS",
    "Admission",
    "QuotaLimits",
    "SubjectLimits",
    "admit",
    "format_duration",
    "quota_key",
    "reconcile",
    "release",
    "touch",
    "usage_snapshot",
]
