"""Reads of feedback for the surfaces, tenant-scoped through the chat services."""

from __future__ import annotations

from tandem.chat import services as chat
from tandem.chat.visitors import Visitor
from tenants.models import Tenant

from .models import Csat


def csat_get(*, tenant: Tenant, conversation_id, visitor: Visitor | None = None) -> Csat | None:
    """The conversation's score, or None while it has none. Raises chat.NotFound."""
    conversation = chat.conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
    return Csat.objects.filter(conversation=conversation).first()


def csat_state(*, conversation_id) -> str:
    """"given" or "open", for a widget restoring a conversation it was checked to own."""
    return "given" if Csat.objects.filter(conversation_id=conversation_id).exists() else "open"
