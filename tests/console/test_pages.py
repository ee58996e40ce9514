"""The console's pages through Django's test client: who reaches what, forms that
validate on the server (a bad value is a message, never a 500), and the names people
and tests find things by."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from knowledge.models import Article, Source, SourceFile
from tandem.chat.models import OfflineMessage
from tandem.labels.services import label_create
from tandem.saved_replies.services import saved_reply_create
from tandem.webhooks import services as webhooks
from tenants import invitations
from tenants.models import ApiKey, AuditLog, ComputePool, Invitation, Membership, Quota
from tests.actions.helpers import action_ids
from tests.console.test_idor import console_patterns
from tests.evals.helpers import eval_ids

pytestmark = pytest.mark.django_db

QUOTA_LABELS = ["Requests per minute", "Tokens per minute", "Max concurrent streams",
                "Daily token budget", "Max prompt tokens", "Max output tokens"]
# What a tenant does first comes first (other tabs may sit between these); a viewer has
# no inbox, and no member sees the infrastructure tabs (quotas, hardware allocation).
TENANT_NAV = ["Overview", "Conversations", "Assistant", "Knowledge", "Team", "Install", "Usage", "Outcomes", "Keys",
              "Webhooks"]


def labels(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", m).strip() for m in re.findall(r"<label[^>]*>(.*?)</label>", html, re.S)]


def assistant_form(tenant, **fields) -> dict:
    """What the assistant page's form submits as the page fills it in, `fields` on top."""
    from tandem.console.forms import AssistantForm

    data = {}
    for name, value in {**AssistantForm.initial_for(tenant), **fields}.items():
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        else:
            data[name] = value
    return data


def url_values(world):
    a = world.a.tenant
    return {"slug": a.slug, "key_id": ApiKey.objects.filter(tenant=a, kind="widget").first().pk,
            "membership_id": Membership.objects.filter(tenant=a, role="viewer").first().pk,
            "conversation_id": world.conv_a.pk, "pool_id": ComputePool.objects.first().pk,
            "article_id": Article.objects.create(tenant=a, title="Returns", body="Within 30 days.",
                                                 text="Within 30 days.").pk,
            "offline_id": OfflineMessage.objects.create(tenant=a, conversation=world.conv_a, email="a@example.test",
                                                        text="Hello?").pk,
            # An invitation to the operator: theirs to answer, A's owners' to revoke.
            **dict(zip(("invitation_id", "token"), _invitation(a, world.staff.username), strict=True)),
            **dict(zip(("endpoint_id", "delivery_id"), _webhook_delivery(a), strict=True)),
            "saved_reply_id": saved_reply_create(tenant=a, shortcut="hello", text="Hello {{visitor.name}}").pk,
            **action_ids(a, world.conv_a),
            "label_id": label_create(tenant=a, name="Refund").pk,
            **eval_ids(a, world.staff),  # a case, a run, and the operator's trial reply
            **dict(zip(("source_id", "file_id"), _source_file(a), strict=True))}


def _source_file(tenant) -> tuple[int, int]:
    source = Source.objects.create(tenant=tenant, kind="files", name="Manuals")
    return source.pk, SourceFile.objects.create(source=source, name="a.txt", data=b"Hi", size=2, sha256="0" * 64).pk


def _webhook_delivery(tenant) -> tuple:
    endpoint = webhooks.endpoint_create(tenant=tenant, url="https://hooks.example.com/", events=["reply.failed"])
    return endpoint.endpoint.pk, webhooks.endpoint_test(endpoint=endpoint.endpoint).pk


def _invitation(tenant, identifier: str) -> tuple[int, str]:
    invitation, token = invitations.invitation_create(tenant=tenant, identifier=identifier, role="viewer")
    return invitation.pk, token


def unlabelled_fields(html: str) -> list[str]:
    """The form fields of a page that no <label for=...> names."""
    missing = []
    for tag in re.findall(r"<(?:input|select|textarea)\b[^>]*>", html):
        if re.search(r'type="(hidden|submit|button)"', tag):
            continue
        field_id = re.search(r'\bid="([^"]+)"', tag)
        if field_id is None or f'for="{field_id.group(1)}"' not in html:
            missing.append(tag)
    return missing


