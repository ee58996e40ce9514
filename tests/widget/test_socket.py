"""The widget's side of the websocket (docs/protocol.md): restoring a transcript with
`history`, conversations that belong to one visitor, and identity verification checked
on connect and for every message."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from urllib.parse import urlencode

import pytest
import websockets
import websockets.sync.client as ws_client

from tandem.chat.models import Conversation, Message
from tandem.chat.visitors import visitor_token_for
from tenants import keys
from tenants.models import ApiKey, Tenant
from tenants.services import tenant_identity_secret_rotate
from tests.factories import make_tenant
from tests.platform_fixtures import ORIGIN, ChatSocket

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def widget_socket(platform, key: str, **params):
    if "visitor" in params:  # the server's signed id for that visitor
        tenant = ApiKey.objects.get(key_hash=keys.hash_key(key)).tenant
        params["visitor"] = visitor_token_for(tenant=tenant, visitor_id=params["visitor"])
    query = urlencode({"key": key, **params})
    with ws_client.connect(f"{platform.ws_url}/ws/chat/?{query}", origin=ORIGIN, open_timeout=20) as conn:
        yield ChatSocket(conn)


def _conversation(tenant, **owner) -> Conversation:
    conv = Conversation.objects.create(tenant=tenant, channel="widget", **owner)
    Message.objects.create(conversation=conv, role="user", content="Hello")
    Message.objects.create(conversation=conv, role="assistant", content="Hi! How can I help?", status="done")
    Message.objects.create(conversation=conv, role="user", content="Where is my parcel?")
    Message.objects.create(conversation=conv, role="assistant", status="failed", error="no_worker: no worker")
    Message.objects.create(conversation=conv, role="user", content="Hello?")
    Message.objects.create(conversation=conv, role="assistant", status="decoding")
    return conv


def test_history_returns_the_visitors_transcript_in_order(platform):
    created = make_tenant()
    conv = _conversation(created.tenant, visitor_id="v-1")
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1") as chat:
        chat.send({"type": "history", "conversation": str(conv.pk)})
        frame = chat.recv()
    assert frame["type"] == "history" and frame["conversation"] == str(conv.pk)
    assert [(m["role"], m["text"], m["status"]) for m in frame["messages"]] == [
        ("user", "Hello", "done"), ("assistant", "Hi! How can I help?", "done"),
        ("user", "Where is my parcel?", "done"), ("assistant", "", "failed"),
        ("user", "Hello?", "done"), ("assistant", "", "decoding"),
    ]
    assert frame["messages"][3]["error"] == "no_worker"  # the code, not the worker's words
    assert [m["id"] for m in frame["messages"]] == [str(m.pk) for m in conv.messages.order_by("created_at")]


def test_another_visitors_or_tenants_conversation_answers_exactly_like_a_missing_one(platform):
    created = make_tenant()
    mine = _conversation(created.tenant, visitor_id="v-1")
    theirs = _conversation(created.tenant, visitor_id="v-2")
    elsewhere = _conversation(make_tenant().tenant, visitor_id="v-1")
    theirs_reply = theirs.messages.filter(role="assistant").last()
    before = Message.objects.count()
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1") as chat:
        answers = {}
        for name, conv_id in [("missing", str(uuid.uuid4())), ("visitor", str(theirs.pk)),
                              ("tenant", str(elsewhere.pk))]:
            chat.send({"type": "history", "conversation": conv_id})
            answers[name] = chat.recv()
            chat.send({"type": "message", "text": "Hi", "conversation": conv_id})
            answers[name + " message"] = chat.recv()
        chat.send({"type": "resume", "message": str(theirs_reply.pk), "after": -1})
        answers["resume"] = chat.recv()
        chat.send({"type": "cancel", "message": str(theirs_reply.pk)})
        answers["cancel"] = chat.recv()
        chat.send({"type": "history", "conversation": str(mine.pk)})  # the socket still works
        assert chat.recv()["type"] == "history"
    not_found = {"type": "error", "code": "conversation_not_found", "message": "No such conversation.",
                 "detail": "No such conversation."}
    for name in ["missing", "visitor", "tenant", "missing message", "visitor message", "tenant message"]:
        assert answers[name] == not_found, name
    assert answers["resume"]["code"] == answers["cancel"]["code"] == "message_not_found"
    assert Message.objects.count() == before  # nothing stored for any of them


@pytest.mark.parametrize("frame", [{"type": "history"}, {"type": "history", "conversation": 12},
                                   {"type": "history", "conversation": "not-an-id"},
                                   {"type": "history", "conversation": ["x"]}])
def test_a_bad_history_frame_gets_an_error_frame_and_the_socket_stays_open(platform, frame):
    created = make_tenant()
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1") as chat:
        chat.send(frame)
        assert chat.recv()["code"] == "conversation_not_found"
        chat.send({"type": "nonsense"})
        assert chat.recv()["code"] == "unknown_type"


def _verifying_tenant():
    created = make_tenant(max_output_tokens=4)
    Tenant.objects.filter(pk=created.tenant.pk).update(identity_verification=True)
    created.tenant.refresh_from_db()
    return created, tenant_identity_secret_rotate(tenant=created.tenant)


@pytest.mark.parametrize("params", [{"user": "u-1", "user_hash": "f" * 64}, {"user": "u-1"},
                                    {"user": "u-1", "user_hash": "x" * 5000}])
def test_with_verification_on_a_wrong_or_missing_hash_is_refused_on_connect(platform, params):
    created, _ = _verifying_tenant()
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1", **params) as chat:
        frame = chat.recv()
        assert frame["type"] == "error" and frame["code"] == "identity_verification_failed"
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            chat.recv(timeout=10)  # closed: no message can follow
    assert closed.value.rcvd.code == 4401
    assert not Conversation.objects.filter(tenant=created.tenant).exists()


def test_every_message_is_checked_against_the_current_secret_and_a_refused_one_leaves_nothing(platform):
    created, secret = _verifying_tenant()
    right = keys.identity_hash(secret, "u-1")
    with widget_socket(platform, created.widget_key.plaintext, visitor="v-1", user="u-1", user_hash=right,
                       user_name="Ada") as chat:
        message_id, frames = chat.ask("Hello")
        assert frames[-1]["type"] == "end"
        conv = Conversation.objects.get(tenant=created.tenant)
        assert (conv.user_id, conv.user_verified, conv.user_name) == ("u-1", True, "Ada")

        tenant_identity_secret_rotate(tenant=Tenant.objects.get(pk=created.tenant.pk))  # the old hash is void
        before = list(Message.objects.filter(conversation=conv).values_list("pk", flat=True))
        chat.send({"type": "message", "text": "Refused words", "conversation": str(conv.pk)})
        frame = chat.recv()
        assert frame["code"] == "identity_verification_failed"
        with pytest.raises(websockets.exceptions.ConnectionClosed):
            chat.recv(timeout=10)
    assert list(Message.objects.filter(conversation=conv).values_list("pk", flat=True)) == before
    assert not Message.objects.filter(content="Refused words").exists()


def test_a_verified_user_owns_their_conversation_on_any_device_and_an_unverified_claim_owns_nothing(platform):
    created, secret = _verifying_tenant()
    conv = _conversation(created.tenant, visitor_id="laptop", user_id="u-1", user_verified=True)
    right = keys.identity_hash(secret, "u-1")
    with widget_socket(platform, created.widget_key.plaintext, visitor="phone", user="u-1", user_hash=right) as chat:
        chat.send({"type": "history", "conversation": str(conv.pk)})
        assert chat.recv()["type"] == "history"
    # Verification off: the same claim is the visitor's own unverified words, and the
    # conversation of the verified user is not theirs.
    # Saved as the console saves it: tenants.changes counts it, so the process's copy of
    # the key (chat/key_cache.py) is read again at the next connect.
    created.tenant.identity_verification = False
    created.tenant.save(update_fields=["identity_verification"])
    with widget_socket(platform, created.widget_key.plaintext, visitor="phone", user="u-1") as chat:
        chat.send({"type": "history", "conversation": str(conv.pk)})
        assert chat.recv()["code"] == "conversation_not_found"
