"""Tenant → Members: owners (and operators) invite people by username or e-mail with a
role (tenants.invitations: the person accepts; the answer is the same whether or not
an account exists), see and revoke pending invitations, change roles and remove
members; everyone else reads the list."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect
from django.urls import reverse

from tenants import invitations, services
from tenants.membership import Can
from tenants.models import Invitation, Membership

from ..forms import MemberInviteForm, MemberRoleForm, apply_errors
from .base import Obj, actor, render_page, tenant_page


def _page(request, access, *, form=None, invited=None, status=200):
    rows = Membership.objects.filter(tenant=access.tenant).select_related("user").order_by("user__username")
    members = [{"m": m, "form": MemberRoleForm(initial={"role": m.role}, prefix=f"m{m.pk}")} for m in rows]
    if form is None and access.can_members:
        form = MemberInviteForm()
    pending = list(invitations.invitations_of_tenant(tenant=access.tenant)) if access.can_members else []
    return render_page(request, "console/members.html",
                       {"members": members, "form": form if access.can_members else None,
                        "invitations": pending, "invited": invited},
                       access=access, nav="members", status=status)


@tenant_page(write=Can.MEMBERS)
def members(request, access):
    if request.method == "POST":
        form = MemberInviteForm(request.POST)
        if form.is_valid():
            try:
                invitation, token = invitations.invitation_create(
                    tenant=access.tenant, identifier=form.cleaned_data["user"], role=form.cleaned_data["role"],
                    actor=actor(request))
            except ValidationError as exc:
                apply_errors(form, exc)
            else:
                link = request.build_absolute_uri(reverse("console:invitation_link", args=[token]))
                emailed = invitations.invitation_send(invitation=invitation, link=link)
                # Rendered, not redirected: the link exists in this response alone.
                return _page(request, access, invited={"invitation": invitation, "link": link, "emailed": emailed},
                             status=201)
        return _page(request, access, form=form, status=400)
    return _page(request, access)


INVITATION = {"invitation_id": Obj("invitation", Invitation.objects.all(), "invitation")}


@tenant_page(write=Can.MEMBERS, methods=("POST",), objects=INVITATION)
def invitation_revoke(request, access, invitation):
    try:
        invitations.invitation_revoke(invitation=invitation, actor=actor(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"The invitation of {invitation.identifier} was revoked.")
    return redirect("console:members", slug=access.tenant.slug)


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