def test_every_console_page_renders_for_an_operator_and_labels_every_field(client, world):
    client.force_login(world.staff)
    values = url_values(world)
    fields_seen = 0
    for name, _, params in console_patterns():
        if name in ("logout",):
            continue
        url = reverse(f"console:{name}", kwargs={p: values[p] for p in params})
        response = client.get(url)
        assert response.status_code in (200, 302, 405), (name, response.status_code)
        if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
            html = response.content.decode()
            assert unlabelled_fields(html) == [], name
            fields_seen += len(re.findall(r"<(?:input|select|textarea)\b", html))
    assert fields_seen > 30


def test_signed_out_people_are_sent_to_sign_in(client, world):
    response = client.get("/console/t/alpha/quotas/")
    assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_the_tenant_list_names_each_tenant_by_a_link_and_shows_its_usage(client, world):
    client.force_login(world.staff)
    html = client.get("/console/tenants/").content.decode()
    assert '<a href="/console/t/alpha/">Alpha</a>' in html
    assert '<a href="/console/t/bravo/">Bravo</a>' in html
    assert "0 / 60" in html  # requests per minute, live, against the default quota


def test_a_tenant_page_has_its_nav_links(client, world):
    client.force_login(world.viewer_a)
    html = client.get("/console/t/alpha/").content.decode()
    nav = html.split('aria-label="Tenant Alpha"')[1].split("</nav>")[0]
    names = [re.sub(r"<[^>]+>", "", a) for a in re.findall(r"<a [^>]*>.*?</a>", nav)]
    assert [n for n in names if n in TENANT_NAV] == TENANT_NAV and names[0] == "Overview"
    assert not {"Inbox", "Quotas", "Hardware allocation"} & set(names)


def test_staff_edit_quotas_with_exactly_labelled_fields_and_a_save_button(client, world):
    client.force_login(world.staff)
    html = client.get("/console/t/alpha/quotas/").content.decode()
    assert labels(html) == QUOTA_LABELS
    assert '<button type="submit">Save</button>' in html
    form = {f: 5 for f in ["requests_per_minute", "tokens_per_minute", "max_concurrent_streams",
                           "daily_token_budget", "max_prompt_tokens", "max_output_tokens"]}
    assert client.post("/console/t/alpha/quotas/", form).status_code == 302
    assert Quota.objects.get(tenant=world.a.tenant).requests_per_minute == 5


@pytest.mark.parametrize("bad", ["-1", "abc", "", "99999999999999999999999", "1e3"])
def test_a_bad_quota_value_is_a_message_beside_its_field_never_a_500(client, world, bad):
    client.force_login(world.staff)
    form = {"requests_per_minute": bad, "tokens_per_minute": 1000, "max_concurrent_streams": 2,
            "daily_token_budget": 10, "max_prompt_tokens": 10, "max_output_tokens": 10}
    response = client.post("/console/t/alpha/quotas/", form)
    assert response.status_code == 400
    assert 'class="errorlist"' in response.content.decode()
    assert Quota.objects.get(tenant=world.a.tenant).requests_per_minute == 60


@pytest.mark.parametrize("who", ["viewer_a", "admin_a", "owner_a"])
def test_members_read_quotas_and_allocation_but_cannot_change_them(client, world, who):
    client.force_login(getattr(world, who))
    for page in ("quotas", "allocation"):
        response = client.get(f"/console/t/alpha/{page}/")
        assert response.status_code == 200
        assert "<form method=\"post\" class=\"stack\"" not in response.content.decode()
        assert client.post(f"/console/t/alpha/{page}/", {"requests_per_minute": 1}).status_code == 403
    assert "60" in client.get("/console/t/alpha/quotas/").content.decode()


def test_a_viewer_has_no_edit_form_anywhere_and_every_post_is_refused(client, world):
    client.force_login(world.viewer_a)
    values = url_values(world)
    for name, _, params in console_patterns():
        if name in ("logout", "login", "password_change") or "slug" not in params:
            continue
        url = reverse(f"console:{name}", kwargs={p: values[p] for p in params})
        get = client.get(url)
        if get.status_code == 200 and get["Content-Type"].startswith("text/html"):
            assert 'method="post" class="stack"' not in get.content.decode(), name
            assert ">Revoke<" not in get.content.decode() and ">Remove<" not in get.content.decode()
        assert client.post(url, {"role": "owner", "system_prompt": "x"}).status_code in (403, 404), name
    assert Membership.objects.get(user=world.viewer_a).role == "viewer"


def test_a_member_does_not_see_operator_pages_or_other_tenants(client, world):
    client.force_login(world.owner_a)
    for url in ("/console/tenants/", "/console/hardware/", "/console/audit/", "/console/tenants/new/"):
        assert client.get(url).status_code == 404, url
    html = client.get("/console/").content.decode()
    assert "Alpha" in html and "Bravo" not in html
    allocation = client.get("/console/t/alpha/allocation/").content.decode()
    assert "Bravo" not in allocation


