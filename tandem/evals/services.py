"""A tenant's test cases (add, change, delete, load a set) and runs: every case asked
through the real pipeline (`ask`) with the live settings or the draft's, a few at a
time, each reply checked once it is final (`checks`).

A run advances in steps (`run_step`), each a short Celery task on the CPU tier's `cpu`
queue at its lowest priority: read the replies that finished, ask the next cases, send
the next step. No worker waits on a reply, so a CPU worker that runs a step also
prepares the prompts it asked for. A step names its number; only the run's current one
acts, so a step delivered twice does nothing the second time. `manage.py assistant
eval` runs the same steps in its own process."""

from __future__ import annotations

import logging
import re
import statistics
import time
from datetime import timedelta
from pathlib import Path

from celery import current_app
from django.db import transaction
from django.utils import timezone

from inference.pipeline import api as pipeline
from knowledge.models import Article, Citation
from tandem.chat.models import Message
from tandem.chat.services import QuotaRefused, chat_cancel
from tandem.chat.validation import InvalidInput, clean_user_text
from tenants import quotas
from tenants.access import NotFound, access_list, access_owned
from tenants.models import Tenant

from . import drafts
from .ask import EVAL_VISITOR, ask
from .assistant_settings import AssistantSettings, draft_settings, live_settings
from .checks import Reply, case_checks, repetition_share
from .models import EvalCase, EvalResult, EvalRun

log = logging.getLogger(__name__)
STARTER = Path(__file__).resolve().parent / "fixtures" / "demo-cases.json"
STEP_TASK = "evals.run_step"
STEP_QUEUE = "cpu"
STEP_PRIORITY = 9  # the broker's last step: visitors' requests on the same queue go first
STEP_EVERY_S = 0.5
IN_FLIGHT = 2  # cases asked at once: a run never takes more than this of the tenant's streams
WAIT_S = 120.0  # a reply not final by then is cancelled and counted a `timeout`
STALLED_S = WAIT_S + 60  # a run without a step for this long lost its step task
STOPPED = ("A reply was cancelled (by a person or an operator, or because the run's steps fell behind by more "
           "than the listener lease): the run stopped there.")
