"""Tenant → Webhooks: the tenant's endpoints; adding one (its signing secret is shown
on the page that answers, once); an endpoint's page with its settings, "Send test
event", enable / disable, delete, and its delivery log (status, response code,
duration, attempts, the body sent) with "Resend" on each delivery. Delivering runs on
the CPU tier's `webhooks` queue, never here. Viewers read; admins and owners change
(Can.MANAGE)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from tandem.webhooks import selectors, services
from tandem.webhooks.models import Delivery, Endpoint
from tenants.membership import Can

from ..webhook_forms import EndpointForm
from .base import Obj, render_page, tenant_page

ENDPOINT = {"endpoint_id": Obj("endpoint", Endpoint.objects.all(), "webhook")}
DELIVERY = {**ENDPOINT, "delivery_id": Obj("delivery", Delivery.objects.select_related("endpoint", "event"),
                                           "delivery")}


def _field_error(form, exc: services.WebhookInputError) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


def _list_page(request, access, *, form=None, status=200):
    ctx = {"endpoints": selectors.endpoint_list(tenant=access.tenant)}
    if access.can_manage:
        ctx["form"] = form or EndpointForm(initial={"events": ["conversation.created", "message.created"]})
    return render_page(request, "console/webhooks.html", ctx, access=access, nav="webhooks", status=status)


def _detail_page(request, access, endpoint, *, form=None, secret=None, status=200):
    ctx = {"endpoint": endpoint, "deliveries": selectors.delivery_list(endpoint=endpoint), "secret": secret}
    if access.can_manage:
        ctx["form"] = form or EndpointForm(initial=EndpointForm.initial_for(endpoint))
    return render_page(request, "console/webhook.html", ctx, access=access, nav="webhooks", status=status)


@tenant_page(write=Can.MANAGE)
def endpoint_list(request, access):
    if request.method != "POST":
        return _list_page(request, access)
    form = EndpointForm(request.POST)
    if form.is_valid():
        try:
            made = services.endpoint_create(tenant=access.tenant, **form.cleaned_data)
        except services.WebhookInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, "Endpoint added. Copy its signing secret now: it is not shown again.")
            return _detail_page(request, access, made.endpoint, secret=made.secret, status=201)
    return _list_page(request, access, form=form, status=400)


@tenant_page(write=Can.MANAGE, objects=ENDPOINT)
def endpoint_detail(request, access, endpoint):
    if request.method != "POST":
        return _detail_page(request, access, endpoint)
    form = EndpointForm(request.POST)
    if form.is_valid():
        try:
            services.endpoint_update(endpoint=endpoint, **form.cleaned_data)
        except services.WebhookInputError as exc:
            _field_error(form, exc)
        else:
            messages.success(request, "Saved.")
            return redirect("console:webhook", slug=access.tenant.slug, endpoint_id=endpoint.pk)
    return _detail_page(request, access, endpoint, form=form, status=400)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=ENDPOINT)
def endpoint_test(request, access, endpoint):
    services.endpoint_test(endpoint=endpoint)
    messages.success(request, "Test event queued: its delivery appears below.")
    return redirect("console:webhook", slug=access.tenant.slug, endpoint_id=endpoint.pk)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=ENDPOINT)
def endpoint_enable(request, access, endpoint):
    enable = request.POST.get("enabled") == "1"
    services.endpoint_update(endpoint=endpoint, enabled=enable)
    messages.success(request, "Endpoint enabled." if enable else "Endpoint disabled: nothing is sent to it.")
    return redirect("console:webhook", slug=access.tenant.slug, endpoint_id=endpoint.pk)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=ENDPOINT)
def endpoint_delete(request, access, endpoint):
    services.endpoint_delete(endpoint=endpoint)
    messages.success(request, "Endpoint deleted.")
    return redirect("console:webhooks", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=DELIVERY)
def delivery_resend(request, access, endpoint, delivery):
    if delivery.endpoint_id != endpoint.pk:
        return _detail_page(request, access, endpoint, status=404)
    try:
        services.delivery_resend(delivery=delivery)
    except services.WebhookInputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Event {delivery.event_id} queued again.")
    return redirect("console:webhook", slug=access.tenant.slug, endpoint_id=endpoint.pk)
