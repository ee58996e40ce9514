"""Tenant → Keys: list, create (the plaintext shown once), revoke, and a widget key's
allowed origins (edited on the Install page, which also shows the embed snippets).
Admins and owners manage; viewers read."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect

from tenants import services
from tenants.membership import Can
from tenants.models import ApiKey

from ..forms import KeyCreateForm, OriginsForm, apply_errors
from .base import Obj, actor, render_page, tenant_page
from .install import embed_snippet, install_page


def _keys_page(request, access, *, form=None, issued=None, status=200):
    keys = list(ApiKey.objects.filter(tenant=access.tenant).order_by("revoked_at", "-created_at"))
    rows = [{"key": k} for k in keys]
    if form is None and access.can_manage:
        form = KeyCreateForm()
    return render_page(request, "console/keys.html",
                       {"rows": rows, "form": form if access.can_manage else None, "issued": issued,
                        "issued_snippet": embed_snippet(request, issued.api_key)
                        if issued and issued.api_key.kind == ApiKey.Kind.WIDGET else ""},
                       access=access, nav="keys", status=status)


@tenant_page(methods=("GET",))
def keys(request, access):
    return _keys_page(request, access)


@tenant_page(write=Can.MANAGE, methods=("POST",))
def key_create(request, access):
    form = KeyCreateForm(request.POST)
    if form.is_valid():
        try:
            origins = services.origins_clean(form.cleaned_data["allowed_origins"])
            issued = services.api_key_create(tenant=access.tenant, kind=form.cleaned_data["kind"],
                                             name=form.cleaned_data["name"], allowed_origins=origins,
                                             actor=actor(request))
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            # Rendered, not redirected: the plaintext exists in this response alone.
            return _keys_page(request, access, issued=issued, status=201)
    return _keys_page(request, access, form=form, status=400)


KEY = {"key_id": Obj("api_key", ApiKey.objects.all(), "key")}


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=KEY)
def key_revoke(request, access, api_key):
    services.api_key_revoke(api_key=api_key, actor=actor(request))
    messages.success(request, f"Key {api_key.prefix}… is revoked: it stops working at its next request.")
    return redirect("console:keys", slug=access.tenant.slug)


@tenant_page(write=Can.MANAGE, methods=("POST",), objects=KEY)
def key_origins(request, access, api_key):
    form = OriginsForm(request.POST, prefix=f"key{api_key.pk}")
    if form.is_valid():
        try:
            services.api_key_set_origins(api_key=api_key, allowed_origins=form.cleaned_data["allowed_origins"],
                                         actor=actor(request))
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Saved the allowed origins of {api_key.prefix}….")
            return redirect("console:install", slug=access.tenant.slug)
    return install_page(request, access, bound=form, bound_key=api_key.pk, status=400)
