"""The getting-started checklist's facts: each step turns done from what is stored, and
the widget's first connect from an allowed origin is recorded by the real socket
consumer (in this process, against the session's Redis and database), once."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from knowledge import services as knowledge
from tandem.chat.consumers import ChatConsumer
from tandem.chat.models import Conversation, Message
from tandem.onboarding import selectors, services
from tandem.onboarding.models import TenantSetup
from tenants import invitations
from tests.factories import make_tenant

SHOP = "https://shop.example"


def done(tenant) -> dict[str, bool]:
    return {s.key: s.done for s in selectors.checklist(tenant)}


@pytest.mark.django_db
def test_each_step_turns_done_from_its_stored_fact_and_nothing_else():
    tenant = make_tenant(origins=[SHOP]).tenant
    assert done(tenant) == dict.fromkeys(("snippet", "origin", "articles", "assistant", "teammate"), False)
    origin_step = next(s for s in selectors.checklist(tenant) if s.key == "origin")
    assert SHOP in origin_step.detail and "turns green" in origin_step.detail

    services.snippet_copied(tenant=tenant)
    services.snippet_copied(tenant=tenant)  # a second copy changes nothing
    copied_at = TenantSetup.objects.get(tenant=tenant).snippet_copied_at
    services.snippet_copied(tenant=tenant)
    assert TenantSetup.objects.get(tenant=tenant).snippet_copied_at == copied_at
    assert done(tenant)["snippet"] and not done(tenant)["origin"]

    article = knowledge.article_create(tenant=tenant, title="Shipping", body="Parcels leave within two days.")
    assert not done(tenant)["articles"]  # pending: not indexed yet
    knowledge.article_index(article_id=article.pk)
    assert done(tenant)["articles"]

    conv = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id="v")
    Message.objects.create(conversation=conv, role="assistant", content="", status="failed")
    assert not done(tenant)["assistant"]  # a failed reply is not an answer
    Message.objects.create(conversation=conv, role="assistant", content="They leave within two days.")
    assert done(tenant)["assistant"]

    invitation, _ = invitations.invitation_create(tenant=tenant, identifier="sam@shop.example", role="agent")
    assert done(tenant)["teammate"]
    invitations.invitation_revoke(invitation=invitation)
    assert not done(tenant)["teammate"]  # a revoked invitation invites nobody


async def _connect(key: str, origin: str) -> str:
    """The first frame after a connect's checks: an error's code, or "ok" once a request
    was answered (the consumer's connect has then run to its end)."""
    comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/chat/?key={key}", headers=[(b"origin", origin.encode())])
    comm.scope["client"] = ("198.51.100.7", 50000)
    await comm.connect(timeout=20)
    try:
        await comm.send_json_to({"type": "history", "conversation": "x"})
        while True:
            frame = await comm.receive_json_from(timeout=20)
            if frame["type"] == "error":
                return "ok" if frame["code"] == "conversation_not_found" else frame["code"]
    finally:
        await comm.disconnect(timeout=20)


@pytest.mark.django_db(transaction=True)
def test_the_origin_step_is_done_once_the_widget_connects_from_an_allowed_origin_and_recorded_once():
    created = make_tenant(origins=[SHOP])
    key, tenant = created.widget_key.plaintext, created.tenant
    assert asyncio.run(_connect(key, "https://elsewhere.example")) == "origin_not_allowed"
    assert not TenantSetup.objects.filter(tenant=tenant, widget_connected_at__isnull=False).exists()
    assert not services.widget_connect_known(tenant.pk)

    assert asyncio.run(_connect(key, SHOP)) == "ok"
    setup = TenantSetup.objects.get(tenant=tenant)
    assert setup.widget_origin == SHOP and setup.widget_connected_at is not None
    assert done(tenant)["origin"] and done(tenant)["snippet"]  # connected: the snippet was copied somewhere
    # Later connects of the process neither write nor read: the first connect's time stays.
    assert services.widget_connect_known(tenant.pk)
    first = setup.widget_connected_at
    assert asyncio.run(_connect(key, SHOP)) == "ok"
    assert TenantSetup.objects.get(tenant=tenant).widget_connected_at == first
