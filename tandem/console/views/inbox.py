"""Tenant → Inbox: the conversations handed to a person, for agents, admins and owners
(Can.INBOX). Claim, assign, reply, internal notes and resolve are POSTs to
tandem.chat.responder, the agent's online / away toggle to tandem.chat.assignment (and
every inbox page is a presence heartbeat);
the live transcript and typing come over the agent socket (tandem.console.agent_socket).
Another tenant's conversation id is a 404 like a missing one (views/base.tenant_page)."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect

from tandem.chat import assignment, responder
from tandem.chat import inbox as chat_inbox
from tandem.chat.models import Conversation, OfflineMessage
from tandem.chat.validation import InvalidInput
from tenants.access import NotFound
from tenants.membership import Can

from .base import Obj, render_page, tenant_page

CONVERSATION = {"conversation_id": Obj("conv", Conversation.objects.all(), "conversation")}
OFFLINE = {"offline_id": Obj("offline", OfflineMessage.objects.select_related("tenant"), "offline message")}
INBOX = {"read": Can.INBOX, "write": Can.INBOX}
log = logging.getLogger(__name__)


def _presence(request, access) -> dict:
    assignment.presence_seen(tenant=access.tenant, agent=request.user)
    return {"presence": assignment.presence_of(tenant=access.tenant, agent=request.user),
            "online_count": assignment.online_agents(tenant=access.tenant).count()}


@tenant_page(methods=("GET",), **INBOX)
def inbox(request, access):
    return render_page(request, "console/inbox.html",
                       {"rows": chat_inbox.inbox_list(tenant=access.tenant, agent=request.user),
                        "stats": chat_inbox.handoff_stats(tenant=access.tenant),
                        "offline": chat_inbox.offline_list(tenant=access.tenant), **_presence(request, access)},
                       access=access, nav="inbox")


@tenant_page(methods=("GET",), **INBOX)
def inbox_rows(request, access):
    """The list alone, which the page polls (htmx) so a new hand-over shows within a second."""
    return render_page(request, "console/partials/inbox_rows.html",
                       {"rows": chat_inbox.inbox_list(tenant=access.tenant, agent=request.user),
                        **_presence(request, access)}, access=access)


@tenant_page(methods=("POST",), **INBOX)
def inbox_presence(request, access):
    """The agent's online / away toggle."""
    try:
        status = assignment.presence_set(tenant=access.tenant, agent=request.user, status=request.POST.get("status"))
    except InvalidInput as exc:
        if _wants_json(request):
            return JsonResponse({"ok": False, "detail": str(exc)}, status=400)
        messages.error(request, str(exc))
    else:
        if _wants_json(request):
            return JsonResponse({"ok": True, "status": status})
        messages.success(request, "You are online: new conversations may come to you." if status == "online"
                         else "You are away.")
    return redirect("console:inbox", slug=access.tenant.slug)


@tenant_page(methods=("GET",), objects=CONVERSATION, **INBOX)
def inbox_conversation(request, access, conv):
    return render_page(request, "console/inbox_conversation.html",
                       {"conversation": conv, "items": chat_inbox.inbox_transcript(conv),
                        "mine": conv.handoff == Conversation.Handoff.HUMAN and conv.assignee_id == request.user.pk,
                        "agents": assignment.inbox_agents(tenant=access.tenant), **_presence(request, access)},
                       access=access, nav="inbox")


@tenant_page(methods=("POST",), objects=CONVERSATION, **INBOX)
def inbox_action(request, access, conv, action):
    """claim | assign | resolve | reply | note. A fetch() (the page's script) gets JSON; a plain
    form post is redirected back with a message."""
    status, text = 200, ""
    try:
        if action == "claim":
            responder.conversation_claim(conversation=conv, agent=request.user)
            text = "You are answering this conversation."
        elif action == "assign":
            to = assignment.agent_get(tenant=access.tenant, user_id=request.POST.get("agent"))
            responder.conversation_assign(conversation=conv, to=to, by=request.user)
            text = f"Assigned to {assignment.display_name(to)}."
        elif action == "resolve":
            if not responder.conversation_resolve(conversation=conv):
                status, text = 409, "This conversation is not with a person."
            else:
                text = "Resolved: the assistant answers the visitor's next message."
        else:
            msg = responder.agent_message(conversation=conv, agent=request.user,
                                          text=request.POST.get("text", ""), note=action == "note")
            if _wants_json(request):
                return JsonResponse({"ok": True, "message": responder.message_event(msg)})
    except (responder.Taken, responder.NotYours, responder.Stale) as exc:
        status, text = 409, str(exc)
    except NotFound:
        status, text = 400, "Choose an agent of this tenant who may use the inbox."
    except InvalidInput as exc:
        status, text = 400, str(exc)
    if _wants_json(request):
        return JsonResponse({"ok": status == 200, "detail": text, "state": conv.handoff}, status=status)
    if text:
        (messages.success if status == 200 else messages.error)(request, text)
    return redirect("console:inbox_conversation", slug=access.tenant.slug, conversation_id=conv.pk)


@tenant_page(methods=("POST",), objects=OFFLINE, **INBOX)
def inbox_offline_answer(request, access, offline):
    """Answer an offline message by e-mail (responder.offline_message_answer)."""
    try:
        responder.offline_message_answer(offline=offline, agent=request.user, text=request.POST.get("text", ""))
    except (InvalidInput, responder.AlreadyAnswered) as exc:
        messages.error(request, str(exc))
    except Exception:  # the mail server refused or is down: nothing was sent, say so
        log.exception("answering offline message %s failed", offline.pk)
        messages.error(request, "The e-mail could not be sent; nothing was sent. Try again later.")
    else:
        messages.success(request, f"Sent to {offline.email}.")
    return redirect("console:inbox", slug=access.tenant.slug)


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")
