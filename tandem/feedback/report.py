"""The Outcomes page's figures (docs/outcomes.md), per day or week and in total, read
from the rollup's `ConversationOutcome` rows of one tenant (never its messages)."""

from __future__ import annotations

import datetime as dt
from statistics import mean, median

from tenants.access import access_list
from tenants.models import Tenant

from .models import ConversationOutcome

Outcome = ConversationOutcome.Outcome
REASONS = ("button", "words", "ungrounded", "agent")
FIELDS = ["conversation_id", "day", "outcome", "handoff_reason", "ai_involved", "first_ai_response_ms",
          "first_human_response_ms", "replies", "unanswered_replies", "thumbs_up", "thumbs_down", "csat_score",
          "csat_answered_by", "prompt_tokens", "completion_tokens", "prefill_s", "decode_s"]


def outcome_rows(*, tenant: Tenant, start: dt.date, end: dt.date) -> list[dict]:
    """The rollup's rows of conversations started from `start` to `end` (inclusive)."""
    return list(access_list(ConversationOutcome, tenant=tenant).filter(day__gte=start, day__lte=end)
                .order_by("day", "conversation_id").values(*FIELDS))


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _maybe(fn, values: list):
    return fn(values) if values else None


def summarize(rows: list[dict]) -> dict:
    """The figures of a set of conversations (definitions: docs/outcomes.md)."""
    n = len(rows)
    count = {o: sum(1 for r in rows if r["outcome"] == o) for o in Outcome.values}
    decided = n - count[Outcome.PENDING]
    involved = [r for r in rows if r["ai_involved"]]
    resolved = [r for r in rows if r["outcome"] == Outcome.AI_RESOLVED]
    up, down = sum(r["thumbs_up"] for r in rows), sum(r["thumbs_down"] for r in rows)
    by_reason = {reason: sum(1 for r in rows if r["handoff_reason"] == reason) for reason in REASONS}
    csat = {who: [r["csat_score"] for r in rows if r["csat_score"] and r["csat_answered_by"] == who]
            for who in ("ai", "human")}
    return {
        "conversations": n,
        "outcomes": count,
        "involvement": _share(len(involved), n),
        "ai_resolved_rate": _share(count[Outcome.AI_RESOLVED], decided),
        "handover_rate": _share(sum(by_reason.values()), n),
        "handover_by_reason": by_reason,
        "deflection": _share(sum(1 for r in involved if not r["handoff_reason"]), len(involved)),
        "median_first_response_ai_ms": _maybe(median, [r["first_ai_response_ms"] for r in rows
                                                        if r["first_ai_response_ms"] is not None]),
        "median_first_response_human_ms": _maybe(median, [r["first_human_response_ms"] for r in rows
                                                           if r["first_human_response_ms"] is not None]),
        "thumbs_up": up, "thumbs_down": down, "thumbs_up_share": _share(up, up + down),
        "csat_ai": _maybe(mean, csat["ai"]), "csat_ai_count": len(csat["ai"]),
        "csat_human": _maybe(mean, csat["human"]), "csat_human_count": len(csat["human"]),
        "unanswered": sum(r["unanswered_replies"] for r in rows) + by_reason["ungrounded"],
        "cost_per_ai_resolved": {
            "tokens": _maybe(mean, [r["prompt_tokens"] + r["completion_tokens"] for r in resolved]),
            "prefill_s": _maybe(mean, [r["prefill_s"] for r in resolved]),
            "decode_s": _maybe(mean, [r["decode_s"] for r in resolved]),
        },
    }


def _bucket(day: dt.date, period: str) -> dt.date:
    return day - dt.timedelta(days=day.weekday()) if period == "week" else day


def outcomes_report(*, tenant: Tenant, start: dt.date, end: dt.date, period: str = "day") -> dict:
    """{"total": summary, "periods": [{"start": date, **summary}, …] oldest first, every
    day (or ISO week, from its Monday) of the range, empty ones too}."""
    rows = outcome_rows(tenant=tenant, start=start, end=end)
    groups: dict[dt.date, list[dict]] = {}
    day = _bucket(start, period)
    while day <= end:
        groups[day] = []
        day += dt.timedelta(days=7 if period == "week" else 1)
    for r in rows:
        groups.setdefault(_bucket(r["day"], period), []).append(r)
    return {"total": summarize(rows), "periods": [{"start": d, **summarize(g)} for d, g in groups.items()]}
