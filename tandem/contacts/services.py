"""Contacts' data, written: export (audited: who took a copy), delete a contact, the
tenant's retention period and its purge. Every deletion and purge is in the audit log,
with counts and a digest standing in for the contact's id (the log outlives them)."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from tandem.attachments.models import Attachment
from tandem.attachments.services import attachments_erase, pending_uploads_purge
from tenants import audit

from .erase import Erased, conversations_erase
from .export import contact_export
from .identity import contact_get
from .models import RetentionPolicy

MAX_RETENTION_DAYS = 36500
PENDING_UPLOAD_DAYS = 1  # an upload never sent into a conversation goes after a day


def contact_export_take(*, tenant, contact_id, actor: audit.Actor) -> dict:
    """The contact's data (export.contact_export), the taking of it audited. Raises
    NotFound("contact")."""
    contact, conversations = contact_get(tenant=tenant, contact_id=contact_id)
    data = contact_export(tenant=tenant, contact=contact, conversations=conversations)
    audit.record(actor=actor, tenant=tenant, entity="contact", entity_id=contact.digest(tenant.pk), action="export",
                 summary=f"contact exported: {len(data['conversations'])} conversations")
    return data


def contact_delete(*, tenant, contact_id, actor: audit.Actor) -> Erased:
    """Delete everything of the contact in this tenant: their conversations with all they
    hold (tandem.contacts.erase), and uploads they never sent. Audited. Raises
    NotFound("contact")."""
    contact, conversations = contact_get(tenant=tenant, contact_id=contact_id)
    erased = conversations_erase(tenant=tenant, conversation_ids=list(conversations.values_list("pk", flat=True)))
    erased.attachments += attachments_erase(Attachment.objects.filter(tenant=tenant, owner=contact.id,
                                                                      message__isnull=True))
    counts = erased.as_dict()
    audit.record(actor=actor, tenant=tenant, entity="contact", entity_id=contact.digest(tenant.pk), action="delete",
                 changes={k: [v, 0] for k, v in counts.items()},
                 summary="contact deleted: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items()))
    return erased


def retention_of(*, tenant) -> RetentionPolicy:
    return RetentionPolicy.objects.filter(tenant=tenant).first() or RetentionPolicy(tenant=tenant)


class RetentionInvalid(ValueError):
    code = "invalid_value"


def retention_set(*, tenant, days: int | None, actor: audit.Actor) -> RetentionPolicy:
    """Keep conversations for `days` after their last message (None: keep them). Audited."""
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS):
        raise RetentionInvalid(f"The retention period is a number of days from 1 to {MAX_RETENTION_DAYS}, or none.")
    policy = retention_of(tenant=tenant)
    before = audit.snapshot(policy, ("days",)) if policy.pk else {"days": None}
    policy.days = days
    with transaction.atomic():
        policy.save()
        audit.record_change(actor=actor, tenant=tenant, entity="retention", instance=policy, before=before,
                            fields=("days",), summary=f"retention period: {f'{days} days' if days else 'keep'}")
    return policy


def retention_purge(*, now=None) -> dict[str, int]:
    """Every tenant's conversations idle longer than its retention period, deleted (with
    all they hold), one audit record per tenant that lost any; and uploads nobody sent.
    Idempotent: a second run finds nothing more. {tenant slug: conversations deleted}."""
    now = now or timezone.now()
    done: dict[str, int] = {}
    for policy in RetentionPolicy.objects.filter(days__isnull=False).select_related("tenant"):
        tenant, cutoff = policy.tenant, now - timedelta(days=policy.days)
        ids = list(tenant.conversations.filter(updated_at__lt=cutoff).values_list("pk", flat=True))
        erased = conversations_erase(tenant=tenant, conversation_ids=ids) if ids else Erased()
        RetentionPolicy.objects.filter(pk=policy.pk).update(last_purge_at=now, last_purge_count=erased.conversations)
        if erased.conversations:
            counts = erased.as_dict()
            audit.record(actor=audit.SYSTEM, tenant=tenant, entity="retention", entity_id=policy.pk, action="purge",
                         changes={k: [v, 0] for k, v in counts.items()},
                         summary=f"retention purge ({policy.days} days): "
                                 + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items()))
        done[tenant.slug] = erased.conversations
    pending_uploads_purge(older_than=now - timedelta(days=PENDING_UPLOAD_DAYS))
    return done
