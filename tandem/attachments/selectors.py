"""Reads of attachments as the surfaces show them: each with a fresh signed link
(`links`), for readers already checked to be the conversation's participants."""

from __future__ import annotations

from collections import defaultdict

from . import kinds
from .links import attachment_url
from .models import Attachment, AttachmentPolicy


def attachment_data(attachment: Attachment, *, url: bool = True) -> dict:
    """An attachment as frames, transcripts and the REST export show it. `kind` is
    "image" for the types shown inline, else "file"."""
    data = {"id": str(attachment.pk), "name": attachment.name, "content_type": attachment.content_type,
            "size": attachment.size, "kind": "image" if attachment.content_type in kinds.INLINE_TYPES else "file"}
    if url:
        data["url"] = attachment_url(attachment.pk)
    return data


def attachments_by_message(message_ids) -> dict[str, list[dict]]:
    """{message id: [its attachments' data]} for the messages that have any."""
    found: dict[str, list[dict]] = defaultdict(list)
    ids = [str(i) for i in message_ids]
    if not ids:
        return {}
    for a in Attachment.objects.filter(message_id__in=ids).order_by("created_at"):
        found[str(a.message_id)].append(attachment_data(a))
    return dict(found)


def policy_of(*, tenant) -> AttachmentPolicy:
    """The tenant's limits (an unsaved row with the defaults when it set none)."""
    return AttachmentPolicy.objects.filter(tenant=tenant).first() or AttachmentPolicy(tenant=tenant)


def policy_data(policy: AttachmentPolicy) -> dict:
    """What the widget needs to know before it offers a file (its config)."""
    return {"enabled": policy.enabled, "kinds": list(policy.kinds), "max_bytes": policy.max_bytes,
            "accept": accept_list(policy)}


def accept_list(policy: AttachmentPolicy) -> str:
    """An <input type=file accept=…> value for the allowed kinds."""
    parts = {kinds.IMAGE: "image/png,image/jpeg,image/gif,image/webp", kinds.PDF: "application/pdf,.pdf",
             kinds.TEXT: ".txt,.csv,.log,.md,text/plain,text/csv"}
    return ",".join(parts[k] for k in policy.kinds if k in parts)
