"""Attachments' writes: an upload checked against the tenant's limits and stored, a
visitor's upload sent into their conversation, an agent's file sent to the visitor, the
tenant's limits changed (audited), and files erased with their rows.

An upload's kind comes from its bytes (`kinds.sniff`), and its size from what was read,
not from what the client said. A message that carries files is a Message row like any
other (role user or agent, the caption as content) with its attachments linked to it;
it is published to the conversation's live events with the files' data and a signed
link each, so the widget and the agents' pages show it as it happens. The assistant
reads no files: a file sent while it answers is kept for the tenant's agents."""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
import uuid

from django.db import transaction
from django.utils import timezone

from inference.wire.connections import get_redis
from tandem.chat.models import Conversation, Message
from tandem.chat.validation import InvalidInput
from tandem.handoff import events
from tandem.handoff.assignment import display_name
from tandem.handoff.states import NotYours, message_event
from tandem.webhooks import chat_events as webhook_events
from tenants import audit
from tenants.access import NotFound

from . import kinds
from .models import Attachment, AttachmentPolicy
from .selectors import attachment_data, policy_of
from .storage import attachment_storage, stored_name

log = logging.getLogger(__name__)
MAX_CAPTION = 2000
PENDING_PER_VISITOR = 10  # uploads a visitor holds unsent at once
PLATFORM_MAX_BYTES = 100 * 1024 * 1024  # no tenant's limit goes above this
HEAD_BYTES = 64


class AttachmentRefused(Exception):
    """The file is not taken: `code` says why (file_too_large: 413; the rest: 400)."""

    def __init__(self, message: str, *, code: str):
        super().__init__(message)
        self.code = code
        self.status = 413 if code == "file_too_large" else 400


def clean_name(name: str) -> str:
    """The sender's file name, safe to show and to put in Content-Disposition: its last
    path part, no control characters, at most 200 characters, never empty."""
    name = unicodedata.normalize("NFC", str(name or "")).replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[\x00-\x1f\x7f\"]", "", name).strip().lstrip(".")
    if len(name) > 200:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: 190] + dot + ext[:9]) if dot and len(ext) < 10 else name[:200]
    return name or "file"


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB".replace(".0 MB", " MB")


def attachment_upload(*, tenant, upload, sender: str, owner: str = "", uploaded_by=None,
                      conversation: Conversation | None = None) -> Attachment:
    """Store `upload` (a Django UploadedFile) for the tenant if its limits allow it, or
    raise AttachmentRefused."""
    policy = policy_of(tenant=tenant)
    if not policy.enabled:
        raise AttachmentRefused("This team does not take files in the chat.", code="attachments_disabled")
    if upload is None:
        raise AttachmentRefused("Send the file in the form field `file`.", code="missing_file")
    if upload.size > policy.max_bytes:
        raise AttachmentRefused(f"The file is {_mb(upload.size)}; the limit is {_mb(policy.max_bytes)}.",
                                code="file_too_large")
    if upload.size == 0:
        raise AttachmentRefused("The file is empty.", code="empty_file")
    if owner and Attachment.objects.filter(tenant=tenant, owner=owner, message__isnull=True).count() \
            >= PENDING_PER_VISITOR:
        raise AttachmentRefused("Too many files uploaded and not sent yet.", code="too_many_uploads")
    name = clean_name(upload.name)
    upload.seek(0)
    head = upload.read(HEAD_BYTES)
    upload.seek(0)
    whole = upload.read() if kinds.TEXT in policy.kinds and "." in name else None
    sniffed = kinds.sniff(head, name=name, whole=whole)
    if sniffed is None or sniffed.kind not in policy.kinds:
        allowed = ", ".join(kinds.KINDS[k].split(" (")[0].lower() for k in policy.kinds if k in kinds.KINDS)
        raise AttachmentRefused(f"This type of file is not accepted here; allowed: {allowed or 'none'}.",
                                code="file_type_not_allowed")
    digest, size = hashlib.sha256(), 0
    upload.seek(0)
    for chunk in upload.chunks():
        digest.update(chunk)
        size += len(chunk)
    upload.seek(0)
    storage = attachment_storage()
    path = storage.save(stored_name(tenant.pk), upload)
    try:
        return Attachment.objects.create(
            tenant=tenant, conversation=conversation, sender=sender, owner=owner, uploaded_by=uploaded_by,
            path=path, name=name, content_type=sniffed.content_type, size=size, sha256=digest.hexdigest())
    except Exception:
        storage.delete(path)
        raise


def _caption(text) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise InvalidInput("text must be a string.", param="text", code="invalid_message")
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text).strip()
    if len(text) > MAX_CAPTION:
        raise InvalidInput(f"A file's caption is at most {MAX_CAPTION} characters.", param="text",
                           code="message_too_long")
    return text


def _publish(conversation: Conversation, msg: Message, files: list[Attachment]) -> None:
    event = {**message_event(msg), "attachments": [attachment_data(a) for a in files]}
    cid = str(conversation.pk)
    transaction.on_commit(lambda: events.publish(get_redis(), cid, event))


