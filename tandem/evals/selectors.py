"""Reads of a tenant's cases and runs, through tenants.access (another tenant's id is
NotFound, like a missing one), and two runs side by side."""

from __future__ import annotations

from tandem.url_converters import row_id
from tenants.access import NotFound, access_list
from tenants.models import Tenant

from .models import EvalCase, EvalResult, EvalRun

RUNS_SHOWN = 50


def _by_int_id(model, what: str, *, tenant: Tenant, pk):
    try:
        pk = row_id(pk)  # out of range too: the database would refuse the query (a 500), not find nothing
    except (TypeError, ValueError):
        raise NotFound(what) from None
    row = access_list(model, tenant=tenant).filter(pk=pk).first()
    if row is None:
        raise NotFound(what)
    return row


def case_list(*, tenant: Tenant) -> list[EvalCase]:
    return list(access_list(EvalCase, tenant=tenant).select_related("expect_article"))


def case_get(*, tenant: Tenant, case_id) -> EvalCase:
    return _by_int_id(EvalCase.objects.select_related("expect_article", "tenant"), "case", tenant=tenant, pk=case_id)


def run_list(*, tenant: Tenant, limit: int = RUNS_SHOWN) -> list[EvalRun]:
    return list(access_list(EvalRun, tenant=tenant).select_related("created_by")[:limit])


def run_get(*, tenant: Tenant, run_id) -> EvalRun:
    return _by_int_id(EvalRun.objects.select_related("tenant", "created_by"), "run", tenant=tenant, pk=run_id)


def run_results(run: EvalRun) -> list[EvalResult]:
    return list(run.results.all())


def runs_compare(a: EvalRun, b: EvalRun) -> list[dict]:
    """One row per question asked in either run, in the first run's order then the
    second's: {"question", "a", "b", "change"}, where a and b are the results (None when
    that run did not ask it) and change is "fixed", "broken" or ""."""
    rows: dict = {}
    for side, run in (("a", a), ("b", b)):
        for r in run.results.all():
            key = r.case_id if r.case_id is not None else f"q:{r.question}"
            rows.setdefault(key, {"question": r.question, "a": None, "b": None})[side] = r
    for row in rows.values():
        ra, rb = row["a"], row["b"]
        row["change"] = ("fixed" if ra and rb and not ra.passed and rb.passed
                         else "broken" if ra and rb and ra.passed and not rb.passed else "")
    return list(rows.values())
