"""Visitors' ratings of replies and CSAT of conversations (tandem.feedback), over the
widget socket and over REST, against the running platform: a visitor rates only replies
of their own conversations, one rating per reply (a second replaces the first), one
score per conversation, and bad input gets an error frame with a code or a 400."""

from __future__ import annotations

import httpx
import pytest

from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import visitor_establish
from tandem.feedback.models import Csat, Feedback
from tests.factories import make_tenant
from tests.platform_fixtures import chat_socket
from tests.widget.test_socket import widget_socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def http(platform):
    with httpx.Client(base_url=platform.base_url, timeout=60) as client:
        yield client


def auth(created):
    return {"Authorization": f"Bearer {created.secret_key.plaintext}"}


def answered(tenant, *, channel="widget", **owner) -> tuple[Conversation, Message]:
    conv = Conversation.objects.create(tenant=tenant, channel=channel, **owner)
    Message.objects.create(conversation=conv, role="user", content="Where is my parcel?")
    reply = Message.objects.create(conversation=conv, role="assistant", content="It ships today.", status="done")
    return conv, reply


def test_a_visitor_rates_a_real_reply_over_the_socket_and_a_second_rating_replaces_the_first(platform):
    created = make_tenant(max_output_tokens=4)
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        reply_id, frames = chat.ask("Hello")
        assert frames[-1]["type"] == "end"
        chat.send({"type": "feedback", "message": reply_id, "rating": "up"})
        assert chat.recv() == {"type": "feedback_received", "message": reply_id}
        chat.send({"type": "feedback", "message": reply_id, "rating": "down", "comment": "  Not what I asked. "})
        assert chat.recv() == {"type": "feedback_received", "message": reply_id}
    rows = list(Feedback.objects.filter(message_id=reply_id))
    assert [(r.rating, r.comment, r.tenant_id) for r in rows] == [("down", "Not what I asked.", created.tenant.pk)]
    visitor_id = Conversation.objects.get(pk=rows[0].conversation_id).visitor_id
    assert rows[0].rater == f"visitor:{visitor_id}"


def test_another_visitors_reply_cannot_be_rated_and_is_not_found(platform):
    created = make_tenant()
    _, theirs = answered(created.tenant, visitor_id="someone-else")
    with widget_socket(platform, created.widget_key.plaintext, visitor="me") as chat:
        chat.send({"type": "feedback", "message": str(theirs.pk), "rating": "down"})
        frame = chat.recv()
    assert frame["type"] == "error" and frame["code"] == "message_not_found"
    assert not Feedback.objects.exists()


def test_bad_feedback_frames_get_an_error_frame_with_a_code(platform):
    created = make_tenant()
    conv, reply = answered(created.tenant, visitor_id="me")
    question = conv.messages.get(role="user")
    with widget_socket(platform, created.widget_key.plaintext, visitor="me") as chat:
        for frame, code in [
            ({"message": str(reply.pk), "rating": "meh"}, "invalid_rating"),
            ({"message": str(reply.pk), "rating": "up", "comment": ["x"]}, "invalid_comment"),
            ({"message": str(reply.pk), "rating": "up", "comment": "x" * 2001}, "invalid_comment"),
            ({"message": 42, "rating": "up"}, "invalid_frame"),
            ({"message": "not-a-uuid", "rating": "up"}, "message_not_found"),
            ({"message": str(question.pk), "rating": "up"}, "not_rateable"),
        ]:
            chat.send({"type": "feedback", **frame})
            answer = chat.recv()
            assert (answer["type"], answer["code"]) == ("error", code), frame
    assert not Feedback.objects.exists()


def test_a_reply_is_rated_over_rest_once_per_rater(http):
    created = make_tenant()
    _, reply = answered(created.tenant, channel="api")
    url = f"/api/v1/messages/{reply.pk}/feedback/"
    first = http.post(url, json={"rating": "up"}, headers=auth(created))
    assert first.status_code == 200, first.text
    assert first.json()["rating"] == "up" and first.json()["message"] == str(reply.pk)
    second = http.post(url, json={"rating": "down", "comment": "Wrong parcel."}, headers=auth(created))
    assert second.status_code == 200 and second.json()["comment"] == "Wrong parcel."
    assert list(Feedback.objects.values_list("rating", "rater")) == [("down", "api")]


