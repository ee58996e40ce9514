"""Which events the chat's own services emit, in-process (the rows an event and its
deliveries are; delivering them is test_delivery's): a conversation and a visitor's
message, a hand-off's every state with its agent, an agent's reply but never an internal
note, an assistant reply that ended, a reply that failed with its code; and nothing for
a tenant without endpoints or for a type an endpoint did not ask for."""

from __future__ import annotations

import json

import pytest

from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tandem.chat.reply_sink import ReplyRows
from tandem.handoff import states as handoff
from tandem.webhooks import services as webhooks
from tandem.webhooks.models import EVENT_TYPES, Event
from tests.factories import UserFactory, make_tenant

pytestmark = pytest.mark.django_db


def subscribed(events=EVENT_TYPES):
    t = make_tenant()
    webhooks.endpoint_create(tenant=t.tenant, url="https://hooks.example.com/", events=list(events))
    return t.tenant


def emitted(tenant) -> list[dict]:
    return [json.loads(e.body) for e in Event.objects.filter(tenant=tenant).order_by("created_at", "id")]


def test_a_new_conversation_emits_conversation_created_with_the_tenant_and_an_event_id():
    tenant = subscribed()
    conversation = services.conversation_create(tenant=tenant, channel=Conversation.Channel.API)
    [event] = emitted(tenant)
    assert event["type"] == "conversation.created" and event["tenant"] == tenant.slug
    assert event["id"].startswith("evt_") and event["data"]["conversation"]["id"] == str(conversation.pk)
    assert Event.objects.get(pk=event["id"]).deliveries.count() == 1


def test_each_handoff_state_is_an_event_with_the_agent_and_agent_replies_are_messages_but_notes_are_not():
    tenant = subscribed()
    agent = UserFactory(first_name="Ada", last_name="Agent")
    conversation = handoff.visitor_asks_for_person(conversation=None, create={"tenant": tenant})
    handoff.conversation_claim(conversation=conversation, agent=agent)
    handoff.agent_message(conversation=conversation, agent=agent, text="Hello, Ada here.")
    handoff.agent_message(conversation=conversation, agent=agent, text="VIP customer", note=True)
    handoff.conversation_resolve(conversation=conversation)
    events = emitted(tenant)
    assert [e["type"] for e in events] == ["conversation.created", "conversation.handoff", "conversation.handoff",
                                           "message.created", "conversation.handoff"]
    states = [(e["data"]["state"], e["data"]["agent"]) for e in events if e["type"] == "conversation.handoff"]
    assert states == [("pending_human", None), ("human", {"id": agent.pk, "name": "Ada Agent"}),
                      ("resolved", {"id": agent.pk, "name": "Ada Agent"})]
    [reply] = [e["data"]["message"] for e in events if e["type"] == "message.created"]
    assert reply["role"] == "agent" and reply["content"] == "Hello, Ada here."
    assert "VIP customer" not in json.dumps(events)


def test_a_visitors_message_held_for_a_person_is_a_message_created_event():
    tenant = subscribed(["message.created"])
    conversation = handoff.visitor_asks_for_person(conversation=None, create={"tenant": tenant})
    with pytest.raises(handoff.HeldForPerson):
        handoff.hold_if_with_person(conversation=conversation, text="Are you there?")
    [event] = emitted(tenant)
    assert event["data"]["message"]["role"] == "visitor" and event["data"]["message"]["content"] == "Are you there?"


def test_an_assistant_reply_is_an_event_when_it_ends_and_a_failed_one_is_reply_failed_with_its_code():
    tenant = subscribed(["message.created", "reply.failed"])
    conversation = Conversation.objects.create(tenant=tenant, channel=Conversation.Channel.API)
    ok = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, status=Message.Status.DECODING)
    bad = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, status=Message.Status.QUEUED)
    assert emitted(tenant) == []  # queued and streaming replies are not events yet
    from inference.pipeline import api as pipeline

    ReplyRows().reply_finished(request_id=str(ok.pk), outcome=pipeline.ReplyOutcome(
        text="Your order ships today.", finish_reason="stop", prompt_tokens=10, completion_tokens=5,
        cached_tokens=0, ttft_ms=1.0, duration_ms=2.0, prefill_worker="p", decode_worker="d"))
    ReplyRows().reply_failed(request_id=str(bad.pk), error="worker_lost")
    ReplyRows().reply_failed(request_id=str(bad.pk), error="worker_lost")  # reported twice: one event
    finished, failed = emitted(tenant)
    assert finished["type"] == "message.created"
    assert finished["data"]["message"] | {"created": None} == {
        "id": str(ok.pk), "conversation": str(conversation.pk), "role": "assistant",
        "content": "Your order ships today.", "author": None, "status": "done", "finish_reason": "stop",
        "created": None}
    assert failed == {**failed, "type": "reply.failed",
                      "data": {"message": str(bad.pk), "conversation": str(conversation.pk), "code": "worker_lost"}}


def test_a_tenant_without_endpoints_or_an_endpoint_without_the_type_gets_no_event():
    bare = make_tenant().tenant
    services.conversation_create(tenant=bare, channel=Conversation.Channel.API)
    only_failures = subscribed(["reply.failed"])
    services.conversation_create(tenant=only_failures, channel=Conversation.Channel.API)
    assert emitted(bare) == [] and emitted(only_failures) == []


def test_a_rating_and_a_csat_score_are_events_and_a_second_rating_is_sent_again():
    from tandem.feedback import services as feedback

    tenant = subscribed(["feedback.created", "csat.created"])
    conversation = Conversation.objects.create(tenant=tenant, channel=Conversation.Channel.API)
    reply = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content="Ships today.",
                                   status=Message.Status.DONE)
    feedback.feedback_give(tenant=tenant, message_id=reply.pk, rating="down", comment="Wrong parcel")
    feedback.feedback_give(tenant=tenant, message_id=reply.pk, rating="up")
    feedback.csat_give(tenant=tenant, conversation_id=conversation.pk, score=4, comment="Quick")
    first, second, csat = emitted(tenant)
    assert first["type"] == second["type"] == "feedback.created"
    assert first["data"]["feedback"] | {"created": None} == {
        "message": str(reply.pk), "conversation": str(conversation.pk), "rating": "down",
        "comment": "Wrong parcel", "created": None}
    assert (second["data"]["feedback"]["rating"], second["data"]["feedback"]["comment"]) == ("up", None)
    assert csat["type"] == "csat.created"
    assert csat["data"]["csat"] | {"created": None} == {
        "conversation": str(conversation.pk), "score": 4, "comment": "Quick", "answered_by": "ai", "created": None}
