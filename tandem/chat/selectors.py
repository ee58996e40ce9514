"""Reads of chat data for the surfaces. Access goes through `services.conversation_get`
(tenant and visitor), so a conversation that is not the caller's is not found."""

from __future__ import annotations

from knowledge.selectors import citations_for
from tandem.actions import selectors as action_selectors
from tandem.attachments.selectors import attachments_by_message
from tenants.models import Tenant

from . import services
from .models import Message
from .visitors import Visitor

TRANSCRIPT_LIMIT = 200


def conversation_transcript(*, tenant: Tenant, conversation_id, visitor: Visitor | None = None,
                            limit: int = TRANSCRIPT_LIMIT) -> dict:
    """The conversation as the widget restores it after a reload: its last `limit` user
    and assistant messages, oldest first. A reply still being written has status
    queued/prefilling/decoding and no text yet: the client resumes its stream. A failed
    reply carries its error code, never the worker's detail. Raises services.NotFound."""
    conversation = services.conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
    rows = list(
        # An agent's replies too (with their `author`); internal notes never.
        conversation.messages.filter(role__in=[Message.Role.USER, Message.Role.ASSISTANT, Message.Role.AGENT])
        # In the order they were written (Message.seq), never by created_at, which ties.
        .order_by("-seq")
        .values("id", "role", "content", "status", "finish_reason", "error", "author_name")[:limit]
    )
    rows.reverse()
    # A reply that called an action: the visitor reads its status line, never the call.
    calls = action_selectors.visitor_lines(message_ids=[r["id"] for r in rows if r["finish_reason"] == "tool_calls"])
    for r in rows:
        if str(r["id"]) in calls:
            r.update(role="action", content=calls[str(r["id"])])
    files = attachments_by_message(r["id"] for r in rows)
    cited = citations_for(tenant=tenant, message_ids=[r["id"] for r in rows if r["role"] == Message.Role.ASSISTANT])
    return {
        "id": str(conversation.pk),
        "handoff": conversation.handoff,  # who answers: bot, pending_human, human, resolved
        "messages": [
            {"id": str(r["id"]), "role": r["role"], "text": r["content"], "status": r["status"],
             "finish_reason": r["finish_reason"] or None,
             **({"error": r["error"].split(":", 1)[0]} if r["status"] == Message.Status.FAILED else {}),
             **({"author": r["author_name"]} if r["role"] == Message.Role.AGENT else {}),
             **({"sources": cited[str(r["id"])]} if str(r["id"]) in cited else {}),
             **({"attachments": files[str(r["id"])]} if str(r["id"]) in files else {})}
            for r in rows
        ],
    }
