"""The widget socket's `locale` (docs/protocol.md): a malformed tag is refused with an
error frame and the socket stays open; a visitor's language reaches the hand-over words
the web tier chooses when nobody can take the conversation."""

from __future__ import annotations

import pytest

from tandem.chat.models import Message
from tandem.hours.texts import unavailable_text
from tests.factories import make_tenant
from tests.widget.test_socket import widget_socket

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_malformed_locale_is_an_error_frame_and_the_socket_stays_open(platform):
    created = make_tenant()
    with widget_socket(platform, created.widget_key.plaintext, locale="fr<script>") as chat:
        refused = chat.recv_until(lambda f: f["type"] == "error")[-1]
        assert refused["code"] == "invalid_locale"
        chat.send({"type": "history", "conversation": "00000000-0000-0000-0000-000000000000"})
        assert chat.recv_until(lambda f: f["type"] == "error")[-1]["code"] == "conversation_not_found"


def test_asked_for_a_person_in_words_with_nobody_online_the_assistant_says_so_in_the_visitors_language(platform):
    created = make_tenant()
    with widget_socket(platform, created.widget_key.plaintext, locale="de-AT") as chat:
        chat.send({"type": "message", "text": "Can I talk to a human please?", "conversation": None})
        frames = chat.recv_until(lambda f: f["type"] == "end")
        if not any(f["type"] == "handoff" for f in frames):  # the event may come after the reply's end
            frames += chat.recv_until(lambda f: f["type"] == "handoff")
        start = next(f for f in frames if f["type"] == "start")
        assert frames[[f["type"] for f in frames].index("end")]["finish_reason"] == "handover"
        handoff = next(f for f in frames if f["type"] == "handoff")
        assert handoff["state"] == "pending_human" and handoff["offline"] is True
    reply = Message.objects.get(pk=start["message"])
    assert reply.content == unavailable_text("de") and reply.content.startswith("Gerade ist niemand")
