"""A tenant's hand-over phrases cannot stall the shared CPU tier (issue 27, finding 1):
they run on RE2, in time linear in the message, and what RE2 cannot run is refused when
the form is saved, with the reason beside the field."""

from __future__ import annotations

import time

import pytest

from inference.pipeline import cpu
from inference.wire import streams
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import visitor_establish
from tenants.models import ApiKey, Membership, Tenant
from tenants.services import api_key_authenticate
from tests.console.conftest import user
from tests.console.test_pages import assistant_form
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)
EVIL = "(a+)+$\n!"  # catastrophic backtracking on a backtracking engine, and a trigger that matches


@pytest.fixture
def tenant_with_admin(redis_client):
    created = make_tenant(slug="patterns")
    for key in redis_client.scan_iter(f"tandem:quota:{created.tenant.pk}:*"):
        redis_client.delete(key)
    admin = user()
    Membership.objects.create(user=admin, tenant=created.tenant, role="admin")
    return created, admin


@pytest.mark.timeout(60)
def test_a_nested_quantifier_pattern_saved_by_a_tenant_hands_over_at_once_instead_of_stalling_the_cpu_tier(
        client, tenant_with_admin, redis_client):
    created, admin = tenant_with_admin
    client.force_login(admin)
    form = assistant_form(created.tenant, handover_builtin=False, handover_patterns=EVIL)
    saved = client.post("/console/t/patterns/assistant/", form)
    assert saved.status_code == 302
    assert Tenant.objects.get(pk=created.tenant.pk).handover_patterns == EVIL
    key = api_key_authenticate(plaintext=created.widget_key.plaintext, kind=ApiKey.Kind.WIDGET)
    visitor = visitor_establish(tenant=created.tenant, visitor_id="visitor-1")
    conv = Conversation.objects.create(tenant=created.tenant, channel="widget", visitor_id="visitor-1")
    # 30 characters took about 86 s on Python's re (each one more doubles it).
    sub = services.chat_submit(api_key=key, messages=[("user", "a" * 30 + "!")], conversation_id=str(conv.pk),
                               visitor=visitor)
    request_id = str(sub.assistant_message.pk)
    started = time.perf_counter()
    assert cpu.preprocess_request(request_id) is None  # handed over in the CPU tier
    assert time.perf_counter() - started < 2.0
    records = streams.read_all(redis_client, request_id)
    assert records[-1]["type"] == "end" and records[-1]["finish_reason"] == "handover"
    assert Message.objects.get(pk=request_id).finish_reason == "handover"


@pytest.mark.parametrize("pattern,reason", [
    (r"(?=refund)\w+", "look-arounds and back-references are not supported"),
    (r"(\w+) \1", "look-arounds and back-references are not supported"),
    (r"((a{100}){100}){100}", "too large"),
])
def test_a_pattern_the_linear_engine_cannot_run_is_refused_at_save_with_the_reason(
        client, tenant_with_admin, pattern, reason):
    created, admin = tenant_with_admin
    client.force_login(admin)
    response = client.post("/console/t/patterns/assistant/",
                           assistant_form(created.tenant, handover_patterns=f"ok\n{pattern}"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "Line 2" in html and reason in html
    assert Tenant.objects.get(pk=created.tenant.pk).handover_patterns != f"ok\n{pattern}"
