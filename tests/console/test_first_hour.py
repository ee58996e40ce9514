"""An owner's first hour in the console (issue 32) through Django's test client: the
tabs in the order a tenant works, the Install page, test retrieval (answered by the
session platform's CPU worker); and the operators' overview, which starts with health.
(Hand-over phrases edited as phrases, on the Assistant page: tests/handoff/test_phrases.py.)"""

from __future__ import annotations

import re

import pytest

from knowledge import services as knowledge
from tandem.onboarding.models import TenantSetup
from tenants.models import ApiKey

pytestmark = pytest.mark.django_db
A = "/console/t/alpha"


def tabs(html: str, name: str = "Alpha") -> list[str]:
    nav = html.split(f'aria-label="Tenant {name}"')[1].split("</nav>")[0]
    return [re.sub(r"<[^>]+>", "", a).strip() for a in re.findall(r"<a [^>]*>.*?</a>", nav, re.S)]


def test_an_owner_sees_the_tabs_in_the_order_a_tenant_works_and_no_infrastructure(client, world):
    client.force_login(world.owner_a)
    names = [re.sub(r"\d+$", "", n).strip() for n in tabs(client.get(f"{A}/").content.decode())]
    order = ["Overview", "Inbox", "Conversations", "Assistant", "Knowledge", "Team", "Install", "Usage"]
    assert [n for n in names if n in order] == order and names[:2] == ["Overview", "Inbox"]
    assert not {"Quotas", "Hardware allocation"} & set(names)
    client.force_login(world.staff)
    assert tabs(client.get(f"{A}/").content.decode())[-2:] == ["Quotas", "Hardware allocation"]


def test_the_install_page_has_the_snippet_the_origins_and_the_connection_state(client, world):
    widget = ApiKey.objects.get(tenant=world.a.tenant, kind="widget")
    client.force_login(world.viewer_a)
    html = client.get(f"{A}/install/").content.decode().replace("&quot;", '"')
    assert f'data-tandem-key="{widget.public_key}"' in html and "not yet connected" in html
    assert "Save origins" not in html and "install/copied" not in html  # a viewer reads, records nothing
    assert client.post(f"{A}/install/copied/").status_code == 403
    client.force_login(world.owner_b)
    assert client.post(f"{A}/install/copied/").status_code == 404
    assert not TenantSetup.objects.filter(tenant=world.a.tenant).exists()
    # The Copy button's request (an admin's): the checklist's first step.
    client.force_login(world.admin_a)
    html = client.get(f"{A}/install/").content.decode()
    assert "Save origins" in html and 'hx-post="/console/t/alpha/install/copied/"' in html
    assert client.post(f"{A}/install/copied/").status_code == 204
    assert TenantSetup.objects.get(tenant=world.a.tenant).snippet_copied_at is not None
    assert client.get(f"{A}/install/copied/").status_code == 405


def test_the_tenant_overview_is_the_checklist_and_usage_has_the_numbers(client, world):
    client.force_login(world.owner_a)
    html = client.get(f"{A}/").content.decode()
    assert "Getting started" in html and 'data-step="origin"' in html
    # The world's tenant has a reply and members: those two are done.
    assert re.search(r'class="step done" data-step="assistant"', html)
    assert re.search(r'class="step done" data-step="teammate"', html)
    assert re.search(r'class="step" data-step="articles"', html)
    assert "2 of 5 done" in html
    usage = client.get(f"{A}/usage/").content.decode()
    assert 'hx-get="/console/t/alpha/live/"' in usage and "<h2>Usage</h2>" in usage


# The session platform's CPU worker answers the page (knowledge.probe); transactional, so
# that it sees the articles.
@pytest.mark.django_db(transaction=True)
def test_test_retrieval_ranks_the_tenants_own_chunks_with_scores_and_marks_what_a_reply_gets(platform, client, world):
    for tenant, title, body in ((world.a.tenant, "Shipping times", "Parcels leave our warehouse within two days."),
                                (world.a.tenant, "Returns", "Send an item back within 30 days for a refund."),
                                (world.b.tenant, "Bravo shipping", "Bravo parcels leave within two days.")):
        knowledge.article_index(article_id=knowledge.article_create(tenant=tenant, title=title, body=body).pk)
    client.force_login(world.viewer_a)
    html = client.get(f"{A}/knowledge/test/", {"q": "When does my parcel leave?"}).content.decode()
    ranked = html.split('aria-label="Ranked passages"')[1]
    assert "Shipping times" in ranked and "Bravo" not in ranked
    scores = [float(s) for s in re.findall(r'data-score="([0-9.]+)"', ranked)]
    assert scores and scores == sorted(scores, reverse=True) and 0 < scores[0] < 1
    assert ranked.index("Shipping times") < ranked.index("given")
    # Bad input is the form's error, never a 500; no question is the empty form.
    bad = client.get(f"{A}/knowledge/test/", {"q": "x" * 501})
    assert bad.status_code == 400 and 'class="errorlist"' in bad.content.decode()
    assert client.get(f"{A}/knowledge/test/", {"q": "  "}).status_code == 400
    assert 'aria-label="Ranked passages"' not in client.get(f"{A}/knowledge/test/").content.decode()
    client.force_login(world.owner_b)
    assert client.get(f"{A}/knowledge/test/", {"q": "parcel"}).status_code == 404


def test_the_operator_overview_starts_with_health_and_finds_and_orders_tenants(client, world):
    from inference.wire.connections import get_redis
    from inference.worker.heartbeats import HeartbeatThread

    client.force_login(world.staff)
    html = client.get("/console/").content.decode()
    assert html.index('aria-label="Platform health"') < html.index("<table")
    health = html.split('aria-label="Platform health"')[1].split("</section>")[0]
    assert 'data-check="database"><span class="badge lvl-ok">ok' in health
    assert 'data-check="redis"><span class="badge lvl-ok">ok' in health
    beat = HeartbeatThread(get_redis(), name="cpu.shared@host:9", role="cpu", pool="shared",
                           static={"device": "cpu"}, dynamic=lambda: {})
    beat.beat()
    try:
        live = client.get("/console/live/", {"part": "health"}, HTTP_HX_REQUEST="true").content.decode()
        hardware = client.get("/console/hardware/").content.decode()
    finally:
        beat.stop()
    assert re.search(r'data-check="workers-cpu"><span class="badge lvl-ok">\d+ live', live)
    # The CPU tier is in no pool by design: shown as the CPU tier, not "outside any pool".
    assert 'aria-label="CPU tier"' in hardware and "cpu.shared@host:9" in hardware
    assert "cpu.shared@host:9" not in hardware.split('aria-label="CPU tier"')[1].split("</section>")[1]
    # Members see no health, and cannot poll it.
    client.force_login(world.owner_a)
    assert 'aria-label="Platform health"' not in client.get("/console/").content.decode()
    assert client.get("/console/live/", {"part": "health"}).status_code == 404

    client.force_login(world.staff)
    found = client.get("/console/live/", {"q": "brav"}).content.decode()
    assert ">Bravo</a>" in found and ">Alpha</a>" not in found and "1 of " in found
    ordered = client.get("/console/live/", {"sort": "name"}).content.decode()
    assert ordered.index(">Alpha</a>") < ordered.index(">Bravo</a>")
    assert client.get("/console/live/", {"sort": "nonsense"}).status_code == 200
