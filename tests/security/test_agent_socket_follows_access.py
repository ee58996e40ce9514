"""An agent's open socket follows their access (issue 27, finding 2): removed from the
tenant, demoted below the inbox, or signed out, the socket closes at once, instead of
streaming the conversation (visitor messages and internal notes) to someone who may no
longer see it, or carrying their typing to the visitor under their name."""

from __future__ import annotations

import time

import pytest
from websockets.exceptions import ConnectionClosed

from tandem.chat.models import Conversation
from tandem.handoff import states
from tenants import services as tenant_services
from tenants.models import Membership
from tests.factories import UserFactory, make_tenant
from tests.handoff.test_handoff import agent_socket

pytestmark = pytest.mark.django_db(transaction=True)
CLOSES_WITHIN_S = 3.0  # pushed, not polled: a poll would take its whole period


def _agent_on_a_conversation(client):
    created = make_tenant()
    agent = UserFactory()
    member = Membership.objects.create(user=agent, tenant=created.tenant, role=Membership.Role.AGENT)
    conv = Conversation.objects.create(tenant=created.tenant, channel="widget", visitor_id="v-1")
    states.handoff_request(conversation=conv, reason="button")
    client.force_login(agent)
    return member, conv


def _closed_after(sock, change) -> tuple[int, float]:
    """Make the change; return the socket's close code and how long the close took."""
    started = time.monotonic()
    change()
    with pytest.raises(ConnectionClosed):
        while True:
            sock.recv(timeout=30)
    return sock.close_code, time.monotonic() - started


@pytest.mark.parametrize("how", ["removed", "demoted"])
def test_an_agent_removed_or_demoted_loses_their_open_socket_at_once(platform, client, how):
    member, conv = _agent_on_a_conversation(client)
    owner = UserFactory()
    Membership.objects.create(user=owner, tenant=member.tenant, role=Membership.Role.OWNER)
    with agent_socket(platform, client, conv) as sock:
        sock.send('{"type": "typing"}')  # the socket is live and acting for them
        if how == "removed":
            code, took = _closed_after(sock, lambda: tenant_services.member_remove(membership=member))
        else:
            code, took = _closed_after(sock, lambda: tenant_services.member_set_role(
                membership=member, role=Membership.Role.VIEWER))
    assert code == 4403
    assert took < CLOSES_WITHIN_S


def test_an_agent_who_signs_out_loses_their_open_socket_at_once(platform, client):
    _, conv = _agent_on_a_conversation(client)
    with agent_socket(platform, client, conv) as sock:
        sock.send('{"type": "typing"}')
        code, took = _closed_after(sock, lambda: client.post("/console/logout/"))
    assert code == 4401
    assert took < CLOSES_WITHIN_S


def test_a_change_to_someone_else_leaves_the_socket_open(platform, client):
    member, conv = _agent_on_a_conversation(client)
    other = Membership.objects.create(user=UserFactory(), tenant=member.tenant, role=Membership.Role.AGENT)
    with agent_socket(platform, client, conv) as sock:
        tenant_services.member_remove(membership=other)
        member.save()  # a change of their own that keeps their access: checked, and kept
        sock.send('{"type": "typing"}')
        # Still open and serving: a visitor-side event reaches it.
        states.typing(conversation_id=str(conv.pk), who="visitor")
        assert '"typing"' in sock.recv(timeout=10)
