"""Recording the checklist's own facts. Each is written once: later calls find it set
and change nothing.

`widget_connected` runs in the widget socket's connect path, so it costs that path as
little as possible: a process remembers the tenants it has already recorded (a set in
memory), and only a process's first accepted connect of a tenant reaches the database
(one conditional UPDATE, and an INSERT the first time ever). No Redis at all."""

from __future__ import annotations

import threading

from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import TenantSetup

_recorded: set[int] = set()
_lock = threading.Lock()


def widget_connect_known(tenant_id: int) -> bool:
    """Whether this process has already recorded `tenant_id`'s first connect (no I/O)."""
    return tenant_id in _recorded


def widget_connected(*, tenant_id: int, origin: str) -> None:
    """The widget connected from `origin`, one of the tenant's allowed origins."""
    if tenant_id in _recorded:
        return
    now = timezone.now()
    updated = TenantSetup.objects.filter(tenant_id=tenant_id, widget_connected_at__isnull=True).update(
        widget_connected_at=now, widget_origin=origin[:300])
    if not updated and not TenantSetup.objects.filter(tenant_id=tenant_id).exists():
        try:
            with transaction.atomic():
                TenantSetup.objects.create(tenant_id=tenant_id, widget_connected_at=now, widget_origin=origin[:300])
        except IntegrityError:  # another process made the row first: it holds the fact
            pass
    with _lock:
        _recorded.add(tenant_id)


def snippet_copied(*, tenant) -> None:
    """Someone copied the embed snippet from the Install page."""
    row, _ = TenantSetup.objects.get_or_create(tenant=tenant)
    if row.snippet_copied_at is None:
        TenantSetup.objects.filter(pk=tenant.pk, snippet_copied_at__isnull=True).update(
            snippet_copied_at=timezone.now())
