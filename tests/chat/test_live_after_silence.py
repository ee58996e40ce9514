"""A visitor and an agent keep hearing each other across a silence longer than any client
library's default read timeout (redis-py's asyncio reads: 5 s; HTTP clients: 30 s),
through the real socket stack: daphne, the widget socket, the agent socket, Redis."""

from __future__ import annotations

import json
import time

import pytest

from tandem.chat.models import Conversation
from tenants.models import Membership
from tests.chat.test_handoff import agent_socket
from tests.factories import UserFactory, make_tenant
from tests.platform_fixtures import chat_socket

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
    agent = UserFactory(first_name="Ines")
    Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    client.force_login(agent)
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        chat.send({"type": "handoff", "conversation": None})
        cid = chat.recv()["id"]
        chat.recv_until(lambda f: f["type"] == "handoff")
        conv = Conversation.objects.get(pk=cid)
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
