"""Tenant → Inbox → Labels: the tenant's labels (defined by members who manage the tenant,
seen by everyone with the inbox), the labels of one conversation (set by any agent from
its page, htmx), and the inbox's bulk actions on ticked conversations (add a label,
resolve, assign: tandem.console.inbox_bulk). A label or conversation of another tenant
is a 404 like a missing one."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse

from tandem.chat.validation import InvalidInput
from tandem.labels import selectors, services
from tandem.labels.models import COLORS, Label
from tenants.access import NotFound
from tenants.membership import Can

from .. import inbox_bulk
from .base import Obj, render_page, tenant_page
from .inbox import CONVERSATION, INBOX, inbox_page

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


@tenant_page(methods=("POST",), **INBOX)
def inbox_bulk_action(request, access):
    """The ticked conversations (`c`, repeated), `action` and its `label` or `agent`; back
    to the list the agent was on, with what was done (and what was not) said. Nothing
    ticked or no action is a 400, a conversation, label or agent not of this tenant a
    404, both with the inbox and the reason."""
    back = reverse("console:inbox", kwargs={"slug": access.tenant.slug})
    query = request.POST.get("back", "")
    if query.startswith("?") and "\n" not in query and len(query) < 2000:
        back += query
    try:
        done = inbox_bulk.inbox_bulk(tenant=access.tenant, by=request.user, ids=request.POST.getlist("c"),
                                     action=request.POST.get("action", ""), label_id=request.POST.get("label"),
                                     agent_id=request.POST.get("agent"))
    except InvalidInput as exc:
        messages.error(request, f"{exc} Nothing was changed.")
        return inbox_page(request, access, status=400)
    except NotFound as exc:
        what = str(exc).removeprefix("No such ").rstrip(".")
        messages.error(request, f"That {what} is not one of this tenant's (or no longer exists): nothing was changed.")
        return inbox_page(request, access, status=404)
    (messages.success if not done.skipped else messages.warning)(request, done.summary())
    return redirect(back)
