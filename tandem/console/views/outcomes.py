"""Outcomes: is the assistant any good (docs/outcomes.md)? The tenant's figures per day
or week from the rollup's rows (tandem.feedback.report), with a CSV of one row per
conversation. Every member who can see the tenant can read it."""

from __future__ import annotations

import datetime as dt

from django.http import StreamingHttpResponse
from django.utils import timezone

from tandem.feedback import gaps, report

from ..csv_export import csv_lines
from .base import render_page, tenant_page

RANGES = {"7": 7, "30": 30, "90": 90}
WHY = {"no_source": "no source", "thumbs_down": "thumbs down", "ungrounded": "handed over, ungrounded"}
SEGMENTS = [("ai_resolved", "AI-resolved"), ("handed_over", "Handed over"), ("human_resolved", "Human-resolved"),
            ("abandoned", "Abandoned"), ("pending", "Pending")]


def _range(request) -> tuple[str, int, str, dt.date, dt.date]:
    """The page's choices, falling back to the defaults for anything else."""
    days_key = request.GET.get("days") if request.GET.get("days") in RANGES else "30"
    period = request.GET.get("period") if request.GET.get("period") in ("day", "week") else "day"
    end = timezone.now().astimezone(dt.UTC).date()
    return days_key, RANGES[days_key], period, end - dt.timedelta(days=RANGES[days_key] - 1), end


def _bar(summary: dict) -> dict:
    """One period's stacked bar: a segment per outcome, sized by its count, and the words
    a screen reader says for it."""
    parts = [(key, label, summary["outcomes"][key]) for key, label in SEGMENTS if summary["outcomes"][key]]
    words = ", ".join(f"{n} {label.lower()}" for _, label, n in parts)
    return {"segments": parts, "label": f"{summary['conversations']} conversations" + (f": {words}" if words else "")}


@tenant_page(methods=("GET",))
def outcomes(request, access):
    days_key, _, period, start, end = _range(request)
    data = report.outcomes_report(tenant=access.tenant, start=start, end=end, period=period)
    periods = [{**p, "bar": _bar(p)} for p in reversed(data["periods"])]
    peak = max((p["conversations"] for p in periods), default=0)
    return render_page(request, "console/outcomes.html",
                       {"total": data["total"], "periods": periods, "peak": peak, "days": days_key,
                        "gaps": [{**g, "why": " · ".join(f"{WHY[k]} {n}" for k, n in g["reasons"].items())}
                                 for g in gaps.knowledge_gaps(tenant=access.tenant, start=start, end=end)],
                        "period": period, "start": start, "end": end, "segments": SEGMENTS,
                        "ranges": list(RANGES)}, access=access, nav="outcomes")


@tenant_page(methods=("GET",))
def outcomes_export(request, access):
    """One row per conversation of the range, as the rollup classified and costed it."""
    _, _, _, start, end = _range(request)
    rows = report.outcome_rows(tenant=access.tenant, start=start, end=end)
    response = StreamingHttpResponse(csv_lines(report.FIELDS, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="outcomes-{access.tenant.slug}-{start}-{end}.csv"'
    return response
