"""Running a tenant's cases through the real pipeline: each question is a new REST
conversation of the tenant's (its visitor id `eval:<run>`, left out of the Outcomes
figures), admitted, routed and metered like any, against the assistant's current
settings; the reply is read back from its stored message once the pipeline has written
it."""

from __future__ import annotations

import time
from pathlib import Path

from django.utils import timezone

from knowledge.models import Article, Citation
from tandem.chat import services as chat
from tandem.chat.models import Conversation, Message
from tenants.access import access_list
from tenants.models import ApiKey, Tenant

from .checks import Reply, case_checks, repetition_share
from .models import EvalCase, EvalResult, EvalRun

STARTER = Path(__file__).resolve().parent / "fixtures" / "demo-cases.json"
EVAL_VISITOR = "eval:"
WAIT_S = 120.0  # a reply not written by then is a `timeout`


class NoSecretKey(Exception):
    def __init__(self):
        super().__init__("The tenant has no live secret key to run its cases with.")


def _key(tenant: Tenant) -> ApiKey:
    key = ApiKey.objects.select_related("tenant").filter(
        tenant=tenant, kind=ApiKey.Kind.SECRET, revoked_at__isnull=True).first()
    if key is None:
        raise NoSecretKey()
    return key


def _reply(msg_id, *, deadline: float) -> Message | None:
    """The reply once the pipeline has written its end (a bounded wait on the stored row:
    a command's run, never a request thread's)."""
    while time.monotonic() < deadline:
        msg = Message.objects.select_related("conversation").get(pk=msg_id)
        if msg.is_final:
            return msg
        time.sleep(0.1)
    return None


def _run_case(run: EvalRun, case: EvalCase, key: ApiKey) -> EvalResult:
    started = time.monotonic()
    try:
        sub = chat.chat_submit(api_key=key, messages=[("user", case.question)], channel=Conversation.Channel.API,
                               visitor_id=f"{EVAL_VISITOR}{run.pk}")
    except Exception as exc:  # refused (quota, invalid text): the case fails with the reason
        return EvalResult(run=run, case=case, question=case.question, status="refused", reply=str(exc),
                          checks={"answered": False})
    msg = _reply(sub.assistant_message.pk, deadline=started + WAIT_S)
    latency = (time.monotonic() - started) * 1000
    if msg is None:
        chat.chat_cancel(tenant=run.tenant, message_id=sub.assistant_message.pk)
        reply = Reply(text="", status="timeout", cited_articles=[], handed_over=False)
    else:
        cited = [str(a) for a in Citation.objects.filter(message_id=msg.pk).order_by("rank")
                 .values_list("article_id", flat=True) if a]
        reply = Reply(text=msg.content, status=msg.status, cited_articles=cited,
                      handed_over=bool(msg.conversation.handoff_reason) or msg.finish_reason == "handover")
    checks = case_checks(expect_article=str(case.expect_article_id) if case.expect_article_id else None,
                         must_include=case.must_include, must_not_include=case.must_not_include,
                         expect_handover=case.expect_handover, reply=reply)
    return EvalResult(run=run, case=case, question=case.question, message_id=sub.assistant_message.pk,
                      reply=reply.text, status=reply.status, checks=checks, passed=all(checks.values()),
                      repetition=repetition_share(reply.text),
                      completion_tokens=msg.completion_tokens if msg else 0, latency_ms=latency)


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
        EvalCase.objects.create(tenant=tenant, question=c["question"], expect_article=article,
                                must_include=c.get("must_include", []), must_not_include=c.get("must_not_include", []),
                                expect_handover=c.get("handover"))
        have.add(c["question"])
        added += 1
    return added


def eval_run(*, tenant: Tenant) -> EvalRun:
    """Every case of the tenant, one after another; the run with its results and summary."""
    key = _key(tenant)
    run = EvalRun.objects.create(tenant=tenant)
    results = [_run_case(run, case, key) for case in access_list(EvalCase, tenant=tenant)]
    EvalResult.objects.bulk_create(results)
    n = len(results)
    run.summary = {
        "cases": n, "passed": sum(r.passed for r in results),
        "checks": {name: [sum(1 for r in results if r.checks.get(name)), sum(1 for r in results if name in r.checks)]
                   for name in sorted({c for r in results for c in r.checks})},
        "mean_repetition": sum(r.repetition for r in results) / n if n else None,
        "mean_completion_tokens": sum(r.completion_tokens for r in results) / n if n else None,
        "mean_latency_ms": sum(r.latency_ms or 0 for r in results) / n if n else None,
    }
    run.finished_at = timezone.now()
    run.save(update_fields=["summary", "finished_at"])
    return run
