"""A reply that ended with a tool call (the reply sink calls `reply_ended` inside the
reply's finishing transaction, in whichever process finished it: usually a decode
worker), for a widget conversation or a REST request offered the actions (offer.py,
Message.offered_actions).
Nothing runs here: the call is recorded, checked (the action exists and is
enabled, the arguments validate, the visitor may trigger it, rounds remain) and then
either waits for a person (approval) or goes to the CPU tier's `actions` queue, which
runs it, or settles a refusal by telling the model (runner.py).

Imports no chat service (the sink imports this module)."""

from __future__ import annotations

import json
import logging

import jsonschema
from django.db import transaction

from inference.wire.connections import get_redis
from tandem.api import tool_calls
from tandem.chat.models import Conversation, Message
from tandem.handoff import events

from . import conf, lines
from .models import Action, ActionCall
from .queue import call_queue

S = ActionCall.Status
log = logging.getLogger(__name__)


def reply_ended(*, request_id: str, text: str) -> ActionCall | None:
    if not text.lstrip().startswith(tool_calls.CALL_OPEN):
        return None  # the common case: no query at all
    parsed = tool_calls.parse_call(text, request_id=request_id)
    msg = Message.objects.select_related("conversation").filter(pk=request_id).first()
    if msg is None or msg.role != Message.Role.ASSISTANT:
        return None
    conv = msg.conversation
    if not _offered(conv, msg):
        return None
    if parsed is None:  # cut short by the token budget: settled as a failed call, the model told
        name, arguments, action = "(incomplete)", {}, None
        status, line, error = S.FAILED, lines.FAILED, "the call was cut short before it was complete"
    else:
        name = parsed["function"]["name"]
        arguments = json.loads(parsed["function"]["arguments"])
        action = Action.objects.filter(tenant_id=conv.tenant_id, name=name, enabled=True).first()
        status, line, error = _decide(action, arguments, conv, msg)
    rounds_before = ActionCall.objects.filter(conversation=conv, message__seq__gt=last_user_seq(conv, msg)).count()
    if status == S.QUEUED and rounds_before >= conf.max_rounds():
        status, line, error = S.REFUSED, lines.NOT_AVAILABLE, f"at most {conf.max_rounds()} actions per message"
    call = ActionCall.objects.create(
        tenant_id=conv.tenant_id, conversation=conv, message=msg, action=action, name=name[:64],
        arguments=arguments if isinstance(arguments, dict) else {}, round=rounds_before + 1, status=status,
        status_line=line, error=error[:300])
    Message.objects.filter(pk=request_id).update(finish_reason="tool_calls")
    transaction.on_commit(lambda: _announce(call))
    return call


def last_user_seq(conv: Conversation, msg: Message) -> int:
    return (conv.messages.filter(role=Message.Role.USER, seq__lt=msg.seq).order_by("-seq")
            .values_list("seq", flat=True).first() or 0)


def _offered(conv: Conversation, msg: Message) -> bool:
    """A widget reply always may be a call; a REST reply only when its request was offered
    the tenant's actions (Message.offered_actions, set as it was submitted): a
    /v1/chat/completions reply that starts with a call is the client's own tool call,
    and so is one under `"actions": false`."""
    if conv.channel == Conversation.Channel.WIDGET:
        return True
    return msg.offered_actions


def verified_user(conv: Conversation) -> bool:
    """Whether the conversation acts for a user whose identity is vouched for: a widget
    visitor the site proved with the identity hash; and every REST conversation, which
    only the tenant's own server can make and write to (a secret API key), so the
    tenant itself vouches for whom it acts for (its visitor_id is the user)."""
    if conv.channel == Conversation.Channel.API:
        return True
    return bool(conv.user_verified and conv.user_id)


def acting_for(conv: Conversation) -> tuple[str, bool]:
    """(the user id an action call carries, whether it is verified): the signed-in widget
    user, or a REST conversation's visitor_id, which the tenant's server set."""
    if conv.channel == Conversation.Channel.API:
        return conv.visitor_id, bool(conv.visitor_id)
    return conv.user_id, conv.user_verified


def _decide(action: Action | None, arguments, conv: Conversation, msg: Message) -> tuple[str, str, str]:
    """(status, the visitor's line, the reason told to the model)."""
    if action is None:
        return S.REFUSED, lines.NOT_AVAILABLE, "there is no such action"
    # "Verified users only" is allowed in every REST conversation (verified_user).
    if action.who == Action.Who.VERIFIED and not verified_user(conv):
        return S.REFUSED, lines.NEEDS_VERIFIED, "this action is for verified users and the visitor is not signed in"
    try:
        jsonschema.validate(arguments, action.parameters)
    except jsonschema.ValidationError as exc:
        return S.REFUSED, lines.NOT_AVAILABLE, f"the arguments are invalid: {exc.message}"
    if action.needs_approval:
        return S.AWAITING_APPROVAL, lines.CHECKING, ""
    return S.QUEUED, action.line, ""


def _announce(call: ActionCall) -> None:
    """Tell the people in the conversation (the visitor's status line; agents' inboxes
    poll for approvals), then hand the call on."""
    try:
        publish_state(call)
    except Exception:  # Redis away: the widget restores the line from its history on reconnect
        log.exception("could not publish the state of action call %s", call.pk)
    if call.status != S.AWAITING_APPROVAL:
        call_queue(str(call.pk))


def publish_state(call: ActionCall) -> None:
    events.publish(get_redis(), str(call.conversation_id),
                   {"type": "action", "message": str(call.message_id), "call": str(call.pk), "state": call.status,
                    "text": call.status_line, "name": call.name})
