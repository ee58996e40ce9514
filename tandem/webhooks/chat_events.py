"""The chat's events, in the words receivers get (docs/webhooks.md): one function per
hook in tandem.chat (services, reply_sink), tandem.handoff (states, assignment) and
tandem.feedback, each called in the transaction that made the change. Internal notes
never become events."""

from __future__ import annotations

from .events import event_emit

# The evaluation harness's and the console's trial conversations (tandem.evals.ask): tests
# of the assistant, not the tenant's customers, so their replies are no events.
EVAL_VISITOR = "eval:"


def _agent(user) -> dict | None:
    if user is None:
        return None
    name = (user.get_full_name() or user.get_username()) if hasattr(user, "get_full_name") else str(user)
    return {"id": user.pk, "name": name}


def conversation_created(conversation) -> None:
    event_emit(tenant_id=conversation.tenant_id, type="conversation.created", data={"conversation": {
        "id": str(conversation.pk), "channel": conversation.channel, "visitor_id": conversation.visitor_id or None,
        "created": int(conversation.created_at.timestamp()) if conversation.created_at else None}})


def message_created(message, *, tenant_id: int) -> None:
    if message.role not in ("user", "assistant", "agent"):  # notes and system rows stay inside
        return
    event_emit(tenant_id=tenant_id, type="message.created", data={"message": {
        "id": str(message.pk), "conversation": str(message.conversation_id),
        "role": "visitor" if message.role == "user" else message.role, "content": message.content,
        "author": message.author_name or None, "status": message.status,
        "finish_reason": message.finish_reason or None,
        "created": int(message.created_at.timestamp()) if message.created_at else None}})


def handoff_changed(*, tenant_id: int, conversation_id, state: str, reason: str = "", agent=None) -> None:
    event_emit(tenant_id=tenant_id, type="conversation.handoff", data={
        "conversation": str(conversation_id), "state": state, "reason": reason or None, "agent": _agent(agent)})


def reply_ended(*, request_id: str) -> None:
    """The assistant's reply finished (done or cancelled): its message, as stored."""
    from tandem.chat.models import Message

    message = Message.objects.select_related("conversation").filter(pk=request_id).first()
    if message is not None and not message.conversation.visitor_id.startswith(EVAL_VISITOR):
        message_created(message, tenant_id=message.conversation.tenant_id)


def reply_failed(*, request_id: str, code: str) -> None:
    from tandem.chat.models import Message

    row = (Message.objects.filter(pk=request_id).exclude(conversation__visitor_id__startswith=EVAL_VISITOR)
           .values_list("conversation_id", "conversation__tenant_id").first())
    if row is not None:
        event_emit(tenant_id=row[1], type="reply.failed", data={
            "message": str(request_id), "conversation": str(row[0]), "code": code})


def _when(at) -> int | None:
    return int(at.timestamp()) if at else None


def feedback_created(feedback) -> None:
    """A rating of a reply (a second rating of the same reply by the same rater replaces
    the first, and is sent again)."""
    event_emit(tenant_id=feedback.tenant_id, type="feedback.created", data={"feedback": {
        "message": str(feedback.message_id), "conversation": str(feedback.conversation_id),
        "rating": feedback.rating, "comment": feedback.comment or None,
        "created": _when(feedback.updated_at)}})


def csat_created(csat) -> None:
    event_emit(tenant_id=csat.tenant_id, type="csat.created", data={"csat": {
        "conversation": str(csat.conversation_id), "score": csat.score, "comment": csat.comment or None,
        "answered_by": csat.answered_by, "created": _when(csat.created_at)}})
