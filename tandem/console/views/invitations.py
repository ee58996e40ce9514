"""The invited person's side of an invitation (tenants.invitations): the invitations
that name their account, listed in their own session with Accept and Decline, and the
link they were given, which a signed-in person accepts as themselves and a new person
accepts by choosing a username and a password. The link page is the same whether or
not an account exists for the name or address invited; an unknown, expired, revoked or
used link is one 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.core.exceptions import ValidationError
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from tenants import invitations
from tenants.membership import NotVisible

from ..forms import InvitationSignUpForm, apply_errors
from .base import render_page, signed_in


def _joined(request, membership):
    messages.success(request, f"You are now {membership.role} of {membership.tenant.name}.")
    return redirect("console:tenant", slug=membership.tenant.slug)


@signed_in
@require_GET
def my_invitations(request):
    rows = list(invitations.invitations_for_user(user=request.user))
    return render_page(request, "console/invitations.html", {"invitations": rows}, nav="invitations")


def _mine(request, invitation_id):
    """One of the invitations that name this person; anyone else's is NotVisible, and
    that is checked before the method (as tenant pages do: views/base.py)."""
    invitation = invitations.invitations_for_user(user=request.user).filter(pk=invitation_id).first()
    if invitation is None:
        raise NotVisible("invitation")
    return invitation


@signed_in
def invitation_accept(request, invitation_id):
    invitation = _mine(request, invitation_id)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        membership = invitations.invitation_accept(invitation=invitation, user=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("console:invitations")
    return _joined(request, membership)


@signed_in
def invitation_decline(request, invitation_id):
    invitation = _mine(request, invitation_id)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        invitations.invitation_decline(invitation=invitation, user=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"You declined the invitation to {invitation.tenant.name}.")
    return redirect("console:invitations")


def invitation_link(request, token):
    """GET: what the invitation offers, and how to accept it. POST: accept it, as the
    signed-in person (action=accept) or as a new one (the sign-up form)."""
    invitation = invitations.invitation_by_token(token=token)
    if invitation is None:
        return render_page(request, "console/invitation_link.html", {"invitation": None}, status=404)
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    form, status = None, 200
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                return _joined(request, invitations.invitation_accept(invitation=invitation, user=request.user))
            form = InvitationSignUpForm(request.POST)
            if form.is_valid():
                membership = invitations.invitation_accept_as_new_user(
                    invitation=invitation, username=form.cleaned_data["username"],
                    password=form.cleaned_data["password1"])
                login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
                return _joined(request, membership)
        except ValidationError as exc:
            if form is None:
                messages.error(request, " ".join(exc.messages))
                return redirect("console:invitation_link", token=token)
            apply_errors(form, exc)
        status = 400
    if form is None and not request.user.is_authenticated:
        form = InvitationSignUpForm()
    return render_page(request, "console/invitation_link.html",
                       {"invitation": invitation, "form": form, "token": token}, status=status)
