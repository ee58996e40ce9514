"""Ratings of replies and CSAT of conversations, for every surface (the widget socket,
REST). Lookups go through the chat services (`tenants.access` and, for a widget socket,
the visitor's binding), so another visitor's or tenant's reply is "not found", as one
that does not exist. Bad input raises `InvalidInput` with a code and the field."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from tandem.chat import services as chat
from tandem.chat.models import Conversation, Message
from tandem.chat.validation import InvalidInput
from tandem.chat.visitors import Visitor
from tandem.webhooks import chat_events as webhook_events
from tenants.models import Tenant

from .models import Csat, Feedback

MAX_COMMENT = 2000


class CsatAlreadyGiven(InvalidInput):
    """A conversation is scored once: the first score stands."""

    def __init__(self):
        super().__init__("This conversation has been rated already.", code="csat_already_given")


def conversation_rater(conversation: Conversation) -> str:
    """Who rates on the conversation's behalf: its owner, as the per-visitor limits name
    them (a widget visitor, a verified user), or "api" for a REST conversation."""
    if conversation.user_verified and conversation.user_id:
        return f"user:{conversation.user_id}"
    if conversation.visitor_id:
        return f"visitor:{conversation.visitor_id}"
    return "api"


def _comment(comment: object) -> str:
    if comment is None:
        return ""
    if not isinstance(comment, str):
        raise InvalidInput("comment must be a string.", code="invalid_comment", param="comment")
    comment = comment.strip()
    if len(comment) > MAX_COMMENT:
        raise InvalidInput(f"comment must be at most {MAX_COMMENT} characters.", code="invalid_comment",
                           param="comment")
    return comment


def feedback_give(*, tenant: Tenant, message_id, rating: object, comment: object = None,
                  visitor: Visitor | None = None) -> Feedback:
    """The conversation owner's 👍 or 👎 of one finished assistant reply; a second rating
    by the same rater replaces the first. Raises chat.NotFound, InvalidInput."""
    if rating not in Feedback.Rating.values:
        raise InvalidInput('rating must be "up" or "down".', code="invalid_rating", param="rating")
    text = _comment(comment)
    msg = chat.message_get(tenant=tenant, message_id=message_id, visitor=visitor)
    if msg.role != Message.Role.ASSISTANT or msg.status != Message.Status.DONE:
        raise InvalidInput("Only the assistant's finished replies can be rated.", code="not_rateable",
                           param="message")
    conversation = msg.conversation
    with transaction.atomic():
        row, _ = Feedback.objects.update_or_create(
            message=msg, rater=conversation_rater(conversation),
            defaults={"tenant": tenant, "conversation": conversation, "rating": rating, "comment": text})
        webhook_events.feedback_created(row)
    return row


def _score(score: object) -> int:
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise InvalidInput("score must be a whole number from 1 to 5.", code="invalid_score", param="score")
    return score


def csat_give(*, tenant: Tenant, conversation_id, score: object, comment: object = None,
              visitor: Visitor | None = None) -> Csat:
    """The conversation's satisfaction score, 1-5, given once (CsatAlreadyGiven after).
    Only a conversation someone answered can be scored. Raises chat.NotFound, InvalidInput."""
    value, text = _score(score), _comment(comment)
    conversation = chat.conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
    answers = conversation.messages.filter(role__in=[Message.Role.ASSISTANT, Message.Role.AGENT],
                                           status=Message.Status.DONE)
    if not answers.exists():
        raise InvalidInput("Nobody has answered this conversation yet.", code="not_rateable",
                           param="conversation")
    human = conversation.first_human_reply_at is not None or answers.filter(role=Message.Role.AGENT).exists()
    try:
        with transaction.atomic():
            row = Csat.objects.create(
                tenant=tenant, conversation=conversation, score=value, comment=text,
                answered_by=Csat.AnsweredBy.HUMAN if human else Csat.AnsweredBy.AI,
                rater=conversation_rater(conversation))
            webhook_events.csat_created(row)
            return row
    except IntegrityError:
        raise CsatAlreadyGiven() from None
