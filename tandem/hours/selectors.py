"""Reading a tenant's business hours, and what they mean now for a hand-over."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from tenants.access import access_list
from tenants.models import Tenant

from .models import BusinessHours
from .schedule import Schedule, schedule_of


@dataclass(frozen=True)
class Availability:
    in_hours: bool
    back_at: datetime | None = None  # the next opening, when out of hours (None: not known)


def hours_get(*, tenant: Tenant) -> BusinessHours:
    """The tenant's row, or an unsaved default (off, UTC, no days)."""
    return access_list(BusinessHours, tenant=tenant).first() or BusinessHours(tenant=tenant)


def schedule_get(*, tenant_id: int) -> Schedule | None:
    """The schedule in force; None when the tenant has business hours off."""
    row = access_list(BusinessHours, tenant=Tenant(pk=tenant_id)).filter(enabled=True).first()
    if row is None:
        return None
    return schedule_of(time_zone=row.time_zone, weekly=row.weekly, holidays=row.holidays)


def availability(*, tenant_id: int, now: datetime | None = None) -> Availability:
    schedule = schedule_get(tenant_id=tenant_id)
    now = now or timezone.now()
    if schedule is None or schedule.is_open(now):
        return Availability(in_hours=True)
    return Availability(in_hours=False, back_at=schedule.next_opening(now))
