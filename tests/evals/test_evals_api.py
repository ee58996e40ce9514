"""The evaluation endpoints over REST, in-process (Django's test client): cases listed,
created, changed and deleted; runs started with the live or the draft settings and read
back with their results; bad input a 400 naming the field; another tenant's case, run
or draft a 404 like a missing one."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from knowledge.models import Article
from tandem.evals import drafts
from tandem.evals.models import EvalCase, EvalRun
from tests.evals.helpers import finished_run
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db
CASES, RUNS = "/api/v1/evals/cases/", "/api/v1/evals/runs/"


def client_for(t) -> Client:
    return Client(headers={"Authorization": f"Bearer {t.secret_key.plaintext}"})


def send(c, method, path, body):
    return getattr(c, method)(path, data=json.dumps(body), content_type="application/json")


def test_a_case_is_created_listed_changed_and_deleted():
    t = make_tenant()
    c = client_for(t)
    article = Article.objects.create(tenant=t.tenant, title="Returns", body="30 days.", text="30 days.")
    resp = send(c, "post", CASES, {"question": "  How long do I have to return an item? ",
                                   "expect_article": str(article.pk), "must_include": ["30 days", " "],
                                   "expect_handover": False})
    assert resp.status_code == 201, resp.content
    case = resp.json()
    assert case["question"] == "How long do I have to return an item?" and case["must_include"] == ["30 days"]
    assert case["expect_article"] == str(article.pk) and case["expect_handover"] is False
    assert [x["id"] for x in c.get(CASES).json()["data"]] == [case["id"]]
    resp = send(c, "patch", f"{CASES}{case['id']}/", {"must_not_include": ["fee"], "expect_handover": None})
    assert resp.status_code == 200, resp.content
    assert resp.json()["must_not_include"] == ["fee"] and resp.json()["expect_handover"] is None
    assert resp.json()["must_include"] == ["30 days"]
    assert c.delete(f"{CASES}{case['id']}/").status_code == 204
    assert not EvalCase.objects.filter(pk=case["id"]).exists()
    resp = send(c, "post", CASES, {"question": "Hi", "must_include": ["30\u0000 days", "\u0000"]})
    assert resp.status_code == 201 and resp.json()["must_include"] == ["30 days"]  # no control characters


@pytest.mark.parametrize("body, param", [
    ({}, "question"),
    ({"question": ""}, "question"),
    ({"question": 12}, "question"),
    ({"question": "Hi", "must_include": "30 days"}, "must_include"),
    ({"question": "Hi", "must_include": ["x" * 201]}, "must_include"),
    ({"question": "Hi", "expect_handover": "yes"}, "expect_handover"),
    ({"question": "Hi", "expect_article": "not-an-id"}, "expect_article"),
    ({"question": "Hi", "colour": "red"}, "colour"),
])
def test_bad_case_input_is_a_400_naming_the_field(body, param):
    resp = send(client_for(make_tenant()), "post", CASES, body)
    assert resp.status_code == 400, resp.content
    assert resp.json()["error"]["param"] == param


def test_another_tenants_case_run_article_and_draft_are_not_found():
    a, b = make_tenant(), make_tenant()
    ca = client_for(a)
    b_case = EvalCase.objects.create(tenant=b.tenant, question="Bravo?")
    b_run = finished_run(b.tenant, b_case)
    b_article = Article.objects.create(tenant=b.tenant, title="B", body="b", text="b")
    b_draft = drafts.draft_save(tenant=b.tenant, system_prompt="B's draft")
    for path in (f"{CASES}{b_case.pk}/", f"{RUNS}{b_run.pk}/", f"{CASES}999999/", f"{RUNS}abc/",
                 f"{CASES}{10**30}/", f"{RUNS}-1/"):
        resp = ca.get(path)
        assert resp.status_code == 404 and resp.json()["error"]["code"].endswith("_not_found"), path
    assert send(ca, "patch", f"{CASES}{b_case.pk}/", {"question": "Mine now?"}).status_code == 404
    assert ca.delete(f"{CASES}{b_case.pk}/").status_code == 404
    assert EvalCase.objects.get(pk=b_case.pk).question == "Bravo?"
    resp = send(ca, "post", CASES, {"question": "Hi", "expect_article": str(b_article.pk)})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "expect_article"
    EvalCase.objects.create(tenant=a.tenant, question="Alpha?")
    resp = send(ca, "post", RUNS, {"settings": "draft", "draft": str(b_draft.pk)})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "draft_not_found"
    assert ca.get(CASES).json()["data"][0]["question"] == "Alpha?" and len(ca.get(CASES).json()["data"]) == 1
    assert ca.get(RUNS).json()["data"] == []


def test_a_run_starts_with_the_live_or_the_draft_settings_and_reads_back():
    t = make_tenant()
    c = client_for(t)
    assert send(c, "post", RUNS, {}).json()["error"]["param"] == "cases"  # nothing to run yet
    case = EvalCase.objects.create(tenant=t.tenant, question="How do returns work?")
    resp = send(c, "post", RUNS, {"settings": "draft"})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "settings"  # no draft yet
    assert send(c, "post", RUNS, {"settings": "best"}).status_code == 400
    resp = send(c, "post", RUNS, {})
    assert resp.status_code == 202, resp.content
    run = resp.json()
    assert (run["settings"], run["status"], run["total"], run["done"]) == ("live", "queued", 1, 0)
    assert EvalRun.objects.get(pk=run["id"]).settings_used["system_prompt"] == t.tenant.system_prompt
    draft = drafts.draft_save(tenant=t.tenant, system_prompt="Answer in one sentence.", temperature=0.7)
    resp = send(c, "post", RUNS, {"settings": "draft"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "run_in_progress"  # one at a time
    EvalRun.objects.filter(pk=run["id"]).update(status="done")
    resp = send(c, "post", RUNS, {"settings": "draft", "draft": str(draft.pk)})
    assert resp.status_code == 202
    used = EvalRun.objects.get(pk=resp.json()["id"]).settings_used
    assert (used["source"], used["system_prompt"], used["temperature"]) == ("draft", "Answer in one sentence.", 0.7)
    done = finished_run(t.tenant, case, passed=False)
    got = c.get(f"{RUNS}{done.pk}/").json()
    assert got["status"] == "done" and got["summary"]["passed"] == 0
    assert got["results"][0]["checks"] == {"answered": True, "includes: 30 days": False}
    assert [r["id"] for r in c.get(RUNS).json()["data"]] == [done.pk, resp.json()["id"], run["id"]]
