"""Tenant → Assistant → Business hours: the weekly schedule, its time zone and the
holidays, which members who manage the assistant edit and everyone else reads. Thin:
the form (forms.py) and the service (services.py) do the work."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.chat.validation import InvalidInput
from tandem.console.views.base import actor, render_page, tenant_page
from tenants.membership import Can

from . import selectors, services
from .forms import HoursForm
from .schedule import DAYS


@tenant_page(write=Can.MANAGE)
def business_hours(request, access):
    tenant = access.tenant
    row = selectors.hours_get(tenant=tenant)
    form = HoursForm(request.POST or None, initial=HoursForm.initial_for(row))
    if request.method == "POST" and form.is_valid():
        try:
            services.hours_save(tenant=tenant, actor=actor(request), **form.service_args())
        except InvalidInput as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, "Saved. A visitor who asks for a person out of these hours gets the "
                                      "offline form and is told when the team is back.")
            return redirect("console:business_hours", slug=tenant.slug)
    now = selectors.availability(tenant_id=tenant.pk)
    week = [(day, *(row.weekly or {}).get(str(i), ("", ""))) for i, day in enumerate(DAYS)]
    return render_page(request, "console/business_hours.html",
                       {"form": form if access.can_manage else None, "row": row, "now": now, "week": week},
                       access=access, nav="hours", status=400 if form.errors else 200)
