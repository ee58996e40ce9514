"""Tenant → Install: what puts the assistant on the tenant's site. Each live widget key's
embed snippet (its Copy button also records the copy for the getting-started
checklist), the origins the key works from, and whether the widget has connected from
one of them yet. Secret keys for the REST API stay on the Keys page."""

from __future__ import annotations

from django.http import HttpResponse

from tandem.onboarding import selectors as setup_selectors
from tandem.onboarding import services as setup_services
from tenants.membership import Can
from tenants.models import ApiKey

from ..forms import OriginsForm
from .base import render_page, tenant_page


def embed_snippet(request, api_key: ApiKey) -> str:
    src = request.build_absolute_uri("/static/tandem/widget.js")
    return f'<script src="{src}" data-tandem-key="{api_key.public_key}" async></script>'


def install_page(request, access, *, bound: OriginsForm | None = None, bound_key: int | None = None,
                 status: int = 200):
    keys = ApiKey.objects.filter(tenant=access.tenant, kind=ApiKey.Kind.WIDGET, revoked_at__isnull=True)
    rows = [{"key": k, "snippet_id": f"snippet-{k.pk}", "snippet": embed_snippet(request, k),
             "origins_form": bound if k.pk == bound_key else OriginsForm(
                 initial={"allowed_origins": "\n".join(k.allowed_origins)}, prefix=f"key{k.pk}")}
            for k in keys.order_by("created_at") if k.public_key]
    return render_page(request, "console/install.html",
                       {"rows": rows, "setup": setup_selectors.setup_for(access.tenant)},
                       access=access, nav="install", status=status)


@tenant_page(methods=("GET",))
def install(request, access):
    return install_page(request, access)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def install_copied(request, access):
    """The snippet's Copy button (htmx, nothing swapped): the checklist's first step. A
    viewer copies too, but records nothing: no post of a viewer's changes anything."""
    setup_services.snippet_copied(tenant=access.tenant)
    return HttpResponse(status=204)
