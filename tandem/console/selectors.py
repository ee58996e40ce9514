"""What the console's pages read: live metrics, usage against quota, pools with their
workers, conversations. Reads only; every tenant-owned query is scoped by the tenants
the caller passes (which come from tenants.membership)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import redis
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from tandem.chat import search
from tandem.chat.models import Conversation, Message
from tenants import quotas
from tenants.access import access_list
from tenants.models import ComputePool, Tenant, UsageRecord
from tenants.selectors import percentile, pool_list, pool_tenants, usage_series

from .workers import live_workers, redis_client

RATE_WINDOW_S = 60  # requests/min and output tokens/s: the last minute
LATENCY_WINDOW_S = 300  # TTFT percentiles and the error rate: the last five minutes
WARN_AT = 0.8  # a gauge this full is "near its limit"

# The charts: range -> (bucket seconds, buckets).
RANGES = {"hour": (60, 60), "day": (900, 96), "week": (3600, 168)}


def level(used: float, limit: float) -> str:
    """"full" at or past the limit, "warn" from WARN_AT of it, else "ok"."""
    if limit <= 0:
        return "full"
    ratio = used / limit
    return "full" if ratio >= 1 else "warn" if ratio >= WARN_AT else "ok"


def _gauge(used: int, limit: int, label: str) -> dict:
    pct = 100.0 if limit <= 0 else min(100.0, 100.0 * used / limit)
    return {"label": label, "used": used, "limit": limit, "pct": round(pct), "level": level(used, limit)}


def quota_gauges(tenant: Tenant, client: redis.Redis | None = None) -> list[dict] | None:
    """The tenant's live use of each rate limit (the limiter's own counters in Redis);
    None when Redis cannot be read."""
    limits = quotas.QuotaLimits.from_quota(tenant.quota)
    try:
        snap = quotas.usage_snapshot(client or redis_client(), tenant_id=tenant.pk, limits=limits)
    except redis.RedisError:
        return None
    return [
        _gauge(snap["requests_per_minute"]["used"], limits.requests_per_minute, "Requests per minute"),
        _gauge(snap["tokens_per_minute"]["used"], limits.tokens_per_minute, "Tokens per minute"),
        _gauge(snap["concurrent_streams"]["used"], limits.max_concurrent_streams, "Concurrent streams"),
        _gauge(snap["daily_tokens"]["used"], limits.daily_token_budget, "Daily tokens"),
    ]


def worst(gauges: list[dict] | None) -> str:
    if gauges is None:
        return "unknown"
    levels = {g["level"] for g in gauges}
    return "full" if "full" in levels else "warn" if "warn" in levels else "ok"


@dataclass
class Live:
    """The overview's live numbers, for all the tenants it covers or for one."""

    requests_per_min: int | None = 0  # admitted in the last 60 s (the limiter's window)
    output_tokens_per_s: float = 0.0
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    active_streams: int | None = 0
    finished: int = 0
    failed: int = 0
    _ttfts: list[float] = field(default_factory=list, repr=False)

    @property
    def error_rate_pct(self) -> float | None:
        total = self.finished + self.failed
        return None if total == 0 else round(100.0 * self.failed / total, 1)