def test_rest_feedback_refuses_bad_input_and_another_tenants_reply(http):
    created, other = make_tenant(), make_tenant()
    _, reply = answered(created.tenant, channel="api")
    url = f"/api/v1/messages/{reply.pk}/feedback/"
    for body, status, code in [({"rating": "sideways"}, 400, "invalid_rating"),
                               ({"rating": "up", "stars": 5}, 400, "unknown_parameter"),
                               ({}, 400, "invalid_rating")]:
        resp = http.post(url, json=body, headers=auth(created))
        assert (resp.status_code, resp.json()["error"]["code"]) == (status, code), resp.text
    resp = http.post(url, json={"rating": "up"}, headers=auth(other))
    assert (resp.status_code, resp.json()["error"]["code"]) == (404, "message_not_found")
    assert not Feedback.objects.exists()


def test_csat_after_an_agent_resolves_is_stored_once_and_read_over_rest(platform, http):
    created = make_tenant()
    conv = Conversation.objects.create(tenant=created.tenant, channel="widget", visitor_id="me",
                                       handoff=Conversation.Handoff.RESOLVED)
    Message.objects.create(conversation=conv, role="user", content="I need a refund.")
    Message.objects.create(conversation=conv, role="agent", content="Refunded.", author_name="Ana")
    with widget_socket(platform, created.widget_key.plaintext, visitor="me") as chat:
        chat.send({"type": "csat", "conversation": str(conv.pk), "score": 5, "comment": "Quick!"})
        assert chat.recv() == {"type": "csat_received", "conversation": str(conv.pk)}
        chat.send({"type": "csat", "conversation": str(conv.pk), "score": 1})
        again = chat.recv()
        assert (again["type"], again["code"]) == ("error", "csat_already_given")
        chat.send({"type": "csat", "conversation": str(conv.pk), "score": 6})
        assert chat.recv()["code"] == "invalid_score"
    resp = http.get(f"/api/v1/conversations/{conv.pk}/csat/", headers=auth(created))
    assert resp.status_code == 200, resp.text
    assert {k: resp.json()[k] for k in ("score", "comment", "answered_by")} == {
        "score": 5, "comment": "Quick!", "answered_by": "human"}
    assert Csat.objects.count() == 1


def test_csat_over_rest_for_an_assistant_conversation(http):
    created, other = make_tenant(), make_tenant()
    conv, _ = answered(created.tenant, channel="api")
    url = f"/api/v1/conversations/{conv.pk}/csat/"
    assert http.get(url, headers=auth(created)).json()["error"]["code"] == "csat_not_found"
    assert http.post(url, json={"score": 4}, headers=auth(other)).status_code == 404
    assert http.post(url, json={"score": True}, headers=auth(created)).json()["error"]["code"] == "invalid_score"
    made = http.post(url, json={"score": 4}, headers=auth(created))
    assert made.status_code == 201 and made.json()["answered_by"] == "ai"
    again = http.post(url, json={"score": 2}, headers=auth(created))
    assert (again.status_code, again.json()["error"]["code"]) == (409, "csat_already_given")


def test_a_conversation_nobody_answered_cannot_be_scored():
    created = make_tenant()
    conv = Conversation.objects.create(tenant=created.tenant, channel="widget", visitor_id="me")
    Message.objects.create(conversation=conv, role="user", content="Hello?")
    from tandem.chat.validation import InvalidInput
    from tandem.feedback.services import csat_give

    visitor = visitor_establish(tenant=created.tenant, visitor_id="me")
    with pytest.raises(InvalidInput) as refused:
        csat_give(tenant=created.tenant, conversation_id=conv.pk, score=3, visitor=visitor)
    assert refused.value.code == "not_rateable"
