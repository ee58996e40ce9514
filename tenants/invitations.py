"""Membership by invitation: an owner invites a person by username or e-mail; the person
says yes from their own session or through the invitation's link (a new person sets a
password there). Nobody is made a member of a tenant without their consent, and
nothing here tells the owner whether an account with that name or address exists: the
invitation, its answer and its e-mail are the same either way, and no user is looked
up to create one. Invitations expire after `TTL`, can be revoked while pending, and
every step is audited.

`members.member_add` stays for operators (the `tenant` command, the Django admin)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import unicodedata
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from . import audit
from .audit import SYSTEM, Actor
from .models import Invitation, Membership, Tenant

log = logging.getLogger(__name__)

TTL = timedelta(days=7)
MAX_PENDING_PER_TENANT = 200  # an owner's invitations in flight: enough for a team, not a mailer


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def identifier_normalise(identifier: str) -> str:
    """A username as Django authenticates it (NFKC); an e-mail address in lower case."""
    value = unicodedata.normalize("NFKC", (identifier or "").strip())
    return value.lower() if "@" in value else value


def _is_member(tenant: Tenant, identifier: str) -> bool:
    by = Q(user__email__iexact=identifier) if "@" in identifier else Q(user__username=identifier)
    return Membership.objects.filter(by, tenant=tenant).exists()


def _pending(qs: QuerySet) -> QuerySet:
    return qs.filter(status=Invitation.Status.PENDING, expires_at__gt=timezone.now())


@transaction.atomic
def invitation_create(*, tenant: Tenant, identifier: str, role: str, actor: Actor = SYSTEM) -> tuple[Invitation, str]:
    """A pending invitation and its link token (shown once; only its hash is kept).
    Refused only for what the owner already sees: a role that does not exist, a current
    member (their username or e-mail is on the members page), an invitation to the same
    person still pending, or too many pending."""
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Role must be one of {', '.join(Membership.Role.values)}."})
    identifier = identifier_normalise(identifier)
    if not identifier:
        raise ValidationError({"user": "Give a username or an e-mail address."})
    if len(identifier) > 254:
        raise ValidationError({"user": "At most 254 characters."})
    Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk).first()  # one invitation at a time per tenant
    if _is_member(tenant, identifier):
        raise ValidationError({"user": f"{identifier} is already a member of {tenant.name}."})
    pending = _pending(Invitation.objects.filter(tenant=tenant))
    if pending.filter(identifier=identifier).exists():
        raise ValidationError({"user": f"{identifier} already has a pending invitation: revoke it to send a new one."})
    if pending.count() >= MAX_PENDING_PER_TENANT:
        raise ValidationError({"user": f"{tenant.name} has {MAX_PENDING_PER_TENANT} pending invitations: "
                                       "revoke some first."})
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        tenant=tenant, identifier=identifier, role=role, token_hash=_hash(token),
        invited_by=actor.user if getattr(actor.user, "pk", None) else None, expires_at=timezone.now() + TTL)
    audit.record(actor=actor, tenant=tenant, entity="invitation", entity_id=invitation.pk, action="create",
                 changes={"identifier": [None, identifier], "role": [None, role]},
                 summary=f"{identifier} invited to {tenant.slug} as {role}")
    return invitation, token


def invitation_send(*, invitation: Invitation, link: str) -> bool:
    """E-mail the link when the invitation names an address (after the commit): the same
    message whether or not an account has that address. False for a username."""
    if "@" not in invitation.identifier:
        return False
    tenant, days = invitation.tenant, TTL.days

    def send() -> None:
        try:
            send_mail(subject=f"You are invited to {tenant.name} on Tandem",
                      message=f"You have been invited to join {tenant.name} as {invitation.role}.\n\n"
                              f"Accept or decline here (the link works for {days} days):\n{link}\n\n"
                              "If you were not expecting this, ignore this message.",
                      from_email=None, recipient_list=[invitation.identifier])
        except Exception:  # noqa: BLE001 - the owner has the link on the page all the same
            log.warning("could not e-mail invitation %s", invitation.pk, exc_info=True)

    transaction.on_commit(send)
    return True


def invitation_by_token(*, token: str) -> Invitation | None:
    """The pending, unexpired invitation of a link token; None for any other (unknown,
    expired, revoked, used: one answer for all)."""
    if not token or not isinstance(token, str) or len(token) > 100:
        return None
    digest = _hash(token)
    invitation = _pending(Invitation.objects.select_related("tenant")).filter(token_hash=digest).first()
    if invitation is None or not hmac.compare_digest(invitation.token_hash, digest):
        return None
    return invitation


def invitations_for_user(*, user) -> QuerySet:
    """The pending, unexpired invitations that name this account: its username, or its
    e-mail address when it has one."""
    by = Q(identifier=identifier_normalise(user.get_username()))
    if user.email:
        by |= Q(identifier=user.email.strip().lower())
    return _pending(Invitation.objects.filter(by)).select_related("tenant", "invited_by").order_by("-created_at")


def invitations_of_tenant(*, tenant: Tenant) -> QuerySet:
    """The tenant's pending, unexpired invitations, for its owners."""
    return _pending(Invitation.objects.filter(tenant=tenant)).select_related("invited_by").order_by("-created_at")


