"""Tenant → Actions (admins and owners change, viewers read: Can.MANAGE): the list, add
(the signing secret and a secret header's value are shown on the page that answers,
once), edit, delete. And the approval cards' Approve / Deny (agents: Can.INBOX), with
the awaiting cards as a partial the inbox polls. Thin: services, selectors and
approvals do the work."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from tandem.console.views.base import Obj, render_page, tenant_page
from tenants.membership import Can

from . import approvals, selectors, services
from .definitions import ActionInputError
from .forms import ActionForm
from .models import Action, ActionCall

ACTION = {"action_id": Obj("action", Action.objects.all(), "action")}
CALL = {"call_id": Obj("call", ActionCall.objects.select_related("action", "decided_by"), "action call")}


def _field_error(form, exc: ActionInputError) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


def _list_page(request, access, *, form=None, status=200):
    ctx = {"actions": selectors.action_list(tenant=access.tenant)}
    if access.can_manage:
        ctx["form"] = form or ActionForm(initial={"parameters": '{"type": "object", "properties": {}}',
                                                  "enabled": True})
    return render_page(request, "actions/list.html", ctx, access=access, nav="actions", status=status)


def _detail_page(request, access, action, *, form=None, shown=None, status=200):
    ctx = {"action": action, "shown": shown}
    if access.can_manage:
        ctx["form"] = form or ActionForm(initial=ActionForm.initial_for(action))
    return render_page(request, "actions/detail.html", ctx, access=access, nav="actions", status=status)


@tenant_page(write=Can.MANAGE)
def action_list(request, access):
    if request.method != "POST":
        return _list_page(request, access)
    form = ActionForm(request.POST)
    if form.is_valid():
        try:
            saved = services.action_create(tenant=access.tenant, by=request.user, **form.cleaned_data)
        except ActionInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, "Action added. Copy its signing secret now: it is not shown again.")
            return _detail_page(request, access, saved.action, shown=saved, status=201)
    return _list_page(request, access, form=form, status=400)


@tenant_page(write=Can.MANAGE, objects=ACTION)
def action_detail(request, access, action):
    if request.method != "POST":
        return _detail_page(request, access, action)
    form = ActionForm(request.POST)
    if form.is_valid():
        try:
            saved = services.action_update(action=action, by=request.user, **form.cleaned_data)
        except ActionInputError as exc:
            _field_error(form, exc)
        else:
            if saved.secret_header_value:
                messages.success(request, "Saved. The new secret header value is shown below, once.")
                return _detail_page(request, access, saved.action, shown=saved)
            messages.success(request, "Saved.")
            return redirect("console:action", slug=access.tenant.slug, action_id=action.pk)
    action.refresh_from_db()
    return _detail_page(request, access, action, form=form, status=400)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=ACTION)
def action_delete(request, access, action):
    services.action_delete(action=action, by=request.user)
    messages.success(request, f"Action {action.name} deleted.")
    return redirect("console:actions", slug=access.tenant.slug)


@tenant_page(read=Can.INBOX, methods=("GET",))
def approvals_partial(request, access):
    """The cards awaiting a decision (all, or one conversation's), which inbox pages poll.
    A `conversation` that is no conversation id is a 400 (the query would refuse it)."""
    conversation_id = request.GET.get("conversation") or None
    if conversation_id is not None:
        try:
            conversation_id = uuid.UUID(conversation_id)
        except ValueError:
            return HttpResponseBadRequest("conversation must be a conversation's id (a UUID).",
                                          content_type="text/plain; charset=utf-8")
    return render_page(request, "actions/approvals.html",
                       {"calls": selectors.awaiting_approval(tenant=access.tenant, conversation_id=conversation_id),
                        "next": request.GET.get("next", "")}, access=access)


@tenant_page(read=Can.INBOX, write=Can.INBOX, methods=("POST",), objects=CALL)
def call_decide(request, access, call, decision):
    try:
        if decision == "approve":
            approvals.call_approve(call=call, by=request.user)
            messages.success(request, f"Approved: {call.name} runs now.")
        else:
            approvals.call_deny(call=call, by=request.user)
            messages.success(request, f"Denied: the assistant tells the visitor {call.name} was not done.")
    except approvals.AlreadyDecided as exc:
        messages.error(request, str(exc))
    to = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(to, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        to = reverse("console:inbox", kwargs={"slug": access.tenant.slug})
    return redirect(to or reverse("console:inbox", kwargs={"slug": access.tenant.slug}))
