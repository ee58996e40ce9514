"""The console in a real browser (Debian's Chromium driven by Playwright) against the
running platform: daphne and real CPU, prefill and decode workers on the real model.
People reach things the way a person does: by link text, field labels and button names."""

from __future__ import annotations

import httpx
import openai
import pytest

from tandem.chat.models import Conversation, Message
from tenants.models import ApiKey, Membership
from tests.browser import new_page, sign_in
from tests.console.conftest import forget_quota_counters, user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(browser):
    pg = new_page(browser)
    yield pg
    pg.context.close()


def tenant_nav(page, tenant_name: str):
    return page.get_by_role("navigation", name=f"Tenant {tenant_name}")


def chat(platform, key: str, model: str) -> httpx.Response:
    return httpx.post(f"{platform.base_url}/v1/chat/completions", timeout=120,
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": model, "max_tokens": 1, "temperature": 0,
                            "messages": [{"role": "user", "content": "Hi"}]})


def served_model(platform, key: str) -> str:
    return httpx.get(f"{platform.base_url}/v1/models",
                     headers={"Authorization": f"Bearer {key}"}).json()["data"][0]["id"]


def test_staff_set_requests_per_minute_to_3_and_the_fourth_quick_call_is_429(platform, page, redis_client):
    from playwright.sync_api import expect

    tenant = make_tenant(slug="browser-rpm", max_output_tokens=4)
    # A rolled-back test before this one may have had this tenant id, and the limiter's
    # counters in Redis (keyed by it) outlive the rollback.
    forget_quota_counters(redis_client, tenant.tenant)
    staff = user(is_staff=True)
    key = tenant.secret_key.plaintext
    model = served_model(platform, key)

    sign_in(page, platform.base_url, staff.username)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Tenants").click()
    page.get_by_role("link", name=tenant.tenant.name, exact=True).first.click()
    tenant_nav(page, tenant.tenant.name).get_by_role("link", name="Quotas").click()
    page.get_by_label("Requests per minute", exact=True).fill("3")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    expect(page.get_by_label("Requests per minute", exact=True)).to_have_value("3")

    responses = [chat(platform, key, model) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429], [r.text for r in responses]
    assert responses[3].headers["x-ratelimit-limit-requests"] == "3"
    assert responses[3].json()["error"]["code"] == "rate_limit_exceeded"


def test_a_key_created_in_the_console_works_with_the_openai_client_until_revoked(platform, page):
    from playwright.sync_api import expect

    tenant = make_tenant(slug="browser-keys", max_output_tokens=4)
    admin = user()
    Membership.objects.create(user=admin, tenant=tenant.tenant, role="admin")

    sign_in(page, platform.base_url, admin.username)
    page.get_by_role("link", name=tenant.tenant.name, exact=True).first.click()
    tenant_nav(page, tenant.tenant.name).get_by_role("link", name="Keys").click()
    form = page.get_by_role("form", name="New key")
    form.get_by_label("Kind").select_option("secret")
    form.get_by_label("Name", exact=True).fill("from-the-console")
    form.get_by_role("button", name="Save").click()
    secret = page.locator("#new-key").inner_text().strip()
    assert secret.startswith("sk_")
    expect(page.get_by_role("button", name="Copy").first).to_be_visible()

    client = openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=secret, max_retries=0, timeout=120)
    completion = client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=2, temperature=0,
        messages=[{"role": "user", "content": "Hello"}])
    assert completion.choices[0].message.content is not None

    # The plaintext is gone on the next visit (the page that showed it answered the
    # POST; it is never stored); revoke the key by its prefix.
    tenant_nav(page, tenant.tenant.name).get_by_role("link", name="Keys").click()
    expect(page.locator("#new-key")).to_have_count(0)
    prefix = ApiKey.objects.get(tenant=tenant.tenant, name="from-the-console").prefix
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Revoke {prefix}").click()
    expect(page.get_by_role("status")).to_contain_text("revoked")
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model="any", max_tokens=1, messages=[{"role": "user", "content": "Hi"}])
    assert refused.value.status_code == 401


def test_a_viewer_sees_their_tenants_conversations_only_and_no_edit_form(platform, page):
    from playwright.sync_api import expect

    from tandem.handoff.inbox import visitor_name

    t, u = make_tenant(slug="browser-view-t").tenant, make_tenant(slug="browser-view-u").tenant
    viewer = user()
    Membership.objects.create(user=viewer, tenant=t, role="viewer")
    mine, theirs = (Conversation.objects.create(tenant=x, channel="widget", visitor_id=f"visitor-of-{x.slug}")
                    for x in (t, u))
    Message.objects.create(conversation=mine, role="user", content="Where is my parcel?")
    Message.objects.create(conversation=theirs, role="user", content="Other tenant's secret question")

    sign_in(page, platform.base_url, viewer.username)
    page.get_by_role("link", name=t.name, exact=True).first.click()
    nav = tenant_nav(page, t.name)
    nav.get_by_role("link", name="Conversations").click()
    # Visitors are named as the inbox names them (what they told us, or a friendly name).
    expect(page.get_by_text(visitor_name(mine))).to_be_visible()
    expect(page.get_by_text("Where is my parcel?")).to_be_visible()
    if visitor_name(theirs) != visitor_name(mine):
        expect(page.get_by_text(visitor_name(theirs))).to_have_count(0)
    expect(page.get_by_text("Other tenant's secret question")).to_have_count(0)
    page.get_by_role("link", name=mine.created_at.strftime("%Y-%m-%d %H:%M")).first.click()
    expect(page.get_by_role("article", name="user message")).to_contain_text("Where is my parcel?")
    assert page.goto(f"{platform.base_url}/console/t/{t.slug}/conversations/{theirs.pk}/").status == 404
    assert page.goto(f"{platform.base_url}/console/t/{u.slug}/conversations/").status == 404

    page.goto(f"{platform.base_url}/console/t/{t.slug}/")
    for link in ("Keys", "Assistant", "Conversations", "Team", "Install"):
        tenant_nav(page, t.name).get_by_role("link", name=link, exact=True).click()
        expect(page.get_by_role("heading", name=link, exact=True)).to_be_visible()
        expect(page.get_by_role("button", name="Save")).to_have_count(0)
        expect(page.get_by_role("button", name="Revoke")).to_have_count(0)
    # Posting anyway, with a valid CSRF token, is refused for the role (not for CSRF).
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for path, data in [("quotas/", {"requests_per_minute": "1"}), ("assistant/", {"system_prompt": "x"}),
                       ("keys/new/", {"kind": "secret"}), ("members/", {"user": viewer.username, "role": "owner"})]:
        response = page.request.post(f"{platform.base_url}/console/t/{t.slug}/{path}", form=data,
                                     headers={"X-CSRFToken": csrf})
        assert response.status == 403, path
        assert "CSRF" not in response.text()
    t.refresh_from_db()
    assert t.quota.requests_per_minute == 60 and Membership.objects.get(user=viewer).role == "viewer"
