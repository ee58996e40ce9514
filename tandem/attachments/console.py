"""The attachments' console pages: an agent's file sent from the inbox (`inbox_attach`,
a POST on a conversation the agent owns), and the tenant's limits (`attachment_settings`,
Can.MANAGE to change). Every id in a path is resolved within the tenant by
tandem.console.views.base, so another tenant's conversation is a 404."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect

from tandem.chat.models import Conversation
from tandem.chat.validation import InvalidInput
from tandem.console.views.base import Obj, actor, render_page, tenant_page
from tandem.handoff.states import NotYours, message_event
from tenants.membership import Can

from . import kinds, services
from .selectors import attachment_data, policy_of

CONVERSATION = {"conversation_id": Obj("conv", Conversation.objects.all(), "conversation")}
MB = 1024 * 1024


@tenant_page(methods=("POST",), objects=CONVERSATION, read=Can.INBOX, write=Can.INBOX)
def inbox_attach(request, access, conv):
    """An agent's file (form field `file`, caption `text`) to the visitor. A fetch()
    asking for JSON gets the message as the agent socket would carry it; a plain form
    post is redirected back to the conversation with the outcome as a message."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        msg, attachment = services.agent_attachment_send(conversation=conv, agent=request.user,
                                                         upload=request.FILES.get("file"),
                                                         text=request.POST.get("text"))
    except NotYours as exc:
        status, code, text = 409, exc.code, str(exc)
    except services.AttachmentRefused as exc:
        status, code, text = exc.status, exc.code, str(exc)
    except InvalidInput as exc:
        status, code, text = 400, exc.code, str(exc)
    else:
        if wants_json:
            return JsonResponse({"ok": True, "message": {**message_event(msg),
                                                         "attachments": [attachment_data(attachment)]}})
        messages.success(request, f"Sent {attachment.name}.")
        return redirect("console:inbox_conversation", slug=access.tenant.slug, conversation_id=conv.pk)
    if wants_json:
        return JsonResponse({"ok": False, "code": code, "detail": text}, status=status)
    messages.error(request, text)
    return redirect("console:inbox_conversation", slug=access.tenant.slug, conversation_id=conv.pk)


class PolicyForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="Visitors and agents may send files")
    kinds = forms.MultipleChoiceField(choices=list(kinds.KINDS.items()), required=False,
                                      widget=forms.CheckboxSelectMultiple, label="Allowed kinds")
    max_mb = forms.DecimalField(min_value=0.01, max_value=services.PLATFORM_MAX_BYTES // MB, decimal_places=2,
                                label="Largest file (MB)")


@tenant_page(methods=("GET", "POST"), write=Can.MANAGE)
def attachment_settings(request, access):
    policy = policy_of(tenant=access.tenant)
    if request.method == "POST":
        form = PolicyForm(request.POST)
        if form.is_valid():
            try:
                services.policy_update(tenant=access.tenant, actor=actor(request),
                                       enabled=form.cleaned_data["enabled"], kinds_allowed=form.cleaned_data["kinds"],
                                       max_bytes=int(form.cleaned_data["max_mb"] * MB))
            except services.PolicyInvalid as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, "Attachment limits saved.")
                return redirect("console:attachment_settings", slug=access.tenant.slug)
        status = 400
    else:
        form = PolicyForm(initial={"enabled": policy.enabled, "kinds": policy.kinds,
                                   "max_mb": round(policy.max_bytes / MB, 2)})
        status = 200
    return render_page(request, "attachments/settings.html", {"form": form, "policy": policy},
                       access=access, nav="privacy", status=status)
