"""Pages of the chat surface: the widget's configuration (for pages that embed it) and
the demo page, a fictional company's site embedding the widget as a site owner would."""

from django.conf import settings
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from tenants.selectors import tenant_get, widget_key_get

from . import widget


@require_GET
def widget_config(request):
    origin = widget.page_origin(origin=request.headers.get("Origin"), fetch_site=request.headers.get("Sec-Fetch-Site"),
                                own_origin=request.build_absolute_uri("/").rstrip("/"))
    answer = widget.widget_config_answer(key=request.GET.get("key", ""), origin=origin,
                                         locale=request.GET.get("locale", "")[:35], langs=request.GET.get("langs", "")[:300])
    response = JsonResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


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
    # The snippet exactly as a site owner pastes it: the loader's fixed URL on this host.
    src = request.build_absolute_uri(f"{settings.STATIC_URL}tandem/widget.js")
    return render(request, "chat/demo.html", {"tenant": tenant, "widget_key": key.public_key, "widget_src": src})
