"""Saving a tenant's repetition control: checked and audited."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from tandem.chat.validation import InvalidInput
from tenants.audit import Actor, record_change, snapshot
from tenants.models import Tenant

from .models import RepetitionSettings
from .selectors import repetition_get

FIELDS = ("enabled", "frequency_penalty", "presence_penalty", "repetition_penalty")


def repetition_save(*, tenant: Tenant, actor: Actor, enabled: bool, frequency_penalty: float,
                    presence_penalty: float, repetition_penalty: float) -> RepetitionSettings:
    """Replace the tenant's settings; InvalidInput (its `param` names the field) for a
    value out of range, and nothing changes then."""
    with transaction.atomic():
        row = repetition_get(tenant_id=tenant.pk)
        before = snapshot(row, FIELDS) if row.pk else {}
        row.enabled, row.frequency_penalty = bool(enabled), float(frequency_penalty)
        row.presence_penalty, row.repetition_penalty = float(presence_penalty), float(repetition_penalty)
        try:
            row.full_clean(exclude=["tenant"])
        except ValidationError as exc:
            field, errors = next(iter(exc.message_dict.items()))
            raise InvalidInput(errors[0], code="invalid_value", param=field) from None
        row.save()
        record_change(actor=actor, tenant=tenant, entity="repetition_settings", instance=row, before=before,
                      fields=FIELDS, summary="Repetition control " + ("on" if row.enabled else "off"))
    return row
