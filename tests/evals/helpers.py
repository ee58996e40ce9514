"""Rows of the evaluation harness that tests need without running anything: a tenant's
case and finished run, and a trial reply of one person's, for the console's sweeps
(every id a console path carries) and the harness's own tests."""

from __future__ import annotations

from tandem.chat.models import Conversation, Message
from tandem.evals.models import EvalCase, EvalResult, EvalRun
from tandem.evals.trial import TRY_VISITOR


def trial_reply(tenant, user, *, text: str = "Returns are free within 30 days.") -> Message:
    conversation = Conversation.objects.create(tenant=tenant, channel=Conversation.Channel.API,
                                               visitor_id=f"{TRY_VISITOR}{user.pk}")
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content="How do returns work?")
    return Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content=text,
                                  status=Message.Status.DONE, completion_tokens=8)


def finished_run(tenant, case: EvalCase, *, passed: bool = True, settings: str = "live") -> EvalRun:
    run = EvalRun.objects.create(tenant=tenant, settings=settings, status=EvalRun.Status.DONE, total=1,
                                 summary={"cases": 1, "passed": int(passed), "checks": {"answered": [1, 1]},
                                          "mean_repetition": 0.0, "mean_completion_tokens": 8.0,
                                          "mean_latency_ms": 900.0, "median_latency_ms": 900.0})
    EvalResult.objects.create(run=run, case=case, question=case.question, status="done", reply="Within 30 days.",
                              checks={"answered": True, "includes: 30 days": passed}, passed=passed,
                              completion_tokens=8, latency_ms=900.0)
    return run


def eval_ids(tenant, user) -> dict:
    """{"case_id", "run_id", "message_id"}: a case, a run of it and `user`'s trial reply
    (made once: a sweep asks for them for every path)."""
    case = EvalCase.objects.filter(tenant=tenant).first() or EvalCase.objects.create(
        tenant=tenant, question="How long do I have to return an item?", must_include=["30 days"])
    run = EvalRun.objects.filter(tenant=tenant).first() or finished_run(tenant, case)
    reply = (Message.objects.filter(conversation__tenant=tenant, role=Message.Role.ASSISTANT,
                                    conversation__visitor_id=f"{TRY_VISITOR}{user.pk}").first()
             or trial_reply(tenant, user))
    return {"case_id": case.pk, "run_id": run.pk, "message_id": reply.pk}
