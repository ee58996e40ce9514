"""One contact's data as JSON: who they said they were, each conversation with its
messages (internal notes included: they are about the person; the assistant's unsent
drafts not), ratings, CSAT, offline-form messages and attachments, each attachment with
its bytes in base64 and their SHA-256. The shape is docs/privacy.md's."""

from __future__ import annotations

import base64

from django.utils import timezone

from tandem.attachments.models import Attachment
from tandem.attachments.storage import attachment_storage
from tandem.chat.models import Message, OfflineMessage
from tandem.feedback.models import Csat, Feedback

from .identity import Contact

FORMAT = "tandem.contact_export.v1"


def _at(value) -> str | None:
    return value.isoformat() if value else None


def _file(a: Attachment) -> dict:
    with attachment_storage().open(a.path, "rb") as f:
        data = f.read()
    return {"id": str(a.pk), "name": a.name, "content_type": a.content_type, "size": a.size, "sha256": a.sha256,
            "sent_by": a.sender, "created_at": _at(a.created_at), "data_base64": base64.b64encode(data).decode()}


def contact_export(*, tenant, contact: Contact, conversations) -> dict:
    convs = list(conversations.order_by("created_at"))
    ids = [c.pk for c in convs]
    messages: dict = {}
    for m in Message.objects.filter(conversation_id__in=ids).exclude(role=Message.Role.DRAFT).order_by("seq"):
        messages.setdefault(m.conversation_id, []).append(m)
    files: dict = {}
    for a in Attachment.objects.filter(conversation_id__in=ids, message__isnull=False):
        files.setdefault(a.message_id, []).append(_file(a))
    feedback: dict = {}
    for f in Feedback.objects.filter(conversation_id__in=ids).order_by("created_at"):
        feedback.setdefault(f.conversation_id, []).append(
            {"message": str(f.message_id), "rating": f.rating, "comment": f.comment, "created_at": _at(f.created_at)})
    csat = {c.conversation_id: {"score": c.score, "comment": c.comment, "created_at": _at(c.created_at)}
            for c in Csat.objects.filter(conversation_id__in=ids)}
    offline: dict = {}
    for o in OfflineMessage.objects.filter(conversation_id__in=ids).order_by("created_at"):
        offline.setdefault(o.conversation_id, []).append(
            {"email": o.email, "text": o.text, "created_at": _at(o.created_at), "answer": o.answer or None,
             "answered_at": _at(o.answered_at)})
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "tenant": tenant.slug,
        "contact": {
            "id": contact.id, "kind": contact.kind,
            "names": sorted({c.user_name for c in convs if c.user_name}),
            "emails": sorted({c.user_email for c in convs if c.user_email}),
            "user_ids": sorted({c.user_id for c in convs if c.user_id}),
            "visitor_ids": sorted({c.visitor_id for c in convs if c.visitor_id}),
        },
        "conversations": [{
            "id": str(c.pk), "channel": c.channel, "created_at": _at(c.created_at), "updated_at": _at(c.updated_at),
            "handoff": c.handoff, "user_name": c.user_name or None, "user_email": c.user_email or None,
            "messages": [{
                "id": str(m.pk), "role": m.role, "text": m.content, "author": m.author_name or None,
                "status": m.status, "created_at": _at(m.created_at), "attachments": files.get(m.pk, []),
            } for m in messages.get(c.pk, [])],
            "feedback": feedback.get(c.pk, []),
            "csat": csat.get(c.pk),
            "offline_messages": offline.get(c.pk, []),
        } for c in convs],
    }
