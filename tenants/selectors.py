"""Reads of tenants and their usage. Tenant-owned rows are scoped through
`tenants.access`, so no view or consumer can forget the tenant filter."""

from __future__ import annotations

import datetime as dt

from django.db.models import QuerySet

from .access import access_list
from .models import ApiKey, Tenant, UsageRecord


def tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def widget_key_get(*, tenant: Tenant) -> ApiKey | None:
    """The tenant's first live widget key (the demo page embeds it)."""
    return access_list(ApiKey, tenant=tenant).filter(kind=ApiKey.Kind.WIDGET, revoked_at__isnull=True).first()


def tenant_list() -> QuerySet:
    return Tenant.objects.select_related("quota", "allocation").order_by("slug")


def percentile(values: list[float], q: float) -> float | None:
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
         "ttft_ms_p50": percentile(d["ttft"], 0.5), "ttft_ms_p99": percentile(d["ttft"], 0.99),
         "duration_ms_p50": percentile(d["dur"], 0.5), "duration_ms_p99": percentile(d["dur"], 0.99)}
        for day, d in sorted(days.items())
    ]


def _usage_rows(*, tenant_ids, start, end=None):
    from .models import UsageRecord

    rows = UsageRecord.objects.filter(created_at__gte=start)
    if end is not None:
        rows = rows.filter(created_at__lt=end)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=list(tenant_ids))
    return rows


def usage_window(*, tenant_ids=None, start) -> dict:
    """Finished requests since `start` (all tenants, or `tenant_ids`): how many, output
    tokens, TTFT p50/p99 in ms."""
    rows = list(_usage_rows(tenant_ids=tenant_ids, start=start).values_list("completion_tokens", "ttft_ms"))
    ttfts = [t for _, t in rows if t is not None]
    return {"requests": len(rows), "completion_tokens": sum(c for c, _ in rows),
            "ttft_ms_p50": percentile(ttfts, 0.5), "ttft_ms_p99": percentile(ttfts, 0.99)}


def usage_series(*, tenant_ids=None, start, bucket_s: int, buckets: int) -> list[dict]:
    """Finished requests in `buckets` consecutive buckets of `bucket_s` seconds from
    `start` (aligned to the bucket size by the caller): per bucket the requests, output
    tokens per second and TTFT p50/p99. Aggregated here, from UsageRecord, so a page
    receives at most a few hundred points whatever the traffic."""
    import datetime as dt

    end = start + dt.timedelta(seconds=bucket_s * buckets)
    t0 = start.timestamp()
    acc = [{"requests": 0, "tokens": 0, "ttft": []} for _ in range(buckets)]
    for created, completion, ttft in _usage_rows(tenant_ids=tenant_ids, start=start, end=end).values_list(
            "created_at", "completion_tokens", "ttft_ms").iterator(chunk_size=5000):
        i = int((created.timestamp() - t0) // bucket_s)
        if 0 <= i < buckets:
            b = acc[i]
            b["requests"] += 1
            b["tokens"] += completion
            if ttft is not None:
                b["ttft"].append(ttft)
    return [{"t": t0 + i * bucket_s, "requests": b["requests"],
             "tokens_per_s": round(b["tokens"] / bucket_s, 2),
             "ttft_ms_p50": percentile(b["ttft"], 0.5), "ttft_ms_p99": percentile(b["ttft"], 0.99)}
            for i, b in enumerate(acc)]


def audit_list(*, tenant: Tenant | None = None, entity: str | None = None) -> QuerySet:
    """The audit log, newest first: one tenant's records, or everything (operators)."""
    from .models import AuditLog

    rows = AuditLog.objects.select_related("tenant")
    if tenant is not None:
        rows = access_list(rows, tenant=tenant)
    if entity:
        rows = rows.filter(entity=entity)
    return rows.order_by("-created_at", "-id")


def pool_list() -> QuerySet:
    from .models import ComputePool

    return ComputePool.objects.prefetch_related(
        "prefill_allocations__tenant", "decode_allocations__tenant").order_by("role", "slug")


def pool_tenants(pool) -> list[Tenant]:
    """The tenants allocated to a pool (as prefill or decode), by name."""
    seen = {a.tenant_id: a.tenant for a in [*pool.prefill_allocations.all(), *pool.decode_allocations.all()]}
    return sorted(seen.values(), key=lambda t: t.name.lower())


