"""Tenant → Assistant → Repetition control: on/off and the penalties the assistant's
replies are sampled with on the widget, the conversation API and agents' drafts. Members
who manage the assistant edit it; everyone else reads it. Thin: the form and the service
do the work."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.chat.validation import InvalidInput
from tandem.console.views.base import actor, render_page, tenant_page
from tenants.membership import Can

from . import selectors, services
from .defaults import WIDGET_REPETITION
from .forms import RepetitionForm


@tenant_page(write=Can.MANAGE)
def repetition(request, access):
    tenant = access.tenant
    row = selectors.repetition_get(tenant_id=tenant.pk)
    form = RepetitionForm(request.POST or None, initial=RepetitionForm.initial_for(row))
    if request.method == "POST" and form.is_valid():
        try:
            services.repetition_save(tenant=tenant, actor=actor(request), **form.cleaned_data)
        except InvalidInput as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, "Saved. Replies use it from the next message on.")
            return redirect("console:repetition", slug=tenant.slug)
    defaults = dict(zip(("frequency", "presence", "repetition"), WIDGET_REPETITION, strict=True))
    return render_page(request, "console/repetition.html",
                       {"form": form if access.can_manage else None, "row": row, "defaults": defaults},
                       access=access, nav="assistant", status=400 if form.errors else 200)
