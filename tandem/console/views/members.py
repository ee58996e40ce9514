"""Tenant → Members: owners (and operators) add people by username or e-mail with a
role, change roles and remove members; everyone else reads the list."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect

from tenants import services
from tenants.membership import Can
from tenants.models import Membership

from ..forms import MemberAddForm, MemberRoleForm, apply_errors
from .base import Obj, actor, render_page, tenant_page


def _page(request, access, *, form=None, status=200):
    rows = Membership.objects.filter(tenant=access.tenant).select_related("user").order_by("user__username")
    members = [{"m": m, "form": MemberRoleForm(initial={"role": m.role}, prefix=f"m{m.pk}")} for m in rows]
    if form is None and access.can_members:
        form = MemberAddForm()
    return render_page(request, "console/members.html",
                       {"members": members, "form": form if access.can_members else None},
                       access=access, nav="members", status=status)


@tenant_page(write=Can.MEMBERS)
def members(request, access):
    if request.method == "POST":
        form = MemberAddForm(request.POST)
        if form.is_valid():
            try:
                m = services.member_add(tenant=access.tenant, identifier=form.cleaned_data["user"],
                                        role=form.cleaned_data["role"], actor=actor(request))
            except ValidationError as exc:
                apply_errors(form, exc)
            else:
                messages.success(request, f"Saved: {m.user.get_username()} is now {m.role} of {access.tenant.name}.")
                return redirect("console:members", slug=access.tenant.slug)
        return _page(request, access, form=form, status=400)
    return _page(request, access)


MEMBER = {"membership_id": Obj("m", Membership.objects.select_related("user"), "member")}


@tenant_page(write=Can.MEMBERS, methods=("POST",), objects=MEMBER)
def member_role(request, access, m):
    form = MemberRoleForm(request.POST, prefix=f"m{m.pk}")
    if form.is_valid():
        try:
            services.member_set_role(membership=m, role=form.cleaned_data["role"], actor=actor(request))
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"Saved: {m.user.get_username()} is now {form.cleaned_data['role']}.")
    else:
        messages.error(request, "Pick a role: owner, admin or viewer.")
    return redirect("console:members", slug=access.tenant.slug)


@tenant_page(write=Can.MEMBERS, methods=("POST",), objects=MEMBER)
def member_remove(request, access, m):
    try:
        services.member_remove(membership=m, actor=actor(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{m.user.get_username()} was removed from {access.tenant.name}.")
    return redirect("console:members", slug=access.tenant.slug)
