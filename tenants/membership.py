"""Which tenants a signed-in person may see, and with what role: the console's access
helpers, the one place where tenancy and roles are checked (Zulip's
`access_stream_common` pattern).

- Platform operators (`is_staff`) see every tenant and may do everything.
- A tenant's members see only their own tenants: a *viewer* reads, an *agent* also
  answers the conversations handed to a person (the inbox), an *admin* also
  manages keys, the assistant and widget settings, the knowledge articles and
  conversations, an *owner* also the
  members (and reads the tenant's audit log). No member changes quotas or the hardware
  allocation; they read both.

Another tenant's slug or id is answered exactly like a missing one (`NotVisible`, a 404):
a person cannot tell "not yours" from "not there". `NotAllowed` (a 403) is only ever
raised about a tenant the person can already see, for an action their role lacks.

API-key access (REST, websocket) is not here: a key carries its tenant
(`services.api_key_authenticate`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.http import Http404

from .access import access_list
from .models import Membership, Tenant


class NotVisible(Http404):
    """Missing, or not this person's to see: the same answer for both."""

    def __init__(self, what: str = "object"):
        super().__init__(f"No such {what}.")


class NotAllowed(PermissionDenied):
    """Visible, but this person's role may not do that."""


class Can(enum.Enum):
    """What a page or form needs. The roles that have each are in `_GRANTS`."""

    VIEW = "view"  # read the tenant's pages: overview, quotas, allocation, keys, conversations
    MANAGE = "manage"  # keys, assistant and widget settings, knowledge (articles, import, retrieval), conversations
    MEMBERS = "members"  # add, change and remove members
    AUDIT = "audit"  # read the tenant's audit log
    INBOX = "inbox"  # the agent inbox: claim, answer and resolve conversations handed to a person
    OPERATE = "operate"  # quotas, hardware allocation, tenants, pools: operators only


STAFF = "staff"
ROLE_ORDER = (Membership.Role.VIEWER, Membership.Role.AGENT, Membership.Role.ADMIN, Membership.Role.OWNER)

_GRANTS: dict[str, frozenset[Can]] = {
    Membership.Role.VIEWER: frozenset({Can.VIEW}),
    Membership.Role.AGENT: frozenset({Can.VIEW, Can.INBOX}),
    Membership.Role.ADMIN: frozenset({Can.VIEW, Can.MANAGE, Can.INBOX}),
    Membership.Role.OWNER: frozenset({Can.VIEW, Can.MANAGE, Can.MEMBERS, Can.AUDIT, Can.INBOX}),
    STAFF: frozenset(Can),
}


def role_can(role: str | None, capability: Can) -> bool:
    return role is not None and capability in _GRANTS.get(role, frozenset())


@dataclass(frozen=True)
class TenantAccess:
    """A tenant as one person may use it: their role there ("staff" for operators)."""

    tenant: Tenant
    role: str

    def can(self, capability: Can) -> bool:
        return role_can(self.role, capability)

    def require(self, capability: Can) -> None:
        if not self.can(capability):
            raise NotAllowed(f"Your role ({self.role}) may not do that here.")

    # For templates, which cannot call with arguments.
    @property
    def can_manage(self) -> bool:
        return self.can(Can.MANAGE)

    @property
    def can_members(self) -> bool:
        return self.can(Can.MEMBERS)

    @property
    def can_audit(self) -> bool:
        return self.can(Can.AUDIT)

    @property
    def can_inbox(self) -> bool:
        return self.can(Can.INBOX)

    @property
    def can_operate(self) -> bool:
        return self.can(Can.OPERATE)

    @property
    def is_staff(self) -> bool:
        return self.role == STAFF


def is_operator(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def require_operator(user, what: str = "page") -> None:
    """Operator-only pages and objects (tenants list, pools, the whole audit log) are
    missing to everyone else, like another tenant's."""
    if not is_operator(user):
        raise NotVisible(what)


def visible_tenants(user) -> QuerySet:
    """The tenants this person may see: all for operators, their memberships' otherwise."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if user.is_staff:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user).distinct()


def role_in(user, tenant: Tenant) -> str | None:
    """This person's role in `tenant`: "staff", a membership role, or None."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_staff:
        return STAFF
    return (Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True).first())


def tenant_access(*, user, slug: Any, need: Can = Can.VIEW) -> TenantAccess:
    """The tenant `slug` as `user` may use it; NotVisible when it is missing or not
    theirs, NotAllowed when it is theirs but their role lacks `need`."""
    tenant = Tenant.objects.filter(slug=str(slug)).select_related("quota", "allocation").first()
    role = role_in(user, tenant) if tenant is not None else None
    if role is None:
        raise NotVisible("tenant")
    access = TenantAccess(tenant=tenant, role=role)
    access.require(need)
    return access


def tenant_object(access: TenantAccess, queryset: QuerySet, *, what: str, **lookup) -> Model:
    """One row of the tenant's own data (a key, a member, a conversation) by `lookup`,
    filtered to the tenant first; another tenant's row is NotVisible like a missing one.
    A malformed id (not a number, not a UUID) is NotVisible too, never a 500."""
    try:
        obj = access_list(queryset, tenant=access.tenant).filter(**lookup).first()
    except (ValueError, TypeError, ValidationError):  # ValidationError: a malformed UUID
        obj = None
    if obj is None:
        raise NotVisible(what)
    return obj


def user_tenants(user) -> list[TenantAccess]:
    """Every tenant this person may see with their role, for the switcher and overview."""
    if user is None or not user.is_authenticated or not user.is_active:
        return []
    if user.is_staff:
        return [TenantAccess(tenant=t, role=STAFF) for t in Tenant.objects.order_by("name")]
    rows = Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__name")
    return [TenantAccess(tenant=m.tenant, role=m.role) for m in rows]
