"""Tenant → Inbox → Labels: the tenant's labels (defined by members who manage the tenant,
seen by everyone with the inbox) and the labels of one conversation (set by any agent from
its page, htmx). The inbox's bulk actions, adding a label among them, are the hand-off's
(tandem.handoff.views.inbox_bulk_action). A label or conversation of another tenant is a
404 like a missing one."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.chat.validation import InvalidInput
from tandem.handoff.views import CONVERSATION, INBOX
from tandem.labels import selectors, services
from tandem.labels.models import COLORS, Label
from tenants.access import NotFound
from tenants.membership import Can

from .base import Obj, render_page, tenant_page

LABEL = {"label_id": Obj("label", Label.objects.all(), "label")}
DEFINE = {"read": Can.INBOX, "write": Can.MANAGE}


def _page(request, access, *, status=200, errors=None, values=None):
    return render_page(request, "console/inbox_labels.html",
                       {"labels": selectors.label_list(tenant=access.tenant, counts=True), "colors": COLORS,
                        "errors": errors or {}, "values": values or {"name": "", "color": "blue"}},
                       access=access, nav="inbox", status=status)


@tenant_page(methods=("GET", "POST"), **DEFINE)
def labels(request, access):
    if request.method == "POST":
        values = {"name": request.POST.get("name", ""), "color": request.POST.get("color", "")}
        try:
            made = services.label_create(tenant=access.tenant, by=request.user, **values)
        except InvalidInput as exc:
            return _page(request, access, status=400, errors={exc.param: str(exc)}, values=values)
        messages.success(request, f"Label “{made.name}” added: set it from a conversation or the inbox's list.")
        return redirect("console:inbox_labels", slug=access.tenant.slug)
    return _page(request, access)


@tenant_page(methods=("POST",), objects=LABEL, **DEFINE)
def label_edit(request, access, label):
    try:
        services.label_update(label=label, name=request.POST.get("name", ""), color=request.POST.get("color", ""),
                              by=request.user)
    except InvalidInput as exc:
        return _page(request, access, status=400, errors={f"{exc.param}-{label.pk}": str(exc)})
    messages.success(request, f"Label “{label.name}” saved.")
    return redirect("console:inbox_labels", slug=access.tenant.slug)


@tenant_page(methods=("POST",), objects=LABEL, **DEFINE)
def label_delete(request, access, label):
    services.label_delete(label=label, by=request.user)
    messages.success(request, f"Deleted the label “{label.name}” (from every conversation that had it).")
    return redirect("console:inbox_labels", slug=access.tenant.slug)


@tenant_page(methods=("POST",), objects=CONVERSATION, **INBOX)
def inbox_conversation_labels(request, access, conv):
    """The conversation carries exactly the ticked labels. htmx gets the labels panel back."""
    status, outcome = 200, "Labels saved."
    try:
        services.conversation_labels_set(
            conversation=conv, labels=services.labels_resolve(tenant=access.tenant, ids=request.POST.getlist("label")))
    except NotFound:
        status, outcome = 400, "One of those labels no longer exists: reload the page."
    if getattr(request, "htmx", False):
        return render_page(request, "console/partials/inbox_labels.html",
                           {"conversation": conv, "all_labels": selectors.label_list(tenant=access.tenant),
                            "current": {lb.pk for lb in conv.labels.all()}, "outcome": outcome,
                            "failed": status != 200}, access=access, status=status)
    (messages.success if status == 200 else messages.error)(request, outcome)
    return redirect("console:inbox_conversation", slug=access.tenant.slug, conversation_id=conv.pk)
