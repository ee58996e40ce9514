"""Tenant → Assistant → Evaluations: the test cases (add, edit, delete), runs with the
live settings or the draft (started here, carried out by the CPU tier, their progress
polled by htmx), a run's page with per-case results and totals, and two runs side by
side. Logic is in tandem.evals; these views parse and render."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.evals import drafts, report, selectors, services
from tandem.evals.models import EvalCase, EvalRun
from tenants.access import NotFound
from tenants.membership import Can

from ..eval_forms import CaseForm
from .base import Obj, actor, render_page, tenant_page

CASE = {"case_id": Obj("case", EvalCase.objects.select_related("expect_article"), "case")}
RUN = {"run_id": Obj("run", EvalRun.objects.all(), "run")}


def _add_error(form, exc: services.EvalInputError) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


@tenant_page(write=Can.MANAGE, methods=("GET",))
def evals(request, access):
    tenant = access.tenant
    runs = selectors.run_list(tenant=tenant)
    return render_page(request, "console/evals/evals.html",
                       {"cases": selectors.case_list(tenant=tenant), "runs": runs,
                        "draft": drafts.draft_get(tenant=tenant), "can_manage": access.can_manage,
                        "compare_a": runs[1].pk if len(runs) > 1 else None,
                        "compare_b": runs[0].pk if runs else None},
                       access=access, nav="assistant")


def _case_page(request, access, form, *, case=None, status=200):
    return render_page(request, "console/evals/case_form.html", {"form": form, "case": case},
                       access=access, nav="assistant", status=status)


@tenant_page(write=Can.MANAGE)
def case_create(request, access):
    access.require(Can.MANAGE)
    form = CaseForm(request.POST or None, tenant=access.tenant)
    if request.method == "POST" and form.is_valid():
        try:
            services.case_create(tenant=access.tenant, **form.values())
        except services.EvalInputError as exc:
            _add_error(form, exc)
        else:
            messages.success(request, "Test case added.")
            return redirect("console:evals", slug=access.tenant.slug)
    return _case_page(request, access, form, status=400 if form.errors else 200)


@tenant_page(write=Can.MANAGE, objects=CASE)
def case_edit(request, access, case):
    access.require(Can.MANAGE)
    form = CaseForm(request.POST or None, tenant=access.tenant, initial=CaseForm.initial_for(case))
    if request.method == "POST" and form.is_valid():
        try:
            services.case_update(case=case, **form.values())
        except services.EvalInputError as exc:
            _add_error(form, exc)
        else:
            messages.success(request, "Test case saved.")
            return redirect("console:evals", slug=access.tenant.slug)
    return _case_page(request, access, form, case=case, status=400 if form.errors else 200)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=CASE)
def case_delete(request, access, case):
    services.case_delete(case=case)
    messages.success(request, "Test case deleted.")
    return redirect("console:evals", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def run_start(request, access):
    try:
        run = services.run_start(tenant=access.tenant, settings=request.POST.get("settings", ""),
                                 user=actor(request).user)
    except (services.EvalInputError, NotFound) as exc:
        messages.error(request, str(exc))
        return redirect("console:evals", slug=access.tenant.slug)
    return redirect("console:eval_run", slug=access.tenant.slug, run_id=run.pk)


def _run_context(run: EvalRun) -> dict:
    results = selectors.run_results(run)
    return {"run": run, "results": [{"r": r, "failed": report.failed_checks(r)} for r in results],
            "totals": report.totals(run)}


@tenant_page(methods=("GET",), objects=RUN)
def run_detail(request, access, run):
    return render_page(request, "console/evals/run.html", _run_context(run), access=access, nav="assistant")


@tenant_page(methods=("GET",), objects=RUN)
def run_progress(request, access, run):
    """The run's body, polled by htmx until the run is final (the answer then stops the
    polling: it no longer carries the trigger)."""
    return render_page(request, "console/evals/partials/run_body.html", _run_context(run), access=access)


@tenant_page(methods=("GET",))
def runs_compare(request, access):
    try:
        a = selectors.run_get(tenant=access.tenant, run_id=request.GET.get("a"))
        b = selectors.run_get(tenant=access.tenant, run_id=request.GET.get("b"))
    except NotFound:
        messages.error(request, "Choose two runs of this tenant to compare.")
        return redirect("console:evals", slug=access.tenant.slug)
    ta, tb = {t["name"]: t for t in report.totals(a)}, {t["name"]: t for t in report.totals(b)}
    names = list(dict.fromkeys([*ta, *tb]))
    totals = [{"label": (ta.get(n) or tb.get(n))["label"], "a": ta.get(n), "b": tb.get(n)} for n in names]
    return render_page(request, "console/evals/compare.html",
                       {"a": a, "b": b, "totals": totals, "rows": selectors.runs_compare(a, b)},
                       access=access, nav="assistant")
