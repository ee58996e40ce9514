"""Actions on the running platform (daphne, CPU, prefill and decode workers on the real
model) with an actions worker and a tenant's endpoint on 127.0.0.1. Calls are forced by
trigger phrases (a named tool_choice: the model writes the call through the real
grammar-constrained engine; docs/actions.md, "Forcing a call")."""

from __future__ import annotations

import pytest

from tandem.actions.models import ActionCall
from tandem.chat.models import Conversation
from tenants import keys
from tenants.models import AuditLog, Tenant, UsageRecord
from tenants.services import tenant_identity_secret_rotate
from tests.actions.live import action, refund_awaiting_approval
from tests.factories import make_tenant
from tests.widget.test_socket import widget_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_model]

def turn(chat, text: str, conversation=None, *, until_state: str | None = None) -> tuple[list[dict], list[dict]]:
    """Send `text`; the frames up to the call's status line in `until_state` (then stop),
    or up to the end of the reply that continues after the call."""
    chat.send({"type": "message", "text": text, "conversation": conversation})
    frames = chat.recv_until(lambda f: f["type"] == "start")
    first = frames[-1]["message"]
    if until_state:
        frames += chat.recv_until(lambda f: f["type"] == "action" and f["state"] == until_state)
        return frames, []
    frames += chat.recv_until(lambda f: f["type"] == "start" and f["message"] != first)
    second = frames[-1]["message"]
    after = chat.recv_until(lambda f: f.get("message") == second and f["type"] in ("end", "error"))
    return frames, after


def roles(conversation) -> list[str]:
    return list(conversation.messages.order_by("seq").values_list("role", flat=True))


def test_a_verified_users_action_runs_and_the_reply_continues_with_its_result(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback):
    created = make_tenant(max_output_tokens=48)
    Tenant.objects.filter(pk=created.tenant.pk).update(identity_verification=True)
    secret = tenant_identity_secret_rotate(tenant=Tenant.objects.get(pk=created.tenant.pk))
    action(created.tenant, endpoint)
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1", user="u-1",
                       user_hash=keys.identity_hash(secret, "u-1")) as chat:
        frames, after = turn(chat, "Where is my order A-17?")
    call_reply = next(f for f in frames if f["type"] == "start")["message"]
    # The visitor never sees the call: no token of it, its end says tool_calls, and a status line.
    assert not [f for f in frames if f["type"] == "token" and f["message"] == call_reply]
    assert {"type": "end", "finish_reason": "tool_calls"}.items() <= next(
        f for f in frames if f["type"] == "end" and f["message"] == call_reply).items()
    assert any(f["type"] == "action" and f["text"] == "Looking up your order…" for f in frames)
    assert after[-1]["type"] == "end" and after[-1]["finish_reason"] in ("stop", "length")
    [request] = endpoint.requests
    assert request.path.startswith("/orders/") and request.headers["tandem-user"] == "u-1"
    conversation = Conversation.objects.get(tenant=created.tenant)
    assert roles(conversation) == ["user", "assistant", "tool", "assistant"]
    call = ActionCall.objects.get(conversation=conversation)
    assert call.status == "succeeded" and call.http_status == 200 and "shipped" in call.result
    tool = conversation.messages.get(role="tool")
    assert "shipped" in tool.content
    # Usage counts every pass once: the call's pass and the continuation's.
    replies = conversation.messages.filter(role="assistant").values_list("pk", flat=True)
    assert UsageRecord.objects.filter(message_id__in=list(replies)).count() == 2


def test_an_action_needing_approval_waits_in_the_inbox_approve_runs_it_and_deny_ends_it(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, client):
    created = refund_awaiting_approval(endpoint, client)
    tenant = created.tenant
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-2") as chat:
        frames, _ = turn(chat, "Please refund order A-17", until_state="awaiting_approval")
        assert frames[-1]["text"] == "A person is checking this request…"
        conversation = next(f for f in frames if f["type"] == "conversation")["id"]
        call = ActionCall.objects.get(conversation_id=conversation)
        assert endpoint.requests == []  # nothing runs before a person says so
        inbox = client.get(f"/console/t/{tenant.slug}/approvals/", {"conversation": conversation})
        assert b"refund_order" in inbox.content and b"Approve" in inbox.content and b"Deny" in inbox.content
        approved = client.post(f"/console/t/{tenant.slug}/approvals/{call.pk}/approve/")
        assert approved.status_code == 302
        frames = chat.recv_until(lambda f: f["type"] == "start")
        continuing = frames[-1]["message"]
        chat.recv_until(lambda f: f.get("message") == continuing and f["type"] in ("end", "error"))
        assert len(endpoint.requests) == 1

        frames, _ = turn(chat, "Please refund order B-2 too", conversation, until_state="awaiting_approval")
        second = ActionCall.objects.filter(conversation_id=conversation).exclude(pk=call.pk).get()
        assert client.post(f"/console/t/{tenant.slug}/approvals/{second.pk}/deny/").status_code == 302
        frames = chat.recv_until(lambda f: f["type"] == "start")
        continuing = frames[-1]["message"]
        end = chat.recv_until(lambda f: f.get("message") == continuing and f["type"] in ("end", "error"))[-1]
        assert end["type"] == "end"
        assert any(f["type"] == "action" and f["state"] == "denied" for f in frames)
    assert len(endpoint.requests) == 1  # the denied call never ran
    conv = Conversation.objects.get(pk=conversation)
    assert roles(conv) == ["user", "assistant", "tool", "assistant"] * 2
    tools = list(conv.messages.filter(role="tool").order_by("seq").values_list("content", flat=True))
    assert "shipped" in tools[0] and tools[1].startswith("Refused: a person of the support team declined")
    assert sorted(ActionCall.objects.filter(conversation=conv).values_list("status", flat=True)) == \
        ["denied", "succeeded"]
    assert sorted(AuditLog.objects.filter(entity="action_call").values_list("action", flat=True)) == \
        ["approve", "deny"]
    # Agents see the call and its result in the transcript; a second decision is refused.
    page = client.get(f"/console/t/{tenant.slug}/inbox/{conversation}/")
    assert b"Action result" in page.content and b"&lt;tool_call&gt;" in page.content
    again = client.post(f"/console/t/{tenant.slug}/approvals/{call.pk}/deny/", follow=True)
    assert b"already decided" in again.content
    assert ActionCall.objects.get(pk=call.pk).status == "succeeded"


def test_an_unverified_visitor_is_refused_a_verified_only_action(platform, grammar_warm, actions_worker, endpoint,
                                                                 allow_loopback):
    created = make_tenant(max_output_tokens=48)
    action(created.tenant, endpoint)  # verified users only: the default
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-3") as chat:
        frames, after = turn(chat, "Where is my order A-17?")
    refused = next(f for f in frames if f["type"] == "action")
    assert refused["state"] == "refused" and "signed in" in refused["text"]
    assert after[-1]["type"] == "end"
    assert endpoint.requests == []
    conversation = Conversation.objects.get(tenant=created.tenant)
    assert conversation.messages.get(role="tool").content.startswith("Refused: this action is for verified users")

