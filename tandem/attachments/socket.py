"""The widget socket's `attachment` frame (docs/protocol.md): a reference to a file the
visitor uploaded over HTTP (views.widget_upload), sent into their conversation (a new
one when `conversation` is null), with an optional caption:

    {"type": "attachment", "attachment": "<id>", "conversation": "<id>" | null, "text": "…"}

answered `{"type": "conversation", "id"}` then `{"type": "attachment_sent", "conversation",
"message", "attachments": [{"id", "name", "content_type", "size", "kind", "url"}]}`. An id
that is not this visitor's unsent upload is `attachment_not_found`, exactly like a
missing one. The consumer dispatches here; the work is in services."""

from __future__ import annotations

from channels.db import database_sync_to_async

from tandem.chat.services import NotFound, conversation_get
from tandem.chat.validation import InvalidInput

from . import services
from .selectors import attachment_data


def _send(*, tenant, visitor, attachment_id, conversation_id, text) -> dict:
    conversation = (conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
                    if conversation_id is not None else None)
    msg, attachment = services.visitor_attachment_send(tenant=tenant, visitor=visitor, attachment_id=attachment_id,
                                                       conversation=conversation, text=text)
    return {"type": "attachment_sent", "conversation": str(msg.conversation_id), "message": str(msg.pk),
            "attachments": [attachment_data(attachment)]}


async def on_attachment(consumer, frame: dict) -> None:
    attachment, conversation = frame.get("attachment"), frame.get("conversation")
    if not isinstance(attachment, str):
        await consumer._error("invalid_frame", "attachment must be the id the upload answered.")
        return
    if conversation is not None and not isinstance(conversation, str):
        await consumer._error("invalid_frame", "conversation must be an id or null.")
        return
    if not await consumer._key_still_works():
        return
    since = await consumer.live.mark_before_send(conversation)
    try:
        answer = await database_sync_to_async(_send, thread_sensitive=False)(
            tenant=consumer.api_key.tenant, visitor=consumer.visitor, attachment_id=attachment,
            conversation_id=conversation, text=frame.get("text"))
    except (NotFound, InvalidInput) as exc:
        await consumer._error(exc.code, str(exc), **({"param": exc.param} if getattr(exc, "param", None) else {}))
        return
    await consumer._send({"type": "conversation", "id": answer["conversation"]})
    await consumer._send(answer)
    consumer.live.watch(answer["conversation"], after=since)
