"""What happens when a reply ends with a call, without the platform: the widget socket's
filter keeps a call's tokens from the visitor, and the reply sink's hook records and
checks the call (a call cut short by the token budget is settled as a failed call)."""

from __future__ import annotations

import pytest

from tandem.actions import calls, services
from tandem.actions.models import ActionCall
from tandem.actions.stream import CallHider
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant


def tokens(*texts):
    return [{"type": "token", "message": "m", "index": i, "text": t} for i, t in enumerate(texts)]


END = {"type": "end", "message": "m", "finish_reason": "stop", "usage": {}}


def test_a_calls_tokens_never_reach_the_visitor_and_its_end_says_tool_calls():
    hider = CallHider()
    assert hider.frames(tokens("<tool", '_call>{"name": "a", "arguments": {}}', "</tool_call>")) == []
    assert hider.frames([END]) == [{**END, "finish_reason": "tool_calls"}]
    cut = CallHider()
    assert cut.frames(tokens("<tool_call>", '{"name": "a", "argu') + [{**END, "finish_reason": "length"}]) == \
        [{**END, "finish_reason": "tool_calls"}]


def test_text_is_held_only_while_it_may_become_a_call():
    hider = CallHider()
    held, released = hider.frames(tokens("<to")), hider.frames([tokens("", "ast>")[1]])
    assert held == [] and [f["text"] for f in released] == ["<to", "ast>"]
    plain = CallHider()
    assert [f.get("text") for f in plain.frames(tokens("Hello", " there") + [END])] == ["Hello", " there", None]


@pytest.mark.django_db
def test_a_call_cut_short_is_settled_as_failed_and_a_call_with_bad_arguments_is_refused():
    tenant = make_tenant().tenant
    services.action_create(tenant=tenant, by=None, name="order_status", description="Look up an order.",
                           who="anyone", url_template="https://shop.example.com/o/{order_id}",
                           parameters={"type": "object", "properties": {"order_id": {"type": "string"}},
                                       "required": ["order_id"]})
    conv = Conversation.objects.create(tenant=tenant, channel="widget")
    Message.objects.create(conversation=conv, role="user", content="Where is my order?")
    cut = Message.objects.create(conversation=conv, role="assistant", content='<tool_call>{"name": "order_')
    call = calls.reply_ended(request_id=str(cut.pk), text=cut.content)
    assert call.status == ActionCall.Status.FAILED and "cut short" in call.error
    assert Message.objects.get(pk=cut.pk).finish_reason == "tool_calls"
    bad = Message.objects.create(conversation=conv, role="assistant")
    text = '<tool_call>{"name": "order_status", "arguments": {"order": 1}}</tool_call>'
    refused = calls.reply_ended(request_id=str(bad.pk), text=text)
    assert refused.status == ActionCall.Status.REFUSED and "order_id" in refused.error and refused.round == 2
    assert calls.reply_ended(request_id=str(bad.pk), text="Your order ships Friday.") is None
