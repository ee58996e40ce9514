"""The contacts' console pages: a conversation's contact (who they are, their
conversations, Export and Delete with a confirmation), and the tenant's Privacy page
(the retention period). A contact is reached through one of their conversations, so
every URL carries a conversation id that tandem.console.views.base resolves within the
tenant (another tenant's is a 404). Export and delete need Can.MANAGE; both are
audited by the services."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect

from tandem.chat.models import Conversation
from tandem.console.views.base import Obj, actor, render_page, tenant_page
from tenants.access import NotFound
from tenants.membership import Can

from . import services
from .identity import contact_get, contact_of

CONVERSATION = {"conversation_id": Obj("conv", Conversation.objects.all(), "conversation")}


def _contact(access, conv):
    """The conversation's contact and their conversations, or (None, just this one)."""
    contact = contact_of(conv)
    if contact is None:
        return None, Conversation.objects.filter(pk=conv.pk)
    try:
        return contact_get(tenant=access.tenant, contact_id=contact.id)
    except NotFound:  # deleted meanwhile
        return None, Conversation.objects.filter(pk=conv.pk)


class DeleteForm(forms.Form):
    confirm = forms.BooleanField(label="Yes, delete everything of this contact. This cannot be undone.",
                                 error_messages={"required": "Tick the box to confirm the deletion."})


@tenant_page(methods=("GET",), objects=CONVERSATION)
def contact_detail(request, access, conv):
    contact, convs = _contact(access, conv)
    return _page(request, access, conv, contact, convs, DeleteForm())


def _page(request, access, conv, contact, convs, form, status=200):
    rows = list(convs.order_by("-updated_at"))
    counts = {"message_count": sum(c.messages.count() for c in rows)}
    return render_page(request, "contacts/contact.html",
                       {"conversation": conv, "contact": contact, "conversations": rows, "form": form,
                        "names": sorted({c.user_name for c in rows if c.user_name}),
                        "emails": sorted({c.user_email for c in rows if c.user_email}), **counts},
                       access=access, nav="conversations", status=status)


@tenant_page(methods=("GET",), objects=CONVERSATION)
def contact_export(request, access, conv):
    # Admins and owners only; checked after the conversation is found in the tenant, so
    # another tenant's conversation stays a 404 whatever the role (tests/console/test_idor.py).
    access.require(Can.MANAGE)
    contact = contact_of(conv)
    if contact is None:
        messages.error(request, "This conversation belongs to no contact (it came through the REST API).")
        return redirect("console:contact", slug=access.tenant.slug, conversation_id=conv.pk)
    data = services.contact_export_take(tenant=access.tenant, contact_id=contact.id, actor=actor(request))
    response = HttpResponse(json.dumps(data, ensure_ascii=False, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{access.tenant.slug}-contact-export.json"'
    response["Cache-Control"] = "no-store"
    return response


@tenant_page(methods=("POST",), write=Can.MANAGE, objects=CONVERSATION)
def contact_delete(request, access, conv):
    contact, convs = _contact(access, conv)
    form = DeleteForm(request.POST)
    if contact is None or not form.is_valid():
        if contact is None:
            form.add_error(None, "This conversation belongs to no contact (it came through the REST API).")
        return _page(request, access, conv, contact, convs, form, status=400)
    erased = services.contact_delete(tenant=access.tenant, contact_id=contact.id, actor=actor(request))
    messages.success(request, f"Contact deleted: {_count(erased.conversations, 'conversation')}, "
                              f"{_count(erased.messages, 'message')} and {_count(erased.attachments, 'attachment')}.")
    return redirect("console:conversations", slug=access.tenant.slug)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class RetentionForm(forms.Form):
    days = forms.IntegerField(required=False, min_value=1, max_value=services.MAX_RETENTION_DAYS,
                              label="Delete conversations idle for (days)",
                              help_text="Empty: keep conversations until a contact is deleted.")


@tenant_page(methods=("GET", "POST"), write=Can.MANAGE)
def privacy(request, access):
    policy = services.retention_of(tenant=access.tenant)
    status = 200
    if request.method == "POST":
        form = RetentionForm(request.POST)
        if form.is_valid():
            services.retention_set(tenant=access.tenant, days=form.cleaned_data["days"], actor=actor(request))
            messages.success(request, "Retention period saved.")
            return redirect("console:privacy", slug=access.tenant.slug)
        status = 400
    else:
        form = RetentionForm(initial={"days": policy.days})
    return render_page(request, "contacts/privacy.html", {"form": form, "policy": policy},
                       access=access, nav="privacy", status=status)
