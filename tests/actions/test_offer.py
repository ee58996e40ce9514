"""Whether a request is offered the tenant's actions is its caller's say
(chat_submit's `offer_actions`), recorded on the reply's row (Message.offered_actions):
both REST surfaces share the channel "api", and only a REST conversation message (not
/v1/chat/completions) is offered them, so only there is a reply that starts with a call
an action call. Without the platform: a reply's end is reported through the reply sink
as a worker reports it, on rows of the test's own (a session's platform, when one runs,
would serve the submitted requests itself)."""

from __future__ import annotations

import pytest

from inference.pipeline import api as pipeline
from tandem.actions import services as action_services
from tandem.actions.continuation import continue_after
from tandem.actions.models import ActionCall
from tandem.api.openai_views import submit_choices
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.reply_sink import ReplyRows
from tandem.chat.sampling import sampling_for_openai
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

API = Conversation.Channel.API
CALL = '<tool_call>{"name": "order_status", "arguments": {"order_id": "A-17"}}</tool_call>'


def with_actions(*names: str):
    """A tenant with these actions, each needing an agent's approval: a call is recorded
    and waits, queued to no worker (a session's actions worker would otherwise run it,
    and submit its continuation, beside the test)."""
    created = make_tenant()
    for name in names:
        action_services.action_create(
            tenant=created.tenant, by=None, name=name, description="Look up an order.", who="anyone",
            url_template="https://shop.example.com/o/{order_id}", needs_approval=True,
            parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]})
    return created


def submitted(created, **kwargs) -> bool:
    """Whether a REST conversation message submitted with `kwargs` was offered the actions,
    as its submission says and as its row was stored."""
    conv = services.conversation_create(tenant=created.tenant, channel=API)
    sub = services.chat_submit(api_key=created.secret_key.api_key, messages=[("user", "Where is my order?")],
                               conversation_id=conv.pk, channel=API, **kwargs)
    stored = Message.objects.get(pk=sub.assistant_message.pk).offered_actions
    assert stored == sub.assistant_message.offered_actions
    return stored


def reply_row(created, *, offered: bool) -> Message:
    """A REST conversation's user message and its reply, queued as chat_submit writes them."""
    conv = Conversation.objects.create(tenant=created.tenant, channel=API, visitor_id="customer-42")
    Message.objects.create(conversation=conv, role=Message.Role.USER, content="Where is my order A-17?")
    return Message.objects.create(conversation=conv, role=Message.Role.ASSISTANT, status=Message.Status.QUEUED,
                                  offered_actions=offered)


def finish(reply: Message, text: str) -> Message:
    """The reply ends with `text`, as a decode worker reports it."""
    ReplyRows().reply_finished(request_id=str(reply.pk), outcome=pipeline.ReplyOutcome(
        text=text, finish_reason="stop", prompt_tokens=10, completion_tokens=20, cached_tokens=0, ttft_ms=1.0,
        duration_ms=2.0, prefill_worker="p", decode_worker="d"))
    return Message.objects.get(pk=reply.pk)


def test_only_a_caller_that_says_so_offers_the_actions_and_the_reply_records_it():
    created = with_actions("order_status")
    # As ChatCompletionsView submits: no offer_actions.
    [completion] = submit_choices(n=1, api_key=created.secret_key.api_key, messages=[("user", "Where is my order?")],
                                  channel=API, sampling=sampling_for_openai(quota=created.tenant.quota))
    assert Message.objects.get(pk=completion.assistant_message.pk).offered_actions is False
    assert submitted(created) is False
    assert submitted(created, offer_actions=False) is False  # `"actions": false`
    assert submitted(created, offer_actions=True) is True
    assert submitted(with_actions(), offer_actions=True) is False  # no enabled action: nothing to offer


def test_a_rest_reply_that_starts_with_a_call_is_an_action_call_only_when_it_was_offered_them():
    created = with_actions("order_status")
    # A /v1/chat/completions reply (or one under `"actions": false`): the client's own call.
    clients = finish(reply_row(created, offered=False), CALL)
    assert clients.content == CALL and clients.finish_reason == "stop"
    assert not ActionCall.objects.filter(message=clients).exists()
    offered = finish(reply_row(created, offered=True), CALL)
    assert offered.finish_reason == "tool_calls"
    [call] = ActionCall.objects.filter(tenant=created.tenant)
    assert call.message_id == offered.pk and call.name == "order_status" and call.arguments == {"order_id": "A-17"}


def rest_call(created, status: str, **fields) -> ActionCall:
    reply = finish(reply_row(created, offered=True), CALL)
    call = ActionCall.objects.get(message=reply)
    ActionCall.objects.filter(pk=call.pk).update(status=status, **fields)
    return call


def test_the_reply_after_a_rest_call_is_offered_the_actions_not_yet_called():
    created = with_actions("order_status", "refund_order")
    call = rest_call(created, ActionCall.Status.SUCCEEDED, result='{"state": "shipped"}')
    reply = continue_after(call_id=call.pk)
    assert Message.objects.get(pk=reply.pk).offered_actions
    # Every action called already: nothing left to offer.
    only = with_actions("order_status")
    again = continue_after(call_id=rest_call(only, ActionCall.Status.SUCCEEDED, result="{}").pk)
    assert not Message.objects.get(pk=again.pk).offered_actions


def test_the_reply_after_a_failed_rest_call_is_offered_none():
    created = with_actions("order_status", "refund_order")
    call = rest_call(created, ActionCall.Status.FAILED, error="the endpoint answered 500")
    reply = continue_after(call_id=call.pk)
    assert not Message.objects.get(pk=reply.pk).offered_actions
