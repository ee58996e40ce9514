"""A visitor and an agent keep hearing each other across a silence longer than any client
library's default read timeout (redis-py's asyncio reads: 5 s; HTTP clients: 30 s),
through the real socket stack: daphne, the widget socket, the agent socket, Redis."""

from __future__ import annotations

import json
import time

import pytest

from tandem.chat.models import Conversation
from tests.factories import make_tenant
from tests.handoff.test_handoff import agent_socket
from tests.platform_fixtures import ask_for_person, chat_socket, signed_in_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
SILENCE_S = 31


def quiet_for(seconds: float, recv) -> None:
    """Receive nothing but idle-time frames for `seconds` (the silence under test; any
    frame about the conversation in it would be a bug, and ends the test)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            frame = recv(left)
        except TimeoutError:
            return
        assert frame.get("type") in ("typing",), f"unexpected frame during the silence: {frame}"


def test_after_31_seconds_of_silence_the_agent_and_the_visitor_still_reach_each_other(platform, client):
    created = make_tenant()
    tenant = created.tenant
    signed_in_agent(client, tenant, "Ines")
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        conv = ask_for_person(chat)
        cid = str(conv.pk)
        with agent_socket(platform, client, conv) as sock:
            def agent_frame(timeout: float = 60) -> dict:
                return json.loads(sock.recv(timeout=timeout))

            assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/claim/").status_code == 302
            chat.recv_until(lambda f: f["type"] == "handoff" and f["state"] == "human")
            while agent_frame().get("type") != "handoff":
                pass  # the claim, seen live on the agent's page

            # Silence on both sides, then the agent answers: the visitor gets it.
            quiet_for(SILENCE_S, lambda t: chat.recv(timeout=t))
            r = client.post(f"/console/t/{tenant.slug}/inbox/{cid}/reply/", {"text": "Still here, Ines."})
            assert r.status_code == 302
            got = chat.recv_until(lambda f: f["type"] == "agent_message", timeout=15)[-1]
            assert got["text"] == "Still here, Ines." and got["author"] == "Ines"

            # Silence again, then the visitor writes: the agent's page gets it.
            quiet_for(SILENCE_S, lambda t: chat.recv(timeout=t))
            chat.send({"type": "message", "text": "Thanks, one more question.", "conversation": cid})
            chat.recv_until(lambda f: f["type"] == "received", timeout=15)
            deadline = time.monotonic() + 15
            seen = []
            while time.monotonic() < deadline:
                seen.append(agent_frame(timeout=deadline - time.monotonic()))
                if seen[-1].get("type") == "message" and seen[-1].get("role") == "user":
                    break
            assert seen[-1].get("text") == "Thanks, one more question.", seen


def test_asking_for_a_person_in_words_is_seen_live_even_when_the_cpu_tier_is_first(platform):
    """The CPU tier publishes the hand-over event while the socket's submission is still
    returning: the socket watches from before it sent the message, so the widget hears
    of it (and, with nobody online, is offered the offline form) every time."""
    created = make_tenant()
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        cid = None
        for _ in range(3):  # a new conversation, then follow-ups in it
            chat.send({"type": "message", "text": "I want to talk to a real person please.", "conversation": cid})
            frames = chat.recv_until(lambda f: f["type"] == "start", timeout=60)
            cid = next(f["id"] for f in frames if f["type"] == "conversation")
            reply = frames[-1]["message"]
            # (an already-watched conversation's hand-over may even come before `start`)
            handoffs, ended, seen = [f for f in frames if f["type"] == "handoff"], False, list(frames)
            while not (ended and handoffs):  # the reply's end and the hand-over, in either order
                try:
                    f = chat.recv(timeout=60)
                except TimeoutError:
                    raise AssertionError(f"stopped after {seen}") from None
                seen.append(f)
                handoffs += [f] if f["type"] == "handoff" else []
                ended = ended or (f.get("message") == reply and f["type"] in ("end", "error"))
            assert handoffs[0]["state"] == "pending_human" and handoffs[-1].get("offline") is True
            conv = Conversation.objects.get(pk=cid)
            conv.handoff = Conversation.Handoff.BOT  # back to the bot for the next try
            conv.save(update_fields=["handoff"])
