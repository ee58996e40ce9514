"""The widget socket's feedback frames (docs/protocol.md): `feedback` (👍/👎 of a reply)
answered `feedback_received`, and `csat` (1-5 for the conversation) answered
`csat_received`. The consumer dispatches to these; the work is in the services."""

from __future__ import annotations

from channels.db import database_sync_to_async

from tandem.chat.services import NotFound
from tandem.chat.validation import InvalidInput

from . import services


def _in_db(fn):
    return database_sync_to_async(fn, thread_sensitive=False)


async def on_feedback(consumer, frame: dict) -> None:
    """`{"type": "feedback", "message": id, "rating": "up"|"down", "comment"?}`."""
    message = frame.get("message")
    if not isinstance(message, str):
        await consumer._error("invalid_frame", "message must be the id of a reply.")
        return
    if not await consumer._key_still_works():
        return
    try:
        await _in_db(services.feedback_give)(tenant=consumer.api_key.tenant, message_id=message,
                                             rating=frame.get("rating"), comment=frame.get("comment"),
                                             visitor=consumer.visitor)
    except (NotFound, InvalidInput) as exc:
        await consumer._error(exc.code, str(exc), **({"param": exc.param} if getattr(exc, "param", None) else {}))
        return
    await consumer._send({"type": "feedback_received", "message": message})


async def on_csat(consumer, frame: dict) -> None:
    """`{"type": "csat", "conversation": id, "score": 1-5, "comment"?}`."""
    conversation = frame.get("conversation")
    if not isinstance(conversation, str):
        await consumer._error("invalid_frame", "conversation must be an id.")
        return
    if not await consumer._key_still_works():
        return
    try:
        await _in_db(services.csat_give)(tenant=consumer.api_key.tenant, conversation_id=conversation,
                                         score=frame.get("score"), comment=frame.get("comment"),
                                         visitor=consumer.visitor)
    except (NotFound, InvalidInput) as exc:
        await consumer._error(exc.code, str(exc), **({"param": exc.param} if getattr(exc, "param", None) else {}))
        return
    await consumer._send({"type": "csat_received", "conversation": conversation})
