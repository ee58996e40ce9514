"""The audit log's writing side: who changed what, with each changed field's old and new
value. The services call `record` for every change they make to quotas, allocations,
keys, members, pools and tenants, and the Django admin calls it through the same
helpers (tenants/admin.py), so a change is logged the same way whichever door it came
through. Reading the log is `selectors.audit_list`, scoped by tenants.membership."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models

from .models import AuditLog, Tenant


@dataclass(frozen=True)
class Actor:
    """Who made a change and through which door (console, admin, command, system)."""

    user: Any = None  # an auth user, or None for a command run without one or the system
    source: str = AuditLog.Source.SYSTEM

    @classmethod
    def console(cls, user) -> Actor:
        return cls(user=user, source=AuditLog.Source.CONSOLE)

    @classmethod
    def admin(cls, user) -> Actor:
        return cls(user=user, source=AuditLog.Source.ADMIN)

    @classmethod
    def command(cls, user=None) -> Actor:
        return cls(user=user, source=AuditLog.Source.COMMAND)

    @property
    def name(self) -> str:
        return getattr(self.user, "get_username", lambda: "")() if self.user is not None else ""


SYSTEM = Actor()


def value_of(instance: models.Model, field: str) -> Any:
    """A field's value as the log stores it: a related row by its name (a pool as
    `decode.gpu-a`, a user by username), dates as ISO text, the rest as it is."""
    value = getattr(instance, field)
    if isinstance(value, models.Model):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return list(value)
    return value


def snapshot(instance: models.Model, fields: tuple[str, ...] | list[str]) -> dict[str, Any]:
    return {f: value_of(instance, f) for f in fields}


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list]:
    """{field: [old, new]} for the fields whose value changed."""
    return {f: [before.get(f), after.get(f)] for f in after if before.get(f) != after.get(f)}


def record(
    *, actor: Actor, tenant: Tenant | None, entity: str, entity_id: Any, action: str,
    changes: dict[str, list] | None = None, summary: str = "",
) -> AuditLog:
    user = actor.user if getattr(actor.user, "pk", None) is not None else None
    return AuditLog.objects.create(
        actor=user, actor_name=actor.name, source=actor.source,
        tenant=tenant, tenant_slug=tenant.slug if tenant is not None else "",
        entity=entity, entity_id=str(entity_id or ""), action=action,
        changes=changes or {}, summary=summary[:300],
    )


def record_change(
    *, actor: Actor, tenant: Tenant | None, entity: str, instance: models.Model,
    before: dict[str, Any], fields: tuple[str, ...] | list[str], summary: str = "",
) -> AuditLog | None:
    """Log an update of `instance` (already saved) against `before`; nothing when no
    field changed."""
    changes = diff(before, snapshot(instance, fields))
    if not changes:
        return None
    return record(actor=actor, tenant=tenant, entity=entity, entity_id=instance.pk, action="update",
                  changes=changes, summary=summary)
