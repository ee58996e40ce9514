"""admit / reconcile / release / touch / usage_snapshot: the quota limiter's operations,
each one Lua script run atomically in Redis (see `scripts.py`).

Takes a Redis client, a tenant id and `QuotaLimits`; never the ORM, so the web tier, the
workers and tests can all call it with what they have."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import redis
from redis.commands.core import Script

from . import scripts
from .limits import Admission, QuotaLimits, SubjectLimits

# How long a concurrency slot outlives its admission when nobody reconciles or releases
# it (a crashed worker). Long enough for a slow generation under load; a worker streaming
# for longer calls `touch` to extend it.
DEFAULT_STREAM_LEASE_S = 600.0

KEY_PREFIX = "tandem:quota"

# Scripts registered once per client (register_script hashes the source; EVALSHA then
# sends only the hash, and redis-py reloads the script if the server lost it).
_registered: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()


def quota_key(tenant_id: int | str, name: str) -> str:
    """`tandem:quota:<tenant id>:<name>` (rpm, tpm, tpm:tok, streams, res, daily, refused;
    `<subject>:<hash>:<rpm|tpm|tpm:tok|streams>` for a visitor's or an IP's own)."""
    return f"{KEY_PREFIX}:{tenant_id}:{name}"


def subject_keys(tenant_id: int | str, subject: SubjectLimits) -> list[str]:
    # Hashed: a visitor id or an address is not written into key names as sent.
    digest = hashlib.sha256(subject.identity.encode()).hexdigest()[:24]
    return [quota_key(tenant_id, f"{subject.name}:{digest}:{n}") for n in ("rpm", "tpm", "tpm:tok", "streams")]


def admit(
    client: redis.Redis,
    *,
    tenant_id: int | str,
    limits: QuotaLimits,
    request_id: str | UUID,
    prompt_tokens: int,
    max_output_tokens: int,
    now: float | None = None,
    stream_lease_s: float = DEFAULT_STREAM_LEASE_S,
    if_current: tuple[str, int] | None = None,
    store: Mapping[str, tuple[str, float]] | None = None,
    subjects: Sequence[SubjectLimits] = (),
) -> Admission:
    """Admit one request or refuse it, atomically across every process.

    Checks the request's size (prompt, max output tokens), then requests per minute,
    tokens per minute (prompt + max output tokens reserved), concurrent streams and the
    daily token budget. If all pass, counts the request in all of them and holds a
    stream slot and a token reservation until `reconcile` or `release` (or the lease
    lapses); if any fails, counts nothing.

    `max_output_tokens` is what the request may generate: pass `limits.max_output_tokens`
    when the client did not ask for a cap. `now` (seconds since the epoch) is for tests;
    in production Redis's clock is used. `request_id` must be unique per request (the
    assistant message's UUID); admitting an id that is already open counts nothing more.

    `if_current=(key, value)`: `limits` were read when `key` (a change counter) held
    `value`; if it holds another now, nothing is counted and the reason is "stale" (read
    the limits again; `current` is the counter's value). `store`: keys to SET with their
    (value, TTL in seconds) in the same atomic step when the request is admitted: the
    request's own state lands with its admission, in one round trip, and a refused
    request leaves none.

    `subjects`: a widget key's visitor and client IP, each with limits of its own
    (requests and tokens per minute, concurrent streams), checked and counted in the same
    step. Every refusal is counted per reason and UTC day (`usage_snapshot`'s
    "refused_today")."""
    if prompt_tokens < 0 or max_output_tokens < 0:
        raise ValueError("token counts cannot be negative")
    condition_key, expected = if_current if if_current is not None else (quota_key(tenant_id, "no-condition"), "")
    stored = list((store or {}).items())
    reply = _run(
        client, "admit",
        [*(quota_key(tenant_id, n) for n in ("rpm", "tpm", "tpm:tok", "streams", "res", "daily")),
         condition_key, quota_key(tenant_id, "refused"),
         *(k for subject in subjects for k in subject_keys(tenant_id, subject)), *(k for k, _ in stored)],
        [_ms(now), str(request_id), int(prompt_tokens), int(max_output_tokens),
         limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrent_streams,
         limits.daily_token_budget, limits.max_prompt_tokens, limits.max_output_tokens,
         max(1, round(stream_lease_s * 1000)), str(expected), len(subjects),
         *(x for subject in subjects for x in (subject.name, subject.requests_per_minute,
                                               subject.tokens_per_minute, subject.max_concurrent_streams)),
         *(x for _, (value, ttl_s) in stored for x in (value, max(1, round(ttl_s * 1000))))],
    )
    allowed, reason, retry_ms, rpm_used, rpm_reset, tpm_used, tpm_reset, streams, daily, _, current = reply
    reason = reason.decode() if isinstance(reason, bytes) else reason
    return Admission(
        allowed=bool(allowed),
        reason=reason or None,
        retry_after_s=None if retry_ms < 0 else retry_ms / 1000,
        limit_requests=limits.requests_per_minute,
        remaining_requests=max(0, limits.requests_per_minute - rpm_used),
        reset_requests_s=rpm_reset / 1000,
        limit_tokens=limits.tokens_per_minute,
        remaining_tokens=max(0, limits.tokens_per_minute - tpm_used),
        reset_tokens_s=tpm_reset / 1000,
        reserved_tokens=int(prompt_tokens) + int(max_output_tokens),
        streams_in_flight=streams,
        daily_tokens_used=daily,
        current=int(current),
    )


def reconcile(
    client: redis.Redis,
    *,
    tenant_id: int | str,
    request_id: str | UUID,
    actual_tokens: int,
    now: float | None = None,
) -> bool:
    """The request finished: count `actual_tokens` (prompt + completion, as the model
    really used them) instead of its reservation, in the tokens window and the daily
    budget, and free its stream slot.

    Idempotent: only the first call for a request does anything; returns whether this call
    did. The tokens window keeps the entry at its admission time, so a request reconciled
    after it left the window changes only the daily count. Actual tokens above the
    reservation are counted as they are (the window may then read above its limit, and
    later requests wait for it to drain)."""
    return _settle(client, tenant_id, request_id, actual_tokens, now)


def release(
    client: redis.Redis,
    *,
    tenant_id: int | str,
    request_id: str | UUID,
    tokens_used: int = 0,
    now: float | None = None,
) -> bool:
    """The request failed or was cancelled: give its reservation back and free its
    stream slot. `tokens_used` is what the model already spent on it (prompt tokens once
    prefilled, plus tokens generated before the cancel); it stays counted so that
    cancelling cannot dodge the budget. Leave it 0 when nothing ran (e.g. enqueueing
    failed). Idempotent, like `reconcile`; after one of them, the other does nothing."""
    return _settle(client, tenant_id, request_id, tokens_used, now)


def touch(
    client: redis.Redis,
    *,
    tenant_id: int | str,
    request_id: str | UUID,
    stream_lease_s: float = DEFAULT_STREAM_LEASE_S,
    now: float | None = None,
) -> bool:
    """Extend an open request's stream lease to `stream_lease_s` from now (for a stream
    that may outlive its lease). Returns False if the request is no longer open."""
    return bool(_run(
        client, "touch", [quota_key(tenant_id, "streams"), quota_key(tenant_id, "res")],
        [_ms(now), str(request_id), max(1, round(stream_lease_s * 1000))],
    ))


def usage_snapshot(
    client: redis.Redis, *, tenant_id: int | str, limits: QuotaLimits, now: float | None = None
) -> dict[str, Any]:
    """What the tenant uses now against its limits, for the console. Reads only."""
    rpm, rpm_reset, tpm, tpm_reset, streams, daily, now_ms, refused = _run(
        client, "snapshot",
        [quota_key(tenant_id, n) for n in ("rpm", "tpm", "tpm:tok", "streams", "daily", "refused")],
        [_ms(now)],
    )
    refused = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in zip(refused[::2], refused[1::2], strict=True)}
    midnight_ms = (now_ms // scripts.DAY_MS + 1) * scripts.DAY_MS
    return {
        "requests_per_minute": _gauge(rpm, limits.requests_per_minute, reset_s=rpm_reset / 1000),
        "tokens_per_minute": _gauge(tpm, limits.tokens_per_minute, reset_s=tpm_reset / 1000),
        "concurrent_streams": _gauge(streams, limits.max_concurrent_streams),
        "daily_tokens": _gauge(daily, limits.daily_token_budget,
                               reset_s=(midnight_ms - now_ms) / 1000),
        # What admission refused today (UTC), by reason: e.g. a widget visitor's flood.
        "refused_today": ({k: v for k, v in refused.items() if k != "day"}
                          if refused.get("day") == now_ms // scripts.DAY_MS else {}),
        "at": now_ms / 1000,
    }


def _gauge(used: int, limit: int, *, reset_s: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"used": used, "limit": limit, "remaining": max(0, limit - used)}
    if reset_s is not None:
        out["reset_s"] = reset_s
    return out


def _settle(client, tenant_id, request_id, tokens: int, now: float | None) -> bool:
    return bool(_run(
        client, "settle",
        [quota_key(tenant_id, n) for n in ("tpm", "tpm:tok", "streams", "res", "daily")],
        [_ms(now), str(request_id), max(0, int(tokens))],
    ))


_SOURCES = {"admit": scripts.ADMIT, "settle": scripts.SETTLE,
            "touch": scripts.TOUCH, "snapshot": scripts.SNAPSHOT}


def _run(client: redis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
    per_client = _registered.get(client)
    if per_client is None:
        per_client = _registered.setdefault(client, {})
    script = per_client.get(name)
    if script is None:
        script = per_client[name] = client.register_script(_SOURCES[name])
    return script(keys=keys, args=args)


def _ms(now: float | None) -> str:
    # "" lets the script read Redis's clock
    return "" if now is None else str(round(now * 1000))