def _lock_pending(invitation: Invitation) -> Invitation:
    locked = _pending(Invitation.objects.select_for_update(of=("self",)).select_related("tenant")).filter(
        pk=invitation.pk).first()
    if locked is None:
        raise ValidationError("This invitation is no longer valid: it was used, revoked or has expired.")
    return locked


def _close(invitation: Invitation, status: str, user=None) -> None:
    invitation.status, invitation.closed_at, invitation.answered_by = status, timezone.now(), user
    invitation.save(update_fields=["status", "closed_at", "answered_by"])


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user) -> Membership:
    """The person says yes: a member with the invitation's role. Refused when the
    invitation is no longer pending or the person is a member already."""
    invitation = _lock_pending(invitation)
    tenant = invitation.tenant
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise ValidationError(f"You are already a member of {tenant.name}.")
    membership = Membership.objects.create(tenant=tenant, user=user, role=invitation.role)
    _close(invitation, Invitation.Status.ACCEPTED, user)
    actor = Actor.console(user)
    audit.record(actor=actor, tenant=tenant, entity="invitation", entity_id=invitation.pk, action="accept",
                 changes={"status": [Invitation.Status.PENDING, Invitation.Status.ACCEPTED]},
                 summary=f"{user.get_username()} accepted the invitation to {tenant.slug}")
    audit.record(actor=actor, tenant=tenant, entity="membership", entity_id=membership.pk, action="create",
                 changes={"user": [None, user.get_username()], "role": [None, invitation.role]},
                 summary=f"{user.get_username()} joined {tenant.slug} as {invitation.role} (invited)")
    return membership


@transaction.atomic
def invitation_accept_as_new_user(*, invitation: Invitation, username: str, password: str) -> Membership:
    """A new person accepts through the link: their account and their membership, in
    one transaction. The account takes no e-mail address from the invitation: the owner
    sees the link too, so holding it proves nothing about the address, and an address
    on an account is what later invitations to it are listed by (`invitations_for_user`)."""
    invitation = _lock_pending(invitation)
    User = get_user_model()
    user = User(username=identifier_normalise(username))
    try:
        user.full_clean(exclude=["password"])
        validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError(exc.messages) from None
    user.set_password(password)
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:
        raise ValidationError({"username": "A user with that username already exists."}) from None
    return invitation_accept(invitation=invitation, user=user)


@transaction.atomic
def invitation_decline(*, invitation: Invitation, user) -> None:
    invitation = _lock_pending(invitation)
    _close(invitation, Invitation.Status.DECLINED, user)
    audit.record(actor=Actor.console(user), tenant=invitation.tenant, entity="invitation",
                 entity_id=invitation.pk, action="decline",
                 changes={"status": [Invitation.Status.PENDING, Invitation.Status.DECLINED]},
                 summary=f"{user.get_username()} declined the invitation to {invitation.tenant.slug}")


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, actor: Actor = SYSTEM) -> None:
    invitation = _lock_pending(invitation)
    _close(invitation, Invitation.Status.REVOKED)
    audit.record(actor=actor, tenant=invitation.tenant, entity="invitation", entity_id=invitation.pk,
                 action="revoke", changes={"status": [Invitation.Status.PENDING, Invitation.Status.REVOKED]},
                 summary=f"invitation of {invitation.identifier} to {invitation.tenant.slug} revoked")
