"""More than one web process (docs/deploy.md, `TANDEM_WEB_PROCESSES`): two real daphne
processes on the same database and Redis, as two web replicas behind a proxy. A
visitor's reconnect may land on either; what a socket follows lives in Redis, so the
other process picks it up exactly where the first left it."""

from __future__ import annotations

import json

import pytest
import websockets.sync.client as ws_client

from tandem.chat.models import Message
from tests.factories import make_tenant
from tests.platform_fixtures import ask_for_person, chat_socket, signed_in_agent, tokens_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reply_streaming_on_one_process_resumes_on_the_other_at_the_next_index(platform, second_web):
    assert second_web.base_url != platform.base_url
    tenant = make_tenant(max_output_tokens=64)
    with chat_socket(platform, tenant.widget_key.plaintext) as chat:
        chat.send({"type": "message", "text": "Tell me a long story about a lighthouse keeper.",
                   "conversation": None})
        message_id = chat.recv_until(lambda f: f["type"] == "start")[-1]["message"]
        first = chat.recv_until(lambda f: f["type"] == "token" and f["index"] >= 3)
    seen = tokens_of(first, message_id)
    k = seen[-1]["index"]
    # The connection dropped mid-reply; the proxy sends the reconnect to the other process.
    with chat_socket(second_web, tenant.widget_key.plaintext, visitor=chat.visitor_token) as chat:
        chat.send({"type": "resume", "message": message_id, "after": k})
        rest = chat.recv_until(lambda f: f.get("message") == message_id and f["type"] in ("end", "error"))
    assert rest[-1]["type"] == "end", rest[-1]
    later = tokens_of(rest, message_id)
    assert later, "the reply had ended before the reconnect: nothing was resumed"
    assert [t["index"] for t in later] == list(range(k + 1, k + 1 + len(later)))  # no gap, no repeat
    full = "".join(t["text"] for t in seen + later)
    assert full == Message.objects.get(pk=message_id).content


def agent_socket(web, client, conv):
    """The console's agent socket for `conv` on web process `web`, signed in as `client`."""
    url = f"{web.ws_url}/ws/agent/{conv.tenant.slug}/{conv.pk}/"
    return ws_client.connect(url, origin=web.base_url, open_timeout=20,
                             additional_headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"})


def test_an_agent_and_a_visitor_on_different_processes_hear_each_other_live(platform, second_web, client):
    created = make_tenant()
    tenant = created.tenant
    signed_in_agent(client, tenant, "Maya")
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        conv = ask_for_person(chat)
    cid = str(conv.pk)
    # The visitor's page reloads and its socket lands on process B; the agent's console
    # page is on process A.
    with chat_socket(second_web, created.widget_key.plaintext, visitor=chat.visitor_token) as chat, \
            agent_socket(platform, client, conv) as sock:
        chat.send({"type": "history", "conversation": cid})
        assert chat.recv()["type"] == "history"
        assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/claim/").status_code == 302
        claimed = chat.recv_until(lambda f: f["type"] == "handoff")[-1]
        assert (claimed["state"], claimed["agent"]) == ("human", "Maya")

        assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/reply/",
                           {"text": "Hi, Maya here."}).status_code == 302
        got = chat.recv_until(lambda f: f["type"] == "agent_message")[-1]
        assert (got["conversation"], got["text"], got["author"]) == (cid, "Hi, Maya here.", "Maya")

        chat.send({"type": "message", "text": "Thanks, my parcel is late.", "conversation": cid})
        assert chat.recv_until(lambda f: f["type"] == "received")[-1]["conversation"] == cid
        heard = []
        while not (heard and heard[-1].get("type") == "message" and heard[-1].get("role") == "user"):
            heard.append(json.loads(sock.recv(timeout=60)))
        assert heard[-1]["text"] == "Thanks, my parcel is late."