MAX_CASES = 200
MAX_PHRASES = 20
MAX_PHRASE_CHARS = 200
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class EvalInputError(ValueError):
    """Input that cannot be stored or run, and the field it came in."""

    def __init__(self, message: str, field: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.field = field
        self.code = code


# -- cases ------------------------------------------------------------------------------


def _phrases(value, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise EvalInputError(f"{field} must be a list of phrases.", field)
    # Control characters (NUL among them, which the database's JSON refuses) are dropped.
    phrases = [c for c in (CONTROL.sub("", p).strip() for p in value) if c]
    if len(phrases) > MAX_PHRASES:
        raise EvalInputError(f"At most {MAX_PHRASES} phrases.", field)
    if any(len(p) > MAX_PHRASE_CHARS for p in phrases):
        raise EvalInputError(f"A phrase has at most {MAX_PHRASE_CHARS} characters.", field)
    return phrases


def _case_values(tenant: Tenant, values: dict) -> dict:
    out = {}
    if "question" in values:
        try:
            out["question"] = clean_user_text(values["question"])
        except InvalidInput as exc:
            raise EvalInputError(str(exc), "question") from None
    if "expect_article" in values:
        article = values["expect_article"]
        if article in (None, ""):
            out["expect_article"] = None
        else:
            try:
                out["expect_article"] = (article if isinstance(article, Article) and article.tenant_id == tenant.pk
                                         else access_owned(Article, "article", tenant=tenant, pk=article))
            except NotFound:
                raise EvalInputError("No such article.", "expect_article") from None
    for field in ("must_include", "must_not_include"):
        if field in values:
            out[field] = _phrases(values[field], field)
    if "expect_handover" in values:
        if values["expect_handover"] not in (None, True, False):
            raise EvalInputError("expect_handover must be true, false or null (not checked).", "expect_handover")
        out["expect_handover"] = values["expect_handover"]
    return out


def case_create(*, tenant: Tenant, question, **values) -> EvalCase:
    if access_list(EvalCase, tenant=tenant).count() >= MAX_CASES:
        raise EvalInputError(f"A tenant keeps at most {MAX_CASES} test cases.", "question")
    return EvalCase.objects.create(tenant=tenant, **_case_values(tenant, {"question": question, **values}))


def case_update(*, case: EvalCase, **values) -> EvalCase:
    for name, value in _case_values(case.tenant, values).items():
        setattr(case, name, value)
    case.save()
    return case


def case_delete(*, case: EvalCase) -> None:
    case.delete()


def cases_load(*, tenant: Tenant, cases: list[dict]) -> int:
    """Add `cases` ({"question", "article_url"?, "must_include"?, "must_not_include"?,
    "handover"?}) that the tenant does not have yet (by question); the expected article is
    the tenant's article at that URL. How many were added."""
    have = set(access_list(EvalCase, tenant=tenant).values_list("question", flat=True))
    added = 0
    for c in cases:
        if c["question"] in have:
            continue
        article = (access_list(Article, tenant=tenant).filter(url=c["article_url"]).first()
                   if c.get("article_url") else None)
        case_create(tenant=tenant, question=c["question"], expect_article=article,
                    must_include=c.get("must_include", []), must_not_include=c.get("must_not_include", []),
                    expect_handover=c.get("handover"))
        have.add(c["question"])
        added += 1
    return added


# -- runs -------------------------------------------------------------------------------


def run_start(*, tenant: Tenant, settings: str = EvalRun.Settings.LIVE, draft_id=None, user=None,
              send: bool = True) -> EvalRun:
    """A new run of every case of the tenant with the live settings or its draft's (by
    `draft_id`, else the tenant's one draft), its first step sent once this commits
    (`send`=False: the caller steps it). EvalInputError when there is nothing to run."""
    if settings not in EvalRun.Settings.values:
        raise EvalInputError("settings must be 'live' or 'draft'.", "settings")
    if settings == EvalRun.Settings.DRAFT:
        draft = (drafts.draft_get_by_id(tenant=tenant, draft_id=draft_id) if draft_id
                 else drafts.draft_get(tenant=tenant))
        if draft is None:
            raise EvalInputError("The tenant has no draft of the assistant's settings.", "settings")
        used = draft_settings(draft)
    elif draft_id:
        raise EvalInputError("A draft is named only with settings 'draft'.", "draft")
    else:
        used = live_settings(tenant)
    case_ids = list(access_list(EvalCase, tenant=tenant).values_list("id", flat=True))
    if not case_ids:
        raise EvalInputError("The tenant has no test cases to run.", "cases")
    _refuse_a_second_run(tenant)
    run = EvalRun.objects.create(tenant=tenant, settings=settings, settings_used=used.as_dict(),
                                 total=len(case_ids), pending=case_ids,
                                 created_by=user if getattr(user, "pk", None) else None)
    if send:
        step_send(run_id=run.pk, step=0)
    return run


def _refuse_a_second_run(tenant: Tenant) -> None:
    """One run at a time per tenant (its runs share the tenant's streams). A run without
    a step for STALLED_S (its step task lost with a worker) is marked failed instead."""
    active = access_list(EvalRun, tenant=tenant).filter(status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING])
    stalled_before = timezone.now() - timedelta(seconds=STALLED_S)
    active.filter(progressed_at__lt=stalled_before).update(
        status=EvalRun.Status.FAILED, error="Stalled: no progress for a while.", finished_at=timezone.now())
    running = active.filter(progressed_at__gte=stalled_before).first()
    if running is not None:
        raise EvalInputError(f"Run {running.pk} is in progress: one run at a time.", "settings",
                             code="run_in_progress")


def step_send(*, run_id: int, step: int, countdown: float = 0) -> None:
    def send():
        try:
            current_app.send_task(STEP_TASK, args=[run_id, step], queue=STEP_QUEUE, priority=STEP_PRIORITY,
                                  countdown=countdown or None)
        except Exception:
            log.exception("could not send step %s of eval run %s", step, run_id)
            EvalRun.objects.filter(pk=run_id, step=step).update(
                status=EvalRun.Status.FAILED, error="Could not reach the task queue.", finished_at=timezone.now())

    transaction.on_commit(send)


def run_step(*, run_id: int, step: int, send: bool = True) -> bool:
    """Record the replies that ended, ask the next cases, and send step `step`+1 unless
    the run is over. Acts only when `step` is the run's current step. True once the run
    is final."""
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().select_related("tenant").filter(pk=run_id).first()
        if run is None or run.is_final:
            return True
        if run.step != step:
            return False  # a copy of a step already taken
        run.status = EvalRun.Status.RUNNING
        if _collect(run):
            _stop(run)
        else:
            # Nobody follows these replies' streams: the run is their listener.
            pipeline.keep_listening(request_ids=list(run.in_flight))
            _ask_next(run, AssistantSettings(**run.settings_used))
        if not run.is_final and not run.pending and not run.in_flight:
            _finish(run)
        run.step += 1
        run.save()
        if send and not run.is_final:
            step_send(run_id=run.pk, step=run.step, countdown=STEP_EVERY_S)
    return run.is_final


def _stop(run: EvalRun) -> None:
    """End the run where it is: its other replies in flight cancelled, nothing more asked."""
    for msg_id in run.in_flight:
        chat_cancel(tenant=run.tenant, message_id=msg_id)
    run.in_flight, run.pending = {}, []
    _finish(run, error=STOPPED)


def _collect(run: EvalRun) -> bool:
    """Results for the replies in flight that are final (or overdue: cancelled). True
    when one was cancelled by someone else (the run then stops)."""
    if not run.in_flight:
        return False
    cancelled = False
    msgs = {str(m.pk): m for m in Message.objects.filter(pk__in=list(run.in_flight))}
    cases = {c.pk: c for c in EvalCase.objects.filter(pk__in=list(run.in_flight.values()))}
    now = timezone.now()
    results = []
    for msg_id, case_id in list(run.in_flight.items()):
        msg = msgs.get(msg_id)
        overdue = msg is not None and not msg.is_final and (now - msg.created_at).total_seconds() > WAIT_S
        if msg is not None and not (msg.is_final or overdue):
            continue
        del run.in_flight[msg_id]
        case = cases.get(case_id)
        if case is None:
            continue  # deleted while it ran
        if msg is None or overdue:
            if msg is not None:
                chat_cancel(tenant=run.tenant, message_id=msg.pk)
            results.append(_result(run, case, message_id=msg_id, status="timeout", text="", cited=[]))
            continue
        cancelled = cancelled or msg.status == Message.Status.CANCELLED
        cited = list(Citation.objects.filter(message_id=msg.pk).order_by("rank").values("article_id", "title"))
        results.append(_result(
            run, case, message_id=msg_id, status=msg.status, text=msg.content, cited=cited,
            handed_over=msg.finish_reason == "handover", tokens=msg.completion_tokens,
            latency_ms=((msg.finished_at or now) - msg.created_at).total_seconds() * 1000))
    EvalResult.objects.bulk_create(results, ignore_conflicts=True)
    return cancelled


def _result(run: EvalRun, case: EvalCase, *, message_id, status: str, text: str, cited: list[dict],
            handed_over: bool = False, tokens: int = 0, latency_ms: float | None = None) -> EvalResult:
    reply = Reply(text=text, status=status, cited_articles=[str(c["article_id"]) for c in cited if c["article_id"]],
                  handed_over=handed_over)
    checks = case_checks(expect_article=str(case.expect_article_id) if case.expect_article_id else None,
                         must_include=case.must_include, must_not_include=case.must_not_include,
                         expect_handover=case.expect_handover, reply=reply)
    return EvalResult(run=run, case=case, question=case.question, message_id=message_id, reply=text, status=status,
                      checks=checks, passed=all(checks.values()), repetition=repetition_share(text),
                      completion_tokens=tokens, latency_ms=latency_ms,
                      sources=[{"article_id": str(c["article_id"]) if c["article_id"] else None, "title": c["title"]}
                               for c in cited])


def _ask_next(run: EvalRun, settings: AssistantSettings) -> None:
    while run.pending and len(run.in_flight) < IN_FLIGHT:
        case = access_list(EvalCase, tenant=run.tenant).filter(pk=run.pending[0]).first()
        if case is None:  # deleted since the run started
            run.pending.pop(0)
            run.total -= 1
            continue
        try:
            msg = ask(tenant=run.tenant, question=case.question, settings=settings, visitor_id=f"{EVAL_VISITOR}{run.pk}")
        except QuotaRefused as exc:
            if exc.reason in quotas.SIZE_REASONS:
                run.pending.pop(0)
                EvalResult.objects.create(run=run, case=case, question=case.question, status="refused", reply=str(exc),
                                          checks={"answered": False})
                continue
            if exc.reason == "daily_token_budget":
                _finish(run, error=str(exc))
            return  # a rate limit: the next step asks again
        except InvalidInput as exc:
            run.pending.pop(0)
            EvalResult.objects.create(run=run, case=case, question=case.question, status="refused", reply=str(exc),
                                      checks={"answered": False})
            continue
        run.pending.pop(0)
        run.in_flight[str(msg.pk)] = case.pk


def _finish(run: EvalRun, *, error: str = "") -> None:
    results = list(run.results.all())
    n = len(results)
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    run.summary = {
        "cases": n, "passed": sum(r.passed for r in results),
        "checks": {name: [sum(1 for r in results if r.checks.get(name)), sum(1 for r in results if name in r.checks)]
                   for name in sorted({c for r in results for c in r.checks})},
        "mean_repetition": sum(r.repetition for r in results) / n if n else None,
        "mean_completion_tokens": sum(r.completion_tokens for r in results) / n if n else None,
        "mean_latency_ms": sum(latencies) / len(latencies) if latencies else None,
        "median_latency_ms": statistics.median(latencies) if latencies else None,
    }
    run.status = EvalRun.Status.FAILED if error else EvalRun.Status.DONE
    run.error = error[:300]
    run.finished_at = timezone.now()


def eval_run(*, tenant: Tenant, settings: str = EvalRun.Settings.LIVE, poll_s: float = 0.2) -> EvalRun:
    """A whole run in this process (the management command): the same steps, taken here
    one after another as the replies come in."""
    run = run_start(tenant=tenant, settings=settings, send=False)
    while not run_step(run_id=run.pk, step=EvalRun.objects.get(pk=run.pk).step, send=False):
        time.sleep(poll_s)  # a command's polling of the stored replies, never a request thread's
    run.refresh_from_db()
    return run