def overview_live(tenants: list[Tenant]) -> tuple[Live, dict[int, Live]]:
    """The live numbers over `tenants`, overall and per tenant (see the windows above)."""
    now = timezone.now()
    rate_since = now - dt.timedelta(seconds=RATE_WINDOW_S)  # output tokens/s
    lat_since = now - dt.timedelta(seconds=LATENCY_WINDOW_S)
    ids = [t.pk for t in tenants]
    per = {t.pk: Live() for t in tenants}
    total = Live()

    for tenant_id, created, completion, ttft in UsageRecord.objects.filter(
            tenant_id__in=ids, created_at__gte=lat_since).values_list(
            "tenant_id", "created_at", "completion_tokens", "ttft_ms"):
        for live in (per[tenant_id], total):
            if created >= rate_since:
                live.output_tokens_per_s += completion / RATE_WINDOW_S
            if ttft is not None:
                live._ttfts.append(ttft)
    # Errors: the failed replies among those started in the window that ended.
    for row in (Message.objects.filter(role=Message.Role.ASSISTANT, conversation__tenant_id__in=ids,
                                       created_at__gte=lat_since)
                .values("conversation__tenant_id")
                .annotate(failed=Count("id", filter=Q(status=Message.Status.FAILED)),
                          ok=Count("id", filter=Q(status__in=[Message.Status.DONE, Message.Status.CANCELLED])))):
        for live in (per[row["conversation__tenant_id"]], total):
            live.failed += row["failed"]
            live.finished += row["ok"]
    # Requests per minute and active streams: the quota limiter's own counters (what
    # the tenants list and the quota page show), so the same number reads the same.
    client = redis_client()
    for t in tenants:
        gauges = quota_gauges(t, client)
        rpm, streams = (gauges[0]["used"], gauges[2]["used"]) if gauges else (None, None)
        per[t.pk].requests_per_min, per[t.pk].active_streams = rpm, streams
        for attr, value in (("requests_per_min", rpm), ("active_streams", streams)):
            current = getattr(total, attr)
            setattr(total, attr, None if current is None or value is None else current + value)
    for live in (total, *per.values()):
        live.output_tokens_per_s = round(live.output_tokens_per_s, 1)
        live.ttft_ms_p50 = percentile(live._ttfts, 0.5)
        live.ttft_ms_p99 = percentile(live._ttfts, 0.99)
    return total, per


def chart_data(*, tenant_ids: list[int] | None, range_name: str) -> dict:
    """The chart series for one range, as uPlot takes them (columns)."""
    bucket_s, buckets = RANGES.get(range_name, RANGES["hour"])
    now = timezone.now()
    end_bucket = int(now.timestamp()) // bucket_s * bucket_s
    start = dt.datetime.fromtimestamp(end_bucket - (buckets - 1) * bucket_s, tz=dt.UTC)
    rows = usage_series(tenant_ids=tenant_ids, start=start, bucket_s=bucket_s, buckets=buckets)
    return {
        "range": range_name if range_name in RANGES else "hour",
        "bucket_s": bucket_s,
        "t": [r["t"] for r in rows],
        "requests_per_min": [round(r["requests"] * 60 / bucket_s, 2) for r in rows],
        "tokens_per_s": [r["tokens_per_s"] for r in rows],
        "ttft_p50": [r["ttft_ms_p50"] for r in rows],
        "ttft_p99": [r["ttft_ms_p99"] for r in rows],
        "total_requests": sum(r["requests"] for r in rows),
    }


def tenant_rows(tenants: list[Tenant]) -> list[dict]:
    """The tenants list: each tenant with its live use of every limit and its worst level."""
    client = redis_client()
    rows = []
    for t in tenants:
        gauges = quota_gauges(t, client)
        rows.append({"tenant": t, "gauges": gauges, "level": worst(gauges),
                     "hot": [g for g in gauges or [] if g["level"] != "ok"]})
    return rows


def _pool_workers(pool: ComputePool, workers: list[dict]) -> list[dict]:
    return [w for w in workers if w["pool"] == pool.slug and w["role"] == pool.role]


# CPU workers serve the one shared "cpu" queue whatever pool they report (TANDEM_POOL):
# they belong to no compute pool, and are not "outside" one.
CPU_ROLE = "cpu"


def workers_outside_pools(pools: list[dict] | None = None) -> list[dict]:
    """Live model workers serving a queue that no ComputePool names (started with a pool
    that was never created, or whose pool was deleted): no tenant is routed to them."""
    known = {(p.role, p.slug) for p in ComputePool.objects.all()}
    return [w for w in live_workers() if w["role"] != CPU_ROLE and (w["role"], w["pool"]) not in known]


def cpu_workers() -> list[dict]:
    """The CPU tier's live workers (validation, retrieval, prompts; the outbound tasks)."""
    return [w for w in live_workers() if w["role"] == CPU_ROLE]


