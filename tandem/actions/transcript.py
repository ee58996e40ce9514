"""A conversation's action calls as the REST API's transcript shows them (GET
/v1/conversations/{id}/messages): what agents read in the inbox, in OpenAI's message
shapes. The reply that was a call carries `tool_calls` (its content stays the call as
written; none for a call cut short) and `action` (the call's status and what the visitor was told); the result's
`tool` message carries `tool_call_id` and `name`."""

from __future__ import annotations

import hashlib

from tandem.api import tool_calls

from .models import TOOL_ROLE, ActionCall


def call_id(message_id) -> str:
    """The call's id as tandem.api.tool_calls.parse_call names a reply's call (one call
    per reply): a `tool` message names it, also after a call cut short."""
    return "call_" + hashlib.sha256(f"{message_id}:0".encode()).hexdigest()[:24]


def rest_fields(messages: list) -> dict[str, dict]:
    """{message id: the fields it adds} for the messages (oldest first) that are calls or
    their results; a result follows its call (one call per reply, continued in turn)."""
    ids = [m.pk for m in messages if m.role == "assistant" and m.content.lstrip().startswith(tool_calls.CALL_OPEN)]
    if not ids:
        return {}
    calls = {c.message_id: c for c in ActionCall.objects.filter(message_id__in=ids)}
    extra: dict[str, dict] = {}
    last_call: ActionCall | None = None
    for m in messages:
        call = calls.get(m.pk)
        if call is not None:
            last_call = call
            parsed = tool_calls.parse_call(m.content, request_id=str(m.pk))  # None: a call cut short
            extra[str(m.pk)] = {
                **({"tool_calls": [parsed]} if parsed else {}),
                "action": {"call": str(call.pk), "name": call.name, "status": call.status,
                           "status_line": call.status_line}}
        elif m.role == TOOL_ROLE and last_call is not None:
            extra[str(m.pk)] = {"tool_call_id": call_id(last_call.message_id), "name": m.author_name or last_call.name}
            last_call = None
    return extra