def visitor_attachment_send(*, tenant, visitor, attachment_id, conversation: Conversation | None,
                            text=None) -> tuple[Message, Attachment]:
    """The visitor's upload into their conversation (a new one when None), as a message of
    theirs with `text` as its caption. Raises NotFound("attachment") for an id that is
    not this visitor's unsent upload, InvalidInput for a bad caption."""
    caption = _caption(text)
    try:
        pk = uuid.UUID(str(attachment_id))
    except (TypeError, ValueError, AttributeError):
        raise NotFound("attachment") from None
    with transaction.atomic():
        attachment = (Attachment.objects.select_for_update()
                      .filter(tenant=tenant, pk=pk, owner=visitor.subject, message__isnull=True).first())
        if attachment is None:
            raise NotFound("attachment")
        created = conversation is None
        if created:
            conversation = Conversation.objects.create(tenant=tenant, channel=Conversation.Channel.WIDGET,
                                                       **visitor.conversation_fields())
        msg = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=caption)
        attachment.conversation, attachment.message = conversation, msg
        attachment.save(update_fields=["conversation", "message"])
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
        _publish(conversation, msg, [attachment])
        if created:
            webhook_events.conversation_created(conversation)
        webhook_events.message_created(msg, tenant_id=tenant.pk)
    return msg, attachment


def agent_attachment_send(*, conversation: Conversation, agent, upload, text=None) -> tuple[Message, Attachment]:
    """An agent's file to the visitor, on a conversation the agent owns (else NotYours);
    AttachmentRefused when the tenant's limits refuse the file."""
    caption = _caption(text)
    if not (conversation.handoff == Conversation.Handoff.HUMAN and conversation.assignee_id == agent.pk):
        raise NotYours()
    attachment = attachment_upload(tenant=conversation.tenant, upload=upload, sender=Attachment.Sender.AGENT,
                                   uploaded_by=agent, conversation=conversation)
    try:
        with transaction.atomic():
            msg = Message.objects.create(conversation=conversation, role=Message.Role.AGENT, content=caption,
                                         author=agent, author_name=display_name(agent))
            attachment.message = msg
            attachment.save(update_fields=["message"])
            now = timezone.now()
            Conversation.objects.filter(pk=conversation.pk).update(updated_at=now)
            Conversation.objects.filter(pk=conversation.pk, first_human_reply_at__isnull=True).update(
                first_human_reply_at=now)
            _publish(conversation, msg, [attachment])
            webhook_events.message_created(msg, tenant_id=conversation.tenant_id)
    except Exception:
        attachments_erase(Attachment.objects.filter(pk=attachment.pk))
        raise
    return msg, attachment


def attachments_erase(queryset) -> int:
    """Delete these attachments' rows, and their files once that commits (a deletion
    rolled back keeps its files); how many. A file already gone from the storage is no
    error (a purge that ran twice)."""
    rows = list(queryset.values_list("pk", "path"))
    Attachment.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
    paths = [path for _, path in rows]
    if paths:
        transaction.on_commit(lambda: _files_delete(paths))
    return len(rows)


def _files_delete(paths: list[str]) -> None:
    storage = attachment_storage()
    for path in paths:
        try:
            storage.delete(path)
        except Exception:  # the row is gone; the file is logged for the operator
            log.exception("deleting attachment file %s failed", path)


def pending_uploads_purge(*, older_than) -> int:
    """Uploads never sent into a conversation, older than `older_than` (a datetime)."""
    return attachments_erase(Attachment.objects.filter(message__isnull=True, created_at__lt=older_than))


class PolicyInvalid(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


POLICY_FIELDS = ("enabled", "kinds", "max_bytes")


def policy_update(*, tenant, actor: audit.Actor, enabled: bool, kinds_allowed: list[str],
                  max_bytes: int) -> AttachmentPolicy:
    """The tenant's limits, validated and audited (PolicyInvalid names the bad field)."""
    unknown = [k for k in kinds_allowed if k not in kinds.KINDS]
    if unknown:
        raise PolicyInvalid("kinds", f"Unknown kinds: {', '.join(unknown)}; choose among {', '.join(kinds.KINDS)}.")
    if not isinstance(max_bytes, int) or not 1 <= max_bytes <= PLATFORM_MAX_BYTES:
        raise PolicyInvalid("max_bytes", f"The size limit must be between 1 byte and {_mb(PLATFORM_MAX_BYTES)}.")
    policy = policy_of(tenant=tenant)
    before = audit.snapshot(policy, POLICY_FIELDS) if policy.pk else {}
    policy.enabled, policy.kinds, policy.max_bytes = bool(enabled), [k for k in kinds.KINDS if k in kinds_allowed], max_bytes
    with transaction.atomic():
        policy.save()
        audit.record_change(actor=actor, tenant=tenant, entity="attachments", instance=policy, before=before,
                            fields=POLICY_FIELDS, summary="attachment limits changed")
    return policy