def test_staff_create_a_tenant_and_see_its_keys_once(client, world):
    client.force_login(world.staff)
    response = client.post("/console/tenants/new/", {"slug": "charlie", "name": "Charlie",
                                                     "allowed_origins": "https://charlie.example"})
    html = response.content.decode()
    secret = re.search(r'id="secret-key">(sk_[^<]+)<', html).group(1)
    assert ApiKey.objects.get(prefix=secret[:10]).key_hash != secret  # only its hash is stored
    assert secret not in client.get("/console/t/charlie/keys/").content.decode()
    again = client.post("/console/tenants/new/", {"slug": "charlie", "name": "Again"})
    assert again.status_code == 400 and "already exists" in again.content.decode()
    bad = client.post("/console/tenants/new/", {"slug": "delta", "name": "D", "allowed_origins": "not a url"})
    assert bad.status_code == 400 and "is not an origin" in bad.content.decode()


def test_staff_deactivate_a_tenant_and_its_keys_stop_working(client, world):
    from tenants.services import AuthenticationFailed, api_key_authenticate

    client.force_login(world.staff)
    assert client.post("/console/t/alpha/active/", {"active": "0"}).status_code == 302
    with pytest.raises(AuthenticationFailed):
        api_key_authenticate(plaintext=world.a.secret_key.plaintext)
    assert "inactive" in client.get("/console/tenants/").content.decode()


