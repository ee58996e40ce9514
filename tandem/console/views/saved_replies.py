"""Tenant → Inbox → Saved replies: the tenant's canned answers, which any member with the
inbox may add or delete (tandem.saved_replies), and the reply box's lookup of them by
shortcut, filled in for the conversation (JSON for static/console/inbox.js)."""

from __future__ import annotations

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect

from tandem.chat.validation import InvalidInput
from tandem.handoff.views import CONVERSATION, INBOX
from tandem.saved_replies import selectors, services
from tandem.saved_replies.models import SavedReply
from tandem.saved_replies.templating import VARIABLES

from .base import Obj, render_page, tenant_page

SAVED_REPLY = {"saved_reply_id": Obj("reply", SavedReply.objects.all(), "saved reply")}


@tenant_page(methods=("GET", "POST"), **INBOX)
def saved_replies(request, access):
    status, errors, values = 200, {}, {"shortcut": "", "text": ""}
    if request.method == "POST":
        values = {"shortcut": request.POST.get("shortcut", ""), "text": request.POST.get("text", "")}
        try:
            made = services.saved_reply_create(tenant=access.tenant, by=request.user, **values)
        except InvalidInput as exc:
            status, errors = 400, {exc.param: str(exc)}
        else:
            messages.success(request, f"Saved /{made.shortcut}: type it in a reply box to use it.")
            return redirect("console:saved_replies", slug=access.tenant.slug)
    return render_page(request, "console/inbox_saved_replies.html",
                       {"replies": selectors.saved_reply_list(tenant=access.tenant), "variables": VARIABLES,
                        "errors": errors, "values": values}, access=access, nav="inbox", status=status)


@tenant_page(methods=("POST",), objects=SAVED_REPLY, **INBOX)
def saved_reply_delete(request, access, reply):
    services.saved_reply_delete(reply=reply)
    messages.success(request, f"Deleted /{reply.shortcut}.")
    return redirect("console:saved_replies", slug=access.tenant.slug)


@tenant_page(methods=("GET",), objects=CONVERSATION, **INBOX)
def saved_reply_matches(request, access, conv):
    """?q=<shortcut prefix>: the matching replies with their variables filled in."""
    return JsonResponse({"replies": selectors.saved_reply_matches(conversation=conv, agent=request.user,
                                                                  prefix=request.GET.get("q", "")[:40])})
