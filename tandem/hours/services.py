"""Saving a tenant's business hours: checked (schedule.py) and audited."""

from __future__ import annotations

from django.db import transaction

from tenants.audit import Actor, record_change, snapshot
from tenants.models import Tenant

from .models import BusinessHours
from .schedule import parse_holidays, parse_weekly, zone
from .selectors import hours_get

FIELDS = ("enabled", "time_zone", "weekly", "holidays")


def hours_save(*, tenant: Tenant, actor: Actor, enabled: bool, time_zone: str, weekly: dict,
               holidays: str) -> BusinessHours:
    """Replace the tenant's schedule. `weekly` {"0": ["09:00", "17:00"], …} (Monday 0,
    missing days closed); `holidays` one a line, "YYYY-MM-DD name". Raises InvalidInput
    (its `param` names the field) and changes nothing then."""
    zone(time_zone)
    parse_weekly(weekly)
    days = {k: [v[0].strip(), v[1].strip()] for k, v in sorted(weekly.items())}
    listed = parse_holidays(holidays)
    with transaction.atomic():
        row = hours_get(tenant=tenant)
        before = snapshot(row, FIELDS) if row.pk else {}
        row.enabled, row.time_zone, row.weekly, row.holidays = bool(enabled), time_zone, days, listed
        row.save()
        record_change(actor=actor, tenant=tenant, entity="business_hours", instance=row, before=before,
                      fields=FIELDS, summary="Business hours " + ("on" if row.enabled else "off"))
    return row
