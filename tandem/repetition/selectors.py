"""A tenant's repetition penalties as its replies use them."""

from __future__ import annotations

from dataclasses import dataclass

from .defaults import WIDGET_REPETITION
from .models import RepetitionSettings

OFF = (0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Penalties:
    frequency: float
    presence: float
    repetition: float


def repetition_get(*, tenant_id: int) -> RepetitionSettings:
    """The tenant's row, or an unsaved one holding the defaults."""
    row = RepetitionSettings.objects.filter(tenant_id=tenant_id).first()
    if row is None:
        freq, pres, rep = WIDGET_REPETITION
        row = RepetitionSettings(tenant_id=tenant_id, enabled=True, frequency_penalty=freq, presence_penalty=pres,
                                 repetition_penalty=rep)
    return row


def penalties_for(*, tenant_id: int) -> Penalties:
    """What a reply of the tenant is sampled with unless its request says otherwise."""
    row = repetition_get(tenant_id=tenant_id)
    if not row.enabled:
        return Penalties(*OFF)
    return Penalties(row.frequency_penalty, row.presence_penalty, row.repetition_penalty)