def pools_overview(*, with_tenants: bool = True) -> list[dict]:
    """Every pool with its live workers, capacity and load, and the tenants allocated to
    it. A decode or colocated pool's capacity is its workers' decode slots; a prefill
    pool's load is its queue."""
    workers = live_workers()
    out = []
    for pool in pool_list():
        ws = _pool_workers(pool, workers)
        for w in ws:
            w["level"] = level(w.get("batch") or 0, w.get("max_batch") or 0) if w.get("max_batch") else "ok"
            w["pct"] = round(100 * (w.get("batch") or 0) / w["max_batch"]) if w.get("max_batch") else None
        slots = sum(w.get("max_batch") or 0 for w in ws)
        busy = sum(w.get("batch") or 0 for w in ws)
        queue = sum(w.get("queue") or 0 for w in ws)
        if not ws:
            state, state_text = "full", "no live workers"
        elif pool.role == ComputePool.Role.PREFILL:
            state = "warn" if queue else "ok"
            state_text = f"{queue} queued" if queue else "idle" if not any(w.get("active_requests") for w in ws) else "serving"
        else:
            state = level(busy, slots) if slots else "ok"
            if queue and state == "full":
                state_text = f"full, {queue} waiting"
            else:
                state_text = "full" if state == "full" else f"{max(0, slots - busy)} of {slots} slots free"
        out.append({
            "pool": pool, "workers": ws, "slots": slots, "busy": busy, "free": max(0, slots - busy),
            "pct": round(100 * busy / slots) if slots else (100 if not ws else 0),
            "queue": queue, "tokens_per_s": round(sum(w.get("tokens_per_s") or 0 for w in ws), 1),
            "kv_tokens": sum(w.get("kv_tokens") or 0 for w in ws),
            "state": state, "state_text": state_text,
            "tenants": pool_tenants(pool) if with_tenants else [],
            "tenant_count": len(pool_tenants(pool)),
        })
    return out


# --- conversations ---------------------------------------------------------------------

def conversation_list(*, tenant: Tenant, channel: str = "", status: str = "", since=None, until=None,
                      q: str = "") -> QuerySet:
    rows = access_list(Conversation, tenant=tenant)
    if channel:
        rows = rows.filter(channel=channel)
    if status:
        rows = rows.filter(status=status)
    if since:
        rows = rows.filter(created_at__date__gte=since)
    if until:
        rows = rows.filter(created_at__date__lte=until)
    if q:
        # The database's full-text search over the messages (tandem.chat.search), the
        # visitor's name or e-mail, or their id pasted whole.
        rows = search.conversations_matching(rows, q, also=Q(visitor_id=q.strip()))
    first_question = (Message.objects.filter(conversation=OuterRef("pk"), role=Message.Role.USER)
                      .order_by("seq").values("content")[:1])
    return rows.annotate(message_count=Count("messages", distinct=True),
                         first_message=Subquery(first_question)).order_by("-updated_at")


def transcript(conversation: Conversation) -> list[dict]:
    """The conversation's messages, oldest first, each assistant reply with what served
    it (its UsageRecord: pools, workers, cached tokens) where one was written."""
    messages = list(conversation.messages.order_by("seq"))
    usage = {u.message_id: u for u in UsageRecord.objects.filter(
        tenant_id=conversation.tenant_id, message_id__in=[m.id for m in messages if m.role == "assistant"])}
    return [{"message": m, "usage": usage.get(m.id)} for m in messages]


EXPORT_FIELDS = ["conversation_id", "channel", "conversation_status", "visitor_id", "message_id",
                 "role", "content", "status", "created_at", "finished_at", "prompt_tokens",
                 "completion_tokens", "ttft_ms", "duration_ms", "finish_reason", "prefill_pool",
                 "decode_pool", "prefill_worker", "decode_worker", "error"]


def export_rows(conversations: QuerySet):
    """One dict per message of each conversation (EXPORT_FIELDS), conversation by
    conversation, read in chunks."""
    for conv in conversations.iterator(chunk_size=200):
        for item in transcript(conv):
            m, u = item["message"], item["usage"]
            yield {
                "conversation_id": str(conv.id), "channel": conv.channel, "conversation_status": conv.status,
                "visitor_id": conv.visitor_id, "message_id": str(m.id), "role": m.role, "content": m.content,
                "status": m.status, "created_at": m.created_at.isoformat(),
                "finished_at": m.finished_at.isoformat() if m.finished_at else None,
                "prompt_tokens": m.prompt_tokens, "completion_tokens": m.completion_tokens,
                "ttft_ms": m.ttft_ms, "duration_ms": m.duration_ms, "finish_reason": m.finish_reason,
                "prefill_pool": u.prefill_pool if u else "", "decode_pool": u.decode_pool if u else "",
                "prefill_worker": u.prefill_worker if u else "", "decode_worker": u.decode_worker if u else "",
                "error": m.error,
            }
