"""Who may do what on the draft, trial chat and evaluation pages (Django's test client):
a viewer reads cases, runs and the draft but has no forms and cannot try the assistant
(it spends the tenant's quota) nor start a run; an admin has all of them."""

from __future__ import annotations

import pytest

from tandem.evals.models import EvalCase, EvalRun
from tenants.models import Membership
from tests.console.conftest import user
from tests.evals.helpers import finished_run
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def member(tenant, role):
    u = user()
    Membership.objects.create(user=u, tenant=tenant, role=role)
    return u


def test_a_viewer_reads_but_neither_tries_nor_runs_and_an_admin_does_both(client):
    tenant = make_tenant(slug="gamma").tenant
    case = EvalCase.objects.create(tenant=tenant, question="How long do refunds take?")
    run = finished_run(tenant, case)
    base = "/console/t/gamma/assistant"
    client.force_login(member(tenant, "viewer"))
    page = client.get(f"{base}/evals/").content.decode()
    assert "How long do refunds take?" in page and "Run with live settings" not in page
    assert "Try the assistant" not in page and "Add a test case" not in page
    assert client.get(f"{base}/evals/runs/{run.pk}/").status_code == 200
    assert "Save draft" not in client.get(f"{base}/draft/").content.decode()
    assert client.get(f"{base}/try/").status_code == 403
    assert client.post(f"{base}/evals/runs/", {"settings": "live"}).status_code == 403
    assert client.post(f"{base}/try/ask/", {"question": "Hi", "settings": "live"}).status_code == 403
    assert EvalRun.objects.filter(tenant=tenant).count() == 1
    client.force_login(member(tenant, "admin"))
    page = client.get(f"{base}/evals/").content.decode()
    assert "Run with live settings" in page and "Try the assistant" in page
    assert client.get(f"{base}/try/").status_code == 200
    assert client.post(f"{base}/evals/cases/new/", {"question": ""}).status_code == 400  # beside its field
    resp = client.post(f"{base}/evals/cases/new/", {"question": "Do you ship abroad?", "must_include": "yes\n\n",
                                                   "expect_handover": "no"})
    assert resp.status_code == 302
    made = EvalCase.objects.get(question="Do you ship abroad?")
    assert (made.must_include, made.expect_handover) == (["yes"], False)
