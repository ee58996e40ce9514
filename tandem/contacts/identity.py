"""Who a contact is. The id is the subject that owns the conversations, as the
per-visitor limits and ratings name it (tandem.chat.visitors.Visitor.subject):
"user:<the site's user id>" for a verified user, "visitor:<widget visitor id>" for an
anonymous visitor. A user's contact holds every conversation that names that user id
(verified or only claimed: the claimed ones still carry what was said about them); a
visitor's, every conversation of that browser's visitor id."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from tandem.chat.models import Conversation
from tenants.access import NotFound, access_list

KINDS = ("user", "visitor")
MAX_ID = 128


@dataclass(frozen=True)
class Contact:
    kind: str  # user | visitor
    key: str  # the user id or the visitor id

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"

    def digest(self, tenant_id: int) -> str:
        """A stand-in for the id in the audit log, which outlives the contact: the same
        contact always gives the same text, and it cannot be read back to the id."""
        mac = hmac.new(settings.SECRET_KEY.encode(), f"{tenant_id}:{self.id}".encode(), hashlib.sha256)
        return "contact-" + mac.hexdigest()[:24]


def contact_parse(contact_id) -> Contact:
    """A contact from its id; NotFound("contact") for anything that is not one."""
    if not isinstance(contact_id, str):
        raise NotFound("contact")
    kind, sep, key = contact_id.partition(":")
    if not sep or kind not in KINDS or not key or len(key) > MAX_ID:
        raise NotFound("contact")
    return Contact(kind, key)


def contact_of(conversation: Conversation) -> Contact | None:
    """The contact a conversation belongs to (None: a REST conversation of nobody)."""
    if conversation.user_id and conversation.user_verified:
        return Contact("user", conversation.user_id)
    if conversation.visitor_id:
        return Contact("visitor", conversation.visitor_id)
    if conversation.user_id:
        return Contact("user", conversation.user_id)
    return None


def contact_conversations(*, tenant, contact: Contact) -> QuerySet:
    field = "user_id" if contact.kind == "user" else "visitor_id"
    return access_list(Conversation, tenant=tenant).filter(**{field: contact.key})


def contact_get(*, tenant, contact_id) -> tuple[Contact, QuerySet]:
    """The contact and their conversations in this tenant; NotFound("contact") when they
    have none here (another tenant's contact is missing too)."""
    contact = contact_parse(contact_id)
    conversations = contact_conversations(tenant=tenant, contact=contact)
    if not conversations.exists():
        raise NotFound("contact")
    return contact, conversations
