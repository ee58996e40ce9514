"""Tenant → Assistant: the persona (system prompt); the widget's appearance and texts
join the same form as fieldsets when the widget stores them on the tenant."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect

from tenants import services
from tenants.membership import Can

from ..forms import AssistantForm, apply_errors
from .base import actor, render_page, tenant_page


@tenant_page(write=Can.MANAGE)
def assistant(request, access):
    tenant = access.tenant
    form = AssistantForm(request.POST or None, initial={"system_prompt": tenant.system_prompt})
    if request.method == "POST" and form.is_valid():
        try:
            services.tenant_set_assistant(tenant=tenant, system_prompt=form.cleaned_data["system_prompt"],
                                          actor=actor(request))
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, "Saved. The assistant uses it from the next message on.")
            return redirect("console:assistant", slug=tenant.slug)
    return render_page(request, "console/assistant.html",
                       {"form": form if access.can_manage else None},
                       access=access, nav="assistant", status=400 if form.errors else 200)
