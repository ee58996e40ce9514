"""Screenshots of every console page for docs/console.md, taken on the running platform
with a few tenants in different states (one near its requests limit, one with every
stream slot taken, one inactive), a week of usage, real replies from the real model,
and a dedicated GPU pool whose workers are full.

A tool, not a test: `make test` does not collect it (its name is not test_*.py). Run it
by name; TANDEM_CONSOLE_SCREENSHOTS names the folder (default docs/console):

    .venv/bin/python -m pytest tests/console/screenshots.py

The GPU pool's workers are heartbeats written by this test (this machine has no GPU);
everything else is the platform's own state, counted by its own limiter."""

from __future__ import annotations

import datetime as dt
import os
import random
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tandem.chat.models import Conversation, Message
from tenants import quotas, services
from tenants.audit import Actor
from tenants.models import ApiKey, ComputePool, Membership, UsageRecord
from tests.browser import sign_in, signed_in
from tests.console.conftest import PASSWORD, user

OUT = os.environ.get("TANDEM_CONSOLE_SCREENSHOTS", "docs/console")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


@contextmanager
def backdated_usage():
    """UsageRecord.created_at is auto_now_add; a week of history needs its own dates."""
    field = UsageRecord._meta.get_field("created_at")
    field.auto_now_add = False
    try:
        yield
    finally:
        field.auto_now_add = True


def seed_history(tenant, *, per_hour: int, rng: random.Random) -> None:
    now = dt.datetime.now(dt.UTC)
    rows = []
    for hours_ago in range(7 * 24):
        busy = 0.4 + 0.6 * (1 if 8 <= (now - dt.timedelta(hours=hours_ago)).hour <= 20 else 0.3)
        for _ in range(int(per_hour * busy * rng.uniform(0.7, 1.3))):
            at = now - dt.timedelta(hours=hours_ago, seconds=rng.uniform(0, 3600))
            ttft = rng.lognormvariate(4.6, 0.35)  # ~100 ms, a long tail
            rows.append(UsageRecord(tenant=tenant, message_id=uuid.uuid4(), prompt_tokens=rng.randint(60, 400),
                                    completion_tokens=rng.randint(20, 180), ttft_ms=ttft,
                                    duration_ms=ttft + rng.uniform(300, 2500), created_at=at,
                                    prefill_pool="shared", decode_pool="shared", finish_reason="stop"))
    with backdated_usage():
        UsageRecord.objects.bulk_create(rows, batch_size=2000)


def hold(redis_client, tenant, n: int, *, release: bool) -> None:
    """Admit n requests through the tenant's real limiter (and release them, or keep
    their stream slots)."""
    limits = quotas.QuotaLimits.from_quota(tenant.quota)
    for _ in range(n):
        rid = str(uuid.uuid4())
        adm = quotas.admit(redis_client, tenant_id=tenant.pk, limits=limits, request_id=rid,
                           prompt_tokens=300, max_output_tokens=min(200, limits.max_output_tokens))
        assert adm.allowed, adm
        if release:
            quotas.reconcile(redis_client, tenant_id=tenant.pk, request_id=rid, actual_tokens=420)


def recent_messages(tenant, *, ok: int, failed: int) -> None:
    conv = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id="load")
    for i in range(ok + failed):
        Message.objects.create(conversation=conv, role="assistant", content="…",
                               status="failed" if i < failed else "done")


@pytest.fixture
def fake_gpu_workers(redis_client):
    from inference.worker.heartbeats import HeartbeatThread

    beats = [
        HeartbeatThread(redis_client, name=f"decode.gpu-a@gpu-node-{i}:7", role="decode", pool="gpu-a",
                        static={"device": "cuda:0", "dtype": "bfloat16", "model": "smollm2-135m-instruct"},
                        dynamic=lambda i=i: {"batch": 64, "max_batch": 64, "queue_depth": 5 + i, "tokens_per_s": 2900.0 + 40 * i,
                                             "kv_tokens": 118_000, "kv_bytes": 118_000 * 9216, "active_requests": 64})
        for i in range(2)
    ] + [HeartbeatThread(redis_client, name="prefill.gpu-a@gpu-node-0:8", role="prefill", pool="gpu-a",
                         static={"device": "cuda:1", "dtype": "bfloat16", "model": "smollm2-135m-instruct"},
                         dynamic=lambda: {"prefill_queue": 3, "active_requests": 12, "prefill_batches": 901})]
    for b in beats:
        b.start()
    yield
    for b in beats:
        b.stop()


