"""The widget's offline form (docs/handoff.md): while a conversation waits for a person
and nobody can take it (no agent online, or out of business hours), the visitor leaves an
e-mail address and a message; an agent answers it from the inbox by e-mail."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from tandem.chat.models import Conversation, OfflineMessage
from tandem.chat.validation import InvalidInput, clean_user_text

from .assignment import display_name

OFFLINE_PER_CONVERSATION = 5  # a form, not a mailbox: enough to correct an address


def offline_message_leave(*, conversation: Conversation, email: str, text: str) -> OfflineMessage:
    """The widget's offline form (the visitor's own conversation, which waits for a person
    while no agent is online): kept for the inbox, and the address kept on the
    conversation when it had none. Raises InvalidInput."""
    email = (email if isinstance(email, str) else "").strip()
    try:
        if len(email) > OfflineMessage._meta.get_field("email").max_length:
            raise ValidationError("too long")
        validate_email(email)
    except ValidationError:
        raise InvalidInput("Enter a valid e-mail address.", param="email", code="invalid_email") from None
    text = clean_user_text(text)
    if not conversation.with_person:
        raise InvalidInput("This conversation is not waiting for a person.", param="conversation",
                           code="not_with_person")
    if conversation.offline_messages.count() >= OFFLINE_PER_CONVERSATION:
        raise InvalidInput("This conversation has enough offline messages.", code="too_many_offline_messages")
    with transaction.atomic():
        msg = OfflineMessage.objects.create(tenant_id=conversation.tenant_id, conversation=conversation,
                                            email=email, text=text)
        Conversation.objects.filter(pk=conversation.pk, user_email="").update(user_email=email)
    return msg


class AlreadyAnswered(Exception):
    code = "already_answered"

    def __init__(self, offline: OfflineMessage):
        by = display_name(offline.answered_by) if offline.answered_by else "Someone"
        super().__init__(f"{by} already answered this message.")


def offline_message_answer(*, offline: OfflineMessage, agent, text: str) -> OfflineMessage:
    """Answer an offline message by e-mail to the address the visitor left. Marked
    answered first, by one conditional UPDATE, so two agents answering at once send one
    e-mail; a send that fails leaves it unanswered again. Raises InvalidInput,
    AlreadyAnswered, or the mail backend's error."""
    text = clean_user_text(text)
    now = timezone.now()
    if not OfflineMessage.objects.filter(pk=offline.pk, answered_at__isnull=True).update(
            answered_at=now, answered_by=agent, answer=text):
        offline.refresh_from_db()
        raise AlreadyAnswered(offline)
    tenant = offline.tenant
    try:
        send_mail(subject=f"Re: your message to {tenant.name}", message=f"{text}\n\n> " +
                  "\n> ".join(offline.text.splitlines()), from_email=None, recipient_list=[offline.email])
    except Exception:
        OfflineMessage.objects.filter(pk=offline.pk, answered_at=now).update(answered_at=None, answered_by=None,
                                                                             answer="")
        raise
    offline.refresh_from_db()
    return offline
