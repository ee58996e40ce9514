"""Writing labels: defining them (audited, as the tenant's settings are) and setting them
on conversations. Bad input is an InvalidInput naming its field; a label or conversation
of another tenant is NotFound, exactly like a missing one (tenants.access)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import IntegrityError, transaction

from tandem.chat.models import Conversation
from tandem.chat.validation import InvalidInput
from tandem.url_converters import row_id
from tenants import audit
from tenants.access import NotFound, access_list
from tenants.models import Tenant

from .models import COLORS, Label

MAX_NAME = 40
MAX_LABELS = 100  # a tenant's labels: a vocabulary, not a tag cloud


def _clean(name: str, color: str) -> tuple[str, str]:
    name = " ".join((name or "").split())
    if not name:
        raise InvalidInput("Give the label a name.", code="empty", param="name")
    if len(name) > MAX_NAME:
        raise InvalidInput(f"A label's name is at most {MAX_NAME} characters.", code="too_long", param="name")
    color = (color or "grey").strip().lower()
    if color not in COLORS:
        raise InvalidInput(f"Choose a colour among {', '.join(COLORS)}.", code="invalid_color", param="color")
    return name, color


def label_create(*, tenant: Tenant, name: str, color: str = "grey", by=None) -> Label:
    name, color = _clean(name, color)
    if access_list(Label, tenant=tenant).count() >= MAX_LABELS:
        raise InvalidInput(f"A tenant has at most {MAX_LABELS} labels: delete one first.", code="too_many",
                           param="name")
    try:
        with transaction.atomic():
            label = Label.objects.create(tenant=tenant, name=name, color=color)
            audit.record(actor=audit.Actor.console(by), tenant=tenant, entity="label", entity_id=label.pk,
                         action="create", changes={"name": [None, name], "color": [None, color]},
                         summary=f"label {name!r} created")
    except IntegrityError:
        raise InvalidInput(f"A label named “{name}” exists already.", code="duplicate", param="name") from None
    return label


def label_update(*, label: Label, name: str, color: str, by=None) -> Label:
    name, color = _clean(name, color)
    before = audit.snapshot(label, ("name", "color"))
    label.name, label.color = name, color
    try:
        with transaction.atomic():
            label.save(update_fields=["name", "color"])
            audit.record_change(actor=audit.Actor.console(by), tenant=label.tenant, entity="label", instance=label,
                                before=before, fields=("name", "color"), summary=f"label {name!r} changed")
    except IntegrityError:
        label.refresh_from_db()
        raise InvalidInput(f"A label named “{name}” exists already.", code="duplicate", param="name") from None
    return label


def label_delete(*, label: Label, by=None) -> None:
    with transaction.atomic():
        audit.record(actor=audit.Actor.console(by), tenant=label.tenant, entity="label", entity_id=label.pk,
                     action="delete", changes={"name": [label.name, None]}, summary=f"label {label.name!r} deleted")
        label.delete()


def labels_resolve(*, tenant: Tenant, ids: Iterable) -> list[Label]:
    """The tenant's labels of `ids` (numbers as a form sends them); NotFound("label") if
    any is not one of them, so a stale or foreign id is said, not dropped."""
    wanted = set()
    for i in ids:
        try:
            wanted.add(row_id(i))  # out of range too: SQLite would refuse the query
        except (TypeError, ValueError):
            raise NotFound("label") from None
    found = list(access_list(Label, tenant=tenant).filter(pk__in=wanted))
    if len(found) != len(wanted):
        raise NotFound("label")
    return found


def conversation_labels_set(*, conversation: Conversation, labels: Iterable[Label]) -> list[Label]:
    """The conversation carries exactly `labels` (the tenant's, from labels_resolve)."""
    labels = list(labels)
    if any(lb.tenant_id != conversation.tenant_id for lb in labels):
        raise NotFound("label")
    conversation.labels.set(labels)
    return labels


def labels_add(*, label: Label, conversations: Iterable[Conversation]) -> int:
    """`label` on each of `conversations` (the same tenant's); how many did not have it."""
    convs = [c for c in conversations if c.tenant_id == label.tenant_id]
    Through = Label.conversations.through
    had = set(Through.objects.filter(label=label, conversation__in=convs).values_list("conversation_id", flat=True))
    Through.objects.bulk_create([Through(label=label, conversation=c) for c in convs if c.pk not in had],
                                ignore_conflicts=True)
    return len([c for c in convs if c.pk not in had])