def test_screenshots_of_every_console_page(platform, browser, redis_client, fake_gpu_workers):  # noqa: F811
    from playwright.sync_api import expect

    out = Path(OUT)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(14)
    staff = user(is_staff=True, username="operator")
    ops = Actor.console(staff)

    acme = services.tenant_create(slug="acme", name="Acme Retail", allowed_origins=["https://shop.acme.example"],
                                  quota={"requests_per_minute": 60, "max_output_tokens": 48}, actor=ops)
    globex = services.tenant_create(slug="globex", name="Globex Insurance", actor=ops,
                                    quota={"requests_per_minute": 600, "max_concurrent_streams": 16})
    initech = services.tenant_create(slug="initech", name="Initech", actor=ops)
    umbrella = services.tenant_create(slug="umbrella", name="Umbrella Health", actor=ops)
    services.tenant_set_active(tenant=umbrella.tenant, active=False, actor=ops)
    gpu_prefill = services.pool_create(slug="gpu-a", role="prefill", device="h200", dedicated=True, max_batch=64,
                                       description="Globex's dedicated prefill GPU.", actor=ops)
    gpu_decode = services.pool_create(slug="gpu-a", role="decode", device="h200", dedicated=True, max_batch=64,
                                      description="Globex's dedicated decode GPU.", actor=ops)
    services.allocation_update(tenant=globex.tenant, prefill_pool=gpu_prefill, decode_pool=gpu_decode, priority=2,
                               max_decode_slots=64, actor=ops)
    services.quota_update(tenant=initech.tenant, tokens_per_minute=250_000, actor=ops)
    services.tenant_set_assistant(tenant=acme.tenant, actor=ops, system_prompt=(
        "You are Acme Retail's support assistant. Answer in two or three friendly sentences. "
        "For order problems, ask for the order number."))
    owner, admin_user, viewer = (user(username=n, email=f"{n}@acme.example") for n in ("maria", "li", "sam"))
    for u, role in ((owner, "owner"), (admin_user, "admin"), (viewer, "viewer")):
        services.member_add(tenant=acme.tenant, identifier=u.username, role=role, actor=ops)
    services.api_key_create(tenant=acme.tenant, kind="secret", name="helpdesk-integration", actor=Actor.console(owner))

    for t, per_hour in ((acme.tenant, 40), (globex.tenant, 90), (initech.tenant, 8)):
        seed_history(t, per_hour=per_hour, rng=rng)
    hold(redis_client, acme.tenant, 52, release=True)  # 52 of 60 requests this minute
    hold(redis_client, globex.tenant, 16, release=False)  # every stream slot taken
    recent_messages(acme.tenant, ok=38, failed=1)
    recent_messages(globex.tenant, ok=70, failed=6)

    # Real replies from the real model, for the conversations and the transcript.
    key = acme.secret_key.plaintext
    model = httpx.get(f"{platform.base_url}/v1/models", headers={"Authorization": f"Bearer {key}"}).json()["data"][0]["id"]
    conv = httpx.post(f"{platform.base_url}/api/v1/conversations/", headers={"Authorization": f"Bearer {key}"},
                      json={"visitor_id": "customer-4411"}).json()["id"]
    for text in ("Hi, my order hasn't arrived yet.", "The order number is 10-4411."):
        r = httpx.post(f"{platform.base_url}/api/v1/conversations/{conv}/messages/", timeout=120,
                       headers={"Authorization": f"Bearer {key}"}, json={"content": text, "max_tokens": 40})
        assert r.status_code in (200, 201), r.text
    for text in ("Do you ship to Canada?", "How do I return shoes?"):
        r = httpx.post(f"{platform.base_url}/v1/chat/completions", timeout=120, headers={"Authorization": f"Bearer {key}"},
                       json={"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": text}]})
        assert r.status_code == 200, r.text
    shots = []

    def shoot(page, name: str, path: str | None = None, *, wait_charts: bool = False):
        if path is not None:
            response = page.goto(f"{platform.base_url}{path}")
            assert response.status < 400, (path, response.status)
        if wait_charts:
            expect(page.locator(".chart-card")).to_have_attribute("data-loaded", "hour", timeout=20_000)
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)
        shots.append(name)

    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    shoot(page, "sign-in", "/console/login/")
    sign_in(page, platform.base_url, "operator")
    shoot(page, "overview-operator", "/console/", wait_charts=True)
    shoot(page, "tenants", "/console/tenants/")
    shoot(page, "tenant-create", "/console/tenants/new/")
    page.get_by_label("Slug").fill("hooli")
    page.get_by_label("Name").fill("Hooli")
    page.get_by_label("Widget origins").fill("https://help.hooli.example")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#secret-key")).to_be_visible()
    shoot(page, "tenant-created")
    shoot(page, "tenant-usage", "/console/t/acme/usage/", wait_charts=True)
    shoot(page, "quotas-operator", "/console/t/acme/quotas/")
    page.get_by_label("Requests per minute", exact=True).fill("-5")
    page.get_by_role("button", name="Save").click()
    shoot(page, "quotas-validation")
    shoot(page, "allocation-operator", "/console/t/globex/allocation/")
    shoot(page, "hardware", "/console/hardware/")
    shoot(page, "pool-edit", f"/console/hardware/pools/{gpu_decode.pk}/")
    shoot(page, "audit-log", "/console/audit/")
    ctx.close()

    page = signed_in(browser, platform.base_url, owner.username, viewport={"width": 1280, "height": 800})
    shoot(page, "overview-member", "/console/", wait_charts=True)
    page.goto(f"{platform.base_url}/console/t/acme/keys/")
    form = page.get_by_role("form", name="New key")
    form.get_by_label("Kind").select_option("widget")
    form.get_by_label("Name", exact=True).fill("help-centre")
    form.get_by_label("Allowed origins").fill("https://help.acme.example")
    form.get_by_role("button", name="Save").click()
    expect(page.locator("#new-key")).to_be_visible()
    shoot(page, "keys-created")
    shoot(page, "assistant", "/console/t/acme/assistant/")
    shoot(page, "conversations", "/console/t/acme/conversations/")
    shoot(page, "transcript", f"/console/t/acme/conversations/{conv}/")
    shoot(page, "members", "/console/t/acme/members/")
    shoot(page, "audit-tenant", "/console/t/acme/audit/")
    shoot(page, "allocation-member", "/console/t/acme/allocation/")
    shoot(page, "password-change", "/console/password/")
    page.context.close()

    page = signed_in(browser, platform.base_url, viewer.username, viewport={"width": 1280, "height": 800})
    shoot(page, "quotas-viewer", "/console/t/acme/quotas/")
    page.context.close()

    page = signed_in(browser, platform.base_url, "operator", viewport={"width": 390, "height": 844})  # a phone
    shoot(page, "tenants-phone", "/console/tenants/")
    page.context.close()

    assert all((out / f"{n}.png").stat().st_size > 10_000 for n in shots)
    assert ApiKey.objects.filter(tenant__slug="hooli").count() == 2
    assert Membership.objects.filter(tenant=acme.tenant).count() == 3
    assert ComputePool.objects.filter(slug="gpu-a").count() == 2
    assert PASSWORD  # the people above sign in with it