def test_an_admin_creates_a_key_sees_it_once_and_revokes_it(client, world):
    client.force_login(world.admin_a)
    response = client.post("/console/t/alpha/keys/new/", {"kind": "secret", "name": "ci"})
    assert response.status_code == 201
    plaintext = re.search(r'id="new-key">(sk_[^<]+)<', response.content.decode()).group(1)
    key = ApiKey.objects.get(tenant=world.a.tenant, name="ci")
    assert plaintext not in client.get("/console/t/alpha/keys/").content.decode()
    client.post(f"/console/t/alpha/keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.is_revoked


def test_a_widget_key_has_its_embed_snippet_and_editable_origins(client, world):
    client.force_login(world.admin_a)
    widget = ApiKey.objects.get(tenant=world.a.tenant, kind="widget")
    html = client.get("/console/t/alpha/install/").content.decode()
    assert f'data-tandem-key="{widget.public_key}"' in html.replace("&quot;", '"')
    assert "data-tandem-key" not in client.get("/console/t/alpha/keys/").content.decode().replace("&quot;", '"')
    field = f"key{widget.pk}-allowed_origins"
    ok = client.post(f"/console/t/alpha/keys/{widget.pk}/origins/", {field: "https://a.example/\nhttp://localhost:8000"})
    assert ok.status_code == 302 and ok["Location"] == "/console/t/alpha/install/"
    widget.refresh_from_db()
    assert widget.allowed_origins == ["https://a.example", "http://localhost:8000"]
    bad = client.post(f"/console/t/alpha/keys/{widget.pk}/origins/", {field: "https://a.example/path"})
    assert bad.status_code == 400 and "is not an origin" in bad.content.decode()


def test_the_assistant_page_saves_the_system_prompt(client, world):
    client.force_login(world.admin_a)
    html = client.get("/console/t/alpha/assistant/").content.decode()
    assert "System prompt" in labels(html)
    form = assistant_form(world.a.tenant, system_prompt="You are Alpha's helper.")
    assert client.post("/console/t/alpha/assistant/", form).status_code == 302
    world.a.tenant.refresh_from_db()
    assert world.a.tenant.system_prompt == "You are Alpha's helper."


def test_conversations_filter_by_text_channel_status_and_date(client, world):
    client.force_login(world.viewer_a)
    base = "/console/t/alpha/conversations/"
    link = f"/console/t/alpha/conversations/{world.conv_a.pk}/"
    assert link in client.get(base).content.decode()
    assert link in client.get(base, {"q": "alpha order"}).content.decode()
    assert link not in client.get(base, {"q": "nothing like it"}).content.decode()
    assert link not in client.get(base, {"channel": "api"}).content.decode()
    assert link in client.get(base, {"channel": "widget", "status": "open"}).content.decode()
    assert link not in client.get(base, {"since": "2999-01-01"}).content.decode()
    bad = client.get(base, {"since": "not-a-date", "channel": "nope"})
    assert bad.status_code == 200 and 'class="errorlist"' in bad.content.decode()


def test_a_transcript_shows_each_replys_timings_and_exports(client, world):
    from tenants.models import UsageRecord

    reply = world.conv_a.messages.get(role="assistant")
    UsageRecord.objects.create(tenant=world.a.tenant, message_id=reply.pk, prompt_tokens=20, completion_tokens=3,
                               ttft_ms=42.0, duration_ms=90.0, queue_ms=7.0, prefill_pool="shared",
                               decode_pool="shared", prefill_worker="prefill.shared@h:1",
                               decode_worker="decode.shared@h:2", finish_reason="stop")
    client.force_login(world.viewer_a)
    html = client.get(f"/console/t/alpha/conversations/{world.conv_a.pk}/").content.decode()
    for text in ("queue wait <b>7 ms", "TTFT <b>42 ms", "duration <b>90 ms", "decode.shared@h:2", "prefill.shared@h:1", "finish <b>stop"):
        assert text in html
    csv_text = b"".join(client.get("/console/t/alpha/conversations/export.csv").streaming_content).decode()
    assert "Where is my alpha order?" in csv_text and "Bravo" not in csv_text
    assert csv_text.splitlines()[0].startswith("conversation_id,channel")
    import json

    rows = json.loads(b"".join(client.get(
        f"/console/t/alpha/conversations/{world.conv_a.pk}/export.json").streaming_content))
    assert [r["role"] for r in rows] == ["user", "assistant"] and rows[1]["decode_worker"] == "decode.shared@h:2"


def test_an_owner_invites_by_email_the_person_accepts_and_the_owner_changes_and_removes_them(client, world):
    from tests.console.conftest import user

    newcomer = user(email="New.Person@Example.test")
    client.force_login(world.owner_a)
    invited = client.post("/console/t/alpha/members/", {"user": "New.Person@example.test", "role": "admin"})
    assert invited.status_code == 201 and "/console/invite/" in invited.content.decode()
    assert not Membership.objects.filter(user=newcomer, tenant=world.a.tenant).exists()  # not without a yes
    again = client.post("/console/t/alpha/members/", {"user": "new.person@example.test", "role": "viewer"})
    assert again.status_code == 400 and "pending invitation" in again.content.decode()
    client.force_login(newcomer)
    mine = client.get("/console/invitations/").content.decode()
    assert "Alpha" in mine or "alpha" in mine
    invitation = Invitation.objects.get(tenant=world.a.tenant, identifier="new.person@example.test")
    assert client.post(f"/console/invitations/{invitation.pk}/accept/").status_code == 302
    m = Membership.objects.get(user=newcomer, tenant=world.a.tenant)
    assert m.role == "admin"
    client.force_login(world.owner_a)
    dup = client.post("/console/t/alpha/members/", {"user": newcomer.username, "role": "viewer"})
    assert dup.status_code == 400 and "already a member" in dup.content.decode()
    client.post(f"/console/t/alpha/members/{m.pk}/role/", {f"m{m.pk}-role": "viewer"})
    m.refresh_from_db()
    assert m.role == "viewer"
    client.post(f"/console/t/alpha/members/{m.pk}/remove/")
    assert not Membership.objects.filter(pk=m.pk).exists()


def test_the_last_owner_cannot_be_demoted_or_removed(client, world):
    client.force_login(world.owner_a)
    m = Membership.objects.get(user=world.owner_a)
    client.post(f"/console/t/alpha/members/{m.pk}/role/", {f"m{m.pk}-role": "viewer"})
    client.post(f"/console/t/alpha/members/{m.pk}/remove/")
    m.refresh_from_db()
    assert m.role == "owner"
    assert "at least one owner" in client.get("/console/t/alpha/members/").content.decode()


def test_an_admin_cannot_manage_members(client, world):
    client.force_login(world.admin_a)
    assert client.post("/console/t/alpha/members/", {"user": world.owner_b.username, "role": "owner"}).status_code == 403
    assert not Membership.objects.filter(user=world.owner_b, tenant=world.a.tenant).exists()


def test_staff_create_and_edit_pools_with_validation(client, world):
    client.force_login(world.staff)
    ok = client.post("/console/hardware/pools/new/", {"slug": "gpu-a", "role": "decode", "device": "h200",
                                                       "dedicated": "on", "max_batch": 128})
    assert ok.status_code == 302
    pool = ComputePool.objects.get(slug="gpu-a", role="decode")
    assert pool.dedicated and pool.max_batch == 128
    dup = client.post("/console/hardware/pools/new/", {"slug": "gpu-a", "role": "decode", "device": "x", "max_batch": 1})
    assert dup.status_code == 400 and "already" in dup.content.decode()
    bad = client.post(f"/console/hardware/pools/{pool.pk}/", {"device": "h200", "max_batch": 0})
    assert bad.status_code == 400
    client.post(f"/console/hardware/pools/{pool.pk}/", {"device": "h100", "max_batch": 64})
    pool.refresh_from_db()
    assert (pool.device, pool.max_batch, pool.dedicated) == ("h100", 64, False)
    assert AuditLog.objects.filter(entity="pool", entity_id=str(pool.pk), action="update").exists()


def test_moving_a_tenant_to_a_dedicated_pool_is_one_form(client, world):
    client.force_login(world.staff)
    prefill = ComputePool.objects.create(slug="alpha-only", role="prefill", dedicated=True)
    decode = ComputePool.objects.create(slug="alpha-only", role="decode", dedicated=True)
    response = client.post("/console/t/alpha/allocation/", {"prefill_pool": prefill.pk, "decode_pool": decode.pk,
                                                            "priority": 2, "max_decode_slots": 8})
    assert response.status_code == 302
    alloc = world.a.tenant.allocation
    alloc.refresh_from_db()
    assert (alloc.prefill_pool, alloc.decode_pool, alloc.priority) == (prefill, decode, 2)
    wrong = client.post("/console/t/alpha/allocation/", {"prefill_pool": decode.pk, "decode_pool": decode.pk,
                                                         "priority": 999, "max_decode_slots": 0})
    assert wrong.status_code == 400
    html = client.get("/console/t/alpha/allocation/").content.decode()
    assert "alpha-only" in html and "Alpha" in html


def test_the_hardware_page_shows_each_pools_live_workers_and_when_it_is_full(client, world):
    from inference.wire.connections import get_redis
    from inference.worker.heartbeats import HeartbeatThread

    ComputePool.objects.create(slug="hw-test", role="decode", device="h200")
    beat = HeartbeatThread(get_redis(), name="decode.hw-test@host:1", role="decode", pool="hw-test",
                           static={"device": "cuda", "dtype": "bfloat16", "model": "m"},
                           dynamic=lambda: {"batch": 64, "max_batch": 64, "tokens_per_s": 512.0, "kv_tokens": 9000,
                                            "queue_depth": 3})
    beat.beat()
    try:
        client.force_login(world.staff)
        html = client.get("/console/hardware/").content.decode()
    finally:
        beat.stop()
    card = html.split('aria-label="Pool decode.hw-test"')[1].split("</section>")[0]
    assert "decode.hw-test@host:1" in card and "64/64" in card and "full, 3 waiting" in card
    assert "lvl-full" in html.split('aria-label="Pool decode.hw-test"')[0][-80:]


def test_the_overview_polls_live_numbers_and_serves_chart_series(client, world, redis_client):
    from tenants import quotas
    from tenants.models import UsageRecord

    reply = world.conv_a.messages.get(role="assistant")
    UsageRecord.objects.create(tenant=world.a.tenant, message_id=reply.pk, completion_tokens=120, ttft_ms=80.0)
    # one request admitted by the real limiter and still streaming
    assert quotas.admit(redis_client, tenant_id=world.a.tenant.pk, request_id="r-1", prompt_tokens=5,
                        max_output_tokens=5, limits=quotas.QuotaLimits.from_quota(world.a.tenant.quota)).allowed
    client.force_login(world.owner_a)
    html = client.get("/console/").content.decode()
    assert 'hx-get="/console/live/"' in html and 'hx-trigger="every 5s"' in html
    live = client.get("/console/live/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-metric="output_tokens_per_s">2.0<' in live  # 120 tokens over the last minute
    assert 'data-metric="requests_per_min">1<' in live and 'data-metric="active_streams">1<' in live
    for rng, points in (("hour", 60), ("day", 96), ("week", 168)):
        data = client.get("/console/charts.json", {"range": rng}).json()
        assert len(data["t"]) == points and data["total_requests"] == 1
    # B's usage is not in A's owner's numbers
    data = client.get("/console/t/alpha/charts.json").json()
    assert sum(data["tokens_per_s"]) == 2.0
    assert client.get("/console/t/bravo/charts.json").status_code == 404
