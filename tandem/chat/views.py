"""Pages of the chat surface. The demo page is a plain chat box on the websocket, for
trying a tenant's assistant from `make run` (the embeddable widget is separate)."""

from django.conf import settings
from django.http import Http404
from django.shortcuts import render

from tenants.selectors import tenant_get, widget_key_get


def demo_page(request, slug: str):
    # A development page: in production (DEBUG off) only staff see it, so it is not a
    # public way to chat on any tenant's quota.
    if not (settings.DEBUG or request.user.is_staff):
        raise Http404("No such page.")
    tenant = tenant_get(slug=slug)
    if tenant is None or not tenant.is_active:
        raise Http404("No such tenant.")
    key = widget_key_get(tenant=tenant)
    if key is None:
        raise Http404("This tenant has no widget key.")
    return render(request, "chat/demo.html", {"tenant": tenant, "widget_key": key.public_key})
