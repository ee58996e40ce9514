"""The evaluation harness: the checks of one reply (pure), and runs through the real
platform (the tiny model) printed by `manage.py assistant eval`: one with a case that
passes and a case that fails, its usage metered and its conversations left out of the
Outcomes figures; one with the draft's settings (its reply length and system prompt),
where a request for a person is a hand-over that stays on the reply (no inbox)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from tandem.chat.models import Conversation
from tandem.evals import drafts
from tandem.evals.checks import Reply, case_checks, repetition_share
from tandem.evals.models import EvalCase, EvalResult, EvalRun
from tandem.feedback.models import ConversationOutcome
from tandem.feedback.rollup import outcomes_rollup
from tenants.models import UsageRecord
from tests.factories import make_tenant


def test_each_expectation_is_checked_only_when_the_case_has_it():
    reply = Reply(text="Returns are free within 30 days.", status="done", cited_articles=["a2", "a1"],
                  handed_over=False)
    checks = case_checks(expect_article="a1", must_include=["30 days"], must_not_include=["fee"],
                         expect_handover=True, reply=reply)
    assert checks == {"answered": True, "retrieval_hit": True, "citation_first": False, "includes: 30 days": True,
                      "excludes: fee": True, "handover": False}
    assert case_checks(expect_article=None, must_include=[], must_not_include=[], expect_handover=None,
                       reply=reply) == {"answered": True}


def test_the_repetition_share_tells_a_loop_from_prose():
    assert repetition_share("one two three four five six") == 0.0
    assert repetition_share("go on go on go on go on go on go on") > 0.7
    assert repetition_share("") == 0.0


@pytest.mark.django_db(transaction=True)
def test_a_run_through_the_real_platform_passes_one_case_and_fails_another(platform):
    created = make_tenant(max_output_tokens=8)
    tenant = created.tenant
    good = EvalCase.objects.create(tenant=tenant, question="Hello!", must_not_include=["zq-never-said-zq"])
    bad = EvalCase.objects.create(tenant=tenant, question="Hi there", must_include=["the password is platypus"])
    out = io.StringIO()
    call_command("assistant", "eval", tenant.slug, stdout=out)
    run = EvalRun.objects.get(tenant=tenant)
    results = {r.case_id: r for r in EvalResult.objects.filter(run=run)}
    assert results[good.pk].passed and results[good.pk].status == "done" and results[good.pk].reply
    assert not results[bad.pk].passed
    assert results[bad.pk].checks == {"answered": True, "includes: the password is platypus": False}
    assert run.summary["passed"] == 1 and run.summary["cases"] == 2
    text = out.getvalue()
    assert "1/2 cases passed" in text and "FAIL" in text and "[includes: the password is platypus]" in text
    # Metered as any reply, and not a visitor's conversation in the Outcomes figures.
    assert UsageRecord.objects.filter(message_id__in=[r.message_id for r in results.values()]).count() == 2
    outcomes_rollup()
    assert not ConversationOutcome.objects.filter(tenant=tenant).exists()


@pytest.mark.django_db
def test_the_starter_set_loads_once_and_links_the_tenants_articles():
    from knowledge.models import Article

    tenant = make_tenant().tenant
    policy = Article.objects.create(tenant=tenant, title="Our return policy", body="30 days.", text="30 days.",
                                    url="https://help.demo-co.example/returns/return-policy")
    out = io.StringIO()
    call_command("assistant", "load-cases", tenant.slug, stdout=out)
    assert out.getvalue().strip() == "6 cases added."
    case = EvalCase.objects.get(tenant=tenant, question="How many days do I have to return something?")
    assert (case.expect_article_id, case.must_include) == (policy.pk, ["30 days"])
    assert EvalCase.objects.get(tenant=tenant, question__startswith="I want to talk").expect_handover is True
    call_command("assistant", "load-cases", tenant.slug, stdout=out)
    assert EvalCase.objects.filter(tenant=tenant).count() == 6


@pytest.mark.django_db(transaction=True)
def test_a_run_with_the_draft_uses_its_settings_and_checks_the_hand_over(platform):
    tenant = make_tenant(max_output_tokens=8).tenant
    drafts.draft_save(tenant=tenant, system_prompt="Reply with one word.", max_tokens=2)
    asks = EvalCase.objects.create(tenant=tenant, question="What are your opening hours?", expect_handover=False)
    person = EvalCase.objects.create(tenant=tenant, question="I want to talk to a person, please.",
                                     expect_handover=True)
    out = io.StringIO()
    call_command("assistant", "eval", tenant.slug, "--draft", stdout=out)
    run = EvalRun.objects.get(tenant=tenant)
    assert run.settings == "draft" and run.status == "done"
    assert (run.settings_used["system_prompt"], run.settings_used["max_tokens"]) == ("Reply with one word.", 2)
    results = {r.case_id: r for r in run.results.all()}
    assert results[asks.pk].passed and 0 < results[asks.pk].completion_tokens <= 2  # the draft's max_tokens
    assert results[person.pk].passed and results[person.pk].checks["handover"] is True
    assert "2/2 cases passed" in out.getvalue() and "with the draft settings" in out.getvalue()
    # A test of the assistant: nobody waits for a person, the inbox stays empty.
    assert not Conversation.objects.filter(tenant=tenant).exclude(handoff="bot").exists()
