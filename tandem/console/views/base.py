"""What every console view shares: the decorators that resolve a URL's tenant (and the
role needed to read it or to post to it) through tenants.membership, and `render_page`,
which adds the layout's context (the person's tenants for the switcher)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpResponseNotAllowed
from django.shortcuts import render
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from tenants import membership
from tenants.audit import Actor
from tenants.membership import Can


@dataclass(frozen=True)
class Obj:
    """A tenant-owned object that a URL names by id: passed to the view as `name`."""

    name: str
    queryset: QuerySet
    what: str


def signed_in(view):
    """login_required, and for an htmx request (a live panel polling after the session
    ended) a whole-page redirect to sign in, instead of the sign-in form swapped into
    the panel."""
    plain = login_required(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if getattr(request, "htmx", False) and not request.user.is_authenticated:
            back = request.htmx.current_url_abs_path or reverse("console:overview")
            return HttpResponseClientRedirect(f"{reverse('console:login')}?{urlencode({'next': back})}")
        return plain(request, *args, **kwargs)

    return wrapper


def tenant_page(*, read: Can = Can.VIEW, write: Can | None = None, methods=("GET", "POST"),
                objects: dict[str, Obj] | None = None):
    """A page of one tenant at `<slug>`: the view is called as view(request, access, ...)
    once the tenant is known to be visible (else 404), every id in the path named in
    `objects` is resolved within that tenant (else 404) and passed as its object, and the
    role has `read` (GET) or `write` (any other method) (else 403). The method is
    checked last, so another tenant's URL is a 404 whatever the method."""

    def decorate(view):
        @signed_in
        @wraps(view)
        def wrapper(request, slug, **kwargs):
            access = membership.tenant_access(user=request.user, slug=slug)
            # Another tenant's object is missing (404) whatever the role; only then the
            # role's right to this page (403).
            for param, obj in (objects or {}).items():
                kwargs[obj.name] = membership.tenant_object(access, obj.queryset, what=obj.what,
                                                            pk=kwargs.pop(param))
            access.require(read)
            if request.method not in ("GET", "HEAD"):
                access.require(write or Can.OPERATE)
            if request.method not in methods and not (request.method == "HEAD" and "GET" in methods):
                return HttpResponseNotAllowed(methods)
            return view(request, access, **kwargs)

        return wrapper

    return decorate


def operator_page(*, methods=("GET", "POST")):
    """A page for platform operators only; missing (404) to everyone else."""

    def decorate(view):
        @signed_in
        @wraps(view)
        def wrapper(request, **kwargs):
            membership.require_operator(request.user)
            if request.method not in methods and not (request.method == "HEAD" and "GET" in methods):
                return HttpResponseNotAllowed(methods)
            return view(request, **kwargs)

        return wrapper

    return decorate


def actor(request) -> Actor:
    return Actor.console(request.user)


def render_page(request, template: str, context: dict | None = None, *, access=None, nav: str = "",
                status: int = 200):
    ctx = {"access": access, "tenant": access.tenant if access else None, "nav": nav,
           "my_tenants": membership.user_tenants(request.user) if not request.user.is_staff else [],
           "is_operator": membership.is_operator(request.user), **(context or {})}
    return render(request, template, ctx, status=status)
