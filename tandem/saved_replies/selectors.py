"""Reading saved replies, scoped through tenants.access like every read."""

from __future__ import annotations

from tandem.chat.models import Conversation
from tenants.access import access_list
from tenants.models import Tenant

from .models import SavedReply
from .templating import fill

MATCH_LIMIT = 8


def saved_reply_list(*, tenant: Tenant) -> list[SavedReply]:
    return list(access_list(SavedReply, tenant=tenant).select_related("created_by"))


def saved_reply_matches(*, conversation: Conversation, agent, prefix: str) -> list[dict]:
    """The conversation's tenant's replies whose shortcut starts with `prefix`, filled in
    for this conversation and agent: what the reply box offers after "/"."""
    prefix = (prefix or "").strip().lstrip("/").lower()
    rows = access_list(SavedReply, tenant=conversation.tenant).filter(shortcut__startswith=prefix)[:MATCH_LIMIT]
    return [{"shortcut": r.shortcut, "text": fill(r.text, conversation=conversation, agent=agent)} for r in rows]
