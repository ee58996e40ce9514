"""Reads of tenants and their usage. Tenant-owned rows are scoped through
`tenants.access`, so no view or consumer can forget the tenant filter."""

from __future__ import annotations

import dataclasses
import datetime as dt

import redis
from django.db.models import QuerySet

from . import quotas
from .access import access_list
from .models import ApiKey, Tenant, UsageRecord


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def widget_key_get(*, tenant: Tenant) -> ApiKey | None:
    """The tenant's first live widget key (the demo page embeds it)."""
    return access_list(ApiKey, tenant=tenant).filter(kind=ApiKey.Kind.WIDGET, revoked_at__isnull=True).first()


def tenant_list() -> QuerySet:
    return Tenant.objects.select_related("quota", "allocation").order_by("slug")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (k - lo), 1)


def usage_daily(*, tenant: Tenant, start, end) -> list[dict]:
    """Per-day usage of one tenant (UTC days, inclusive), with latency percentiles; the
    rollup the API and the console show. Days without requests are left out."""
    rows = (
        access_list(UsageRecord, tenant=tenant)
        .filter(created_at__date__gte=start, created_at__date__lte=end)
        .values_list("created_at", "prompt_tokens", "completion_tokens", "ttft_ms", "duration_ms")
    )
    days: dict[dt.date, dict] = {}
    for created, prompt, completion, ttft, duration in rows:
        day = days.setdefault(created.astimezone(dt.UTC).date(), {"requests": 0, "prompt_tokens": 0,
                                                                  "completion_tokens": 0, "ttft": [], "dur": []})
        day["requests"] += 1
        day["prompt_tokens"] += prompt
        day["completion_tokens"] += completion
        if ttft is not None:
            day["ttft"].append(ttft)
        if duration is not None:
            day["dur"].append(duration)
    return [
        {"date": day.isoformat(), "requests": d["requests"], "prompt_tokens": d["prompt_tokens"],
         "completion_tokens": d["completion_tokens"], "total_tokens": d["prompt_tokens"] + d["completion_tokens"],
         "ttft_ms_p50": _percentile(d["ttft"], 0.5), "ttft_ms_p99": _percentile(d["ttft"], 0.99),
         "duration_ms_p50": _percentile(d["dur"], 0.5), "duration_ms_p99": _percentile(d["dur"], 0.99)}
        for day, d in sorted(days.items())
    ]


def tenant_usage_vs_quota(client: redis.Redis, *, tenant: Tenant) -> dict:
    """What the console shows per tenant: live counters from the quota limiter (Redis)
    beside today's recorded usage (database) and the limits themselves."""
    limits = quotas.QuotaLimits.from_quota(tenant.quota)
    today = dt.datetime.now(dt.UTC).date()
    recorded = usage_daily(tenant=tenant, start=today, end=today)
    return {
        "limits": dataclasses.asdict(limits),
        "live": quotas.usage_snapshot(client, tenant_id=tenant.pk, limits=limits),
        "today": recorded[0] if recorded else None,
    }
