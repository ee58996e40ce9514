"""The contract between the quota limiter and its callers: what a tenant may use
(`QuotaLimits`) and what the limiter answered (`Admission`), with the OpenAI-style
rate-limit headers it implies. No Redis and no ORM here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Reasons a request is refused. The first two are about the request itself (answer 400:
# waiting will never help); the others are rate limits (answer 429 with Retry-After).
# "stale" is not a refusal to pass on: the caller's limits are out of date (see admit).
SIZE_REASONS = frozenset({"prompt_too_long", "max_tokens_too_large"})
SUBJECT_LIMITS = ("requests_per_minute", "tokens_per_minute", "concurrent_streams")
SUBJECTS = ("visitor", "ip")  # a widget key's visitors and client IPs (SubjectLimits)
RATE_REASONS = frozenset(
    {"requests_per_minute", "tokens_per_minute", "concurrent_streams", "daily_token_budget",
     *(f"{subject}_{limit}" for subject in SUBJECTS for limit in SUBJECT_LIMITS)}
)


@dataclass(frozen=True)
class SubjectLimits:
    """Limits for one caller within a tenant: one visitor, or one client IP, of a public
    widget key. Checked with the tenant's in the same atomic admission; refused as
    `<name>_<limit>` (e.g. "visitor_requests_per_minute")."""

    name: str  # one of SUBJECTS
    identity: str  # the visitor id or the IP (hashed into the key)
    requests_per_minute: int
    tokens_per_minute: int
    max_concurrent_streams: int


@dataclass(frozen=True)
class QuotaLimits:
    """A tenant's limits, as plain numbers so the limiter never needs the ORM.

    A limit of 0 allows nothing (a switched-off tenant), it is not "unlimited"."""

    requests_per_minute: int
    tokens_per_minute: int
    max_concurrent_streams: int
    daily_token_budget: int
    max_prompt_tokens: int
    max_output_tokens: int

    @classmethod
    def from_quota(cls, quota: Any) -> QuotaLimits:
        """From a `tenants.models.Quota` row (or anything with the same attributes)."""
        return cls(
            requests_per_minute=int(quota.requests_per_minute),
            tokens_per_minute=int(quota.tokens_per_minute),
            max_concurrent_streams=int(quota.max_concurrent_streams),
            daily_token_budget=int(quota.daily_token_budget),
            max_prompt_tokens=int(quota.max_prompt_tokens),
            max_output_tokens=int(quota.max_output_tokens),
        )


@dataclass(frozen=True)
class Admission:
    """The limiter's answer for one request.

    `retry_after_s` is the real time until the same request would pass if nothing else
    changed: None when it was allowed, when the request itself is too large (size
    reasons), or when it is larger than the rate limit itself (it will never fit).
    `remaining_*` and `reset_*` describe the windows after this admission (so an allowed
    request is already counted in them)."""

    allowed: bool
    reason: str | None
    retry_after_s: float | None
    limit_requests: int
    remaining_requests: int
    reset_requests_s: float  # until the requests window is empty again
    limit_tokens: int
    remaining_tokens: int
    reset_tokens_s: float  # until the tokens window is empty again
    reserved_tokens: int  # prompt + max output tokens held for this request if allowed
    streams_in_flight: int
    daily_tokens_used: int
    # The value of admit's `if_current` key when it ran (0 when missing or not asked).
    current: int = 0

    @property
    def http_status(self) -> int:
        if self.allowed:
            return 200
        return 400 if self.reason in SIZE_REASONS else 429

    def headers(self) -> dict[str, str]:
        """The `x-ratelimit-*` headers (set them on every response, before the first byte
        of a stream), plus `retry-after` (whole seconds, rounded up) and `retry-after-ms`
        (which the official openai client prefers) when refused with a retry time."""
        out = {
            "x-ratelimit-limit-requests": str(self.limit_requests),
            "x-ratelimit-remaining-requests": str(self.remaining_requests),
            "x-ratelimit-reset-requests": format_duration(self.reset_requests_s),
            "x-ratelimit-limit-tokens": str(self.limit_tokens),
            "x-ratelimit-remaining-tokens": str(self.remaining_tokens),
            "x-ratelimit-reset-tokens": format_duration(self.reset_tokens_s),
        }
        if not self.allowed and self.retry_after_s is not None:
            out["retry-after"] = str(max(1, math.ceil(self.retry_after_s)))
            out["retry-after-ms"] = str(max(1, math.ceil(self.retry_after_s * 1000)))
        return out


def format_duration(seconds: float) -> str:
    """A duration as OpenAI writes it in `x-ratelimit-reset-*` (Go's time.Duration
    style, millisecond precision): "0s", "250ms", "1s", "8.64s", "6m0s", "1h2m3.5s"."""
    ms = max(0, round(seconds * 1000))
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs = f"{ms // 1000}.{ms % 1000:03d}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