def test_screenshots_of_the_assistant_and_knowledge_pages(live_server, browser):  # noqa: F811
    """Tenant → Assistant with its live widget preview and Tenant → Knowledge with
    articles in each indexing state. The Django test server is enough (the preview
    answers the widget locally; nothing here needs a worker):

        .venv/bin/python -m pytest tests/console/screenshots.py -k assistant_and_knowledge"""
    from playwright.sync_api import expect

    from knowledge import services as knowledge_services
    from knowledge.models import Article
    from tests.factories import make_tenant

    out = Path(OUT)
    out.mkdir(parents=True, exist_ok=True)
    acme = make_tenant(slug="acme").tenant
    acme.name = "Acme Outdoor"
    acme.save(update_fields=["name"])
    services.tenant_set_assistant(tenant=acme, system_prompt="You are Acme Outdoor's support assistant.",
                                  widget_title="Acme help", widget_color="#1f7a4d",
                                  widget_greeting="Hi! Ask me about orders, returns or sizing.")
    for title, tags in [("Returns and refunds", ["orders", "refunds"]), ("Shipping times", ["orders"])]:
        a = knowledge_services.article_create(tenant=acme, title=title, tags=tags,
                                              url=f"https://acme.example/help/{title.split()[0].lower()}",
                                              body=f"# {title}\n\nWhat {title.lower()} means at Acme, in short.")
        knowledge_services.article_index(article_id=a.pk)
    # One still waiting for its indexing task, as a row only: a CPU worker left running by
    # the module's first test would otherwise index it before the page is taken.
    Article.objects.create(tenant=acme, title="Choosing a tent size", tags=["sizing"],
                           url="https://acme.example/help/choosing",
                           body="# Choosing a tent size\n\nWhat choosing a tent size means at Acme, in short.")
    Article.objects.filter(tenant=acme, title="Shipping times").update(status="failed", error="the body has no text")
    ops = user(is_staff=True, username="ops")
    Membership.objects.get_or_create(user=ops, tenant=acme, defaults={"role": "owner"})

    page = signed_in(browser, live_server.url, "ops")
    page.goto(f"{live_server.url}/console/t/acme/assistant/")
    page.get_by_label("Title").fill("Acme support")
    preview = page.frame_locator("#widget-preview")
    expect(preview.locator("tandem-chat header")).to_contain_text("Acme support")
    expect(preview.locator("tandem-chat")).to_contain_text("2 business days")  # the sample exchange
    page.screenshot(path=str(out / "assistant-preview.png"), full_page=True)
    page.goto(f"{live_server.url}/console/t/acme/knowledge/")
    expect(page.get_by_role("status")).to_contain_text("Indexing")
    page.screenshot(path=str(out / "knowledge.png"), full_page=True)
    page.context.close()
