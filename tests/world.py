"""The `world` fixture: two tenants with people in every role, a conversation each, and
an operator; what the console's and the hand-off's tests look at. A plugin of
tests/conftest.py, so every package's tests have it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from tandem.chat.models import Conversation, Message
from tenants.models import Membership
from tests.factories import UserFactory, make_tenant

PASSWORD = "correct horse battery"


@dataclass
class World:
    a: object  # CreatedTenant
    b: object
    staff: object
    owner_a: object
    admin_a: object
    viewer_a: object
    owner_b: object
    conv_a: Conversation
    conv_b: Conversation


def user(**kw):
    u = UserFactory(**kw)
    u.set_password(PASSWORD)
    u.save()
    return u


def conversation(tenant, text: str, reply: str = "Sure.") -> Conversation:
    conv = Conversation.objects.create(tenant=tenant, channel=Conversation.Channel.WIDGET, visitor_id="v-1")
    Message.objects.create(conversation=conv, role=Message.Role.USER, content=text)
    Message.objects.create(conversation=conv, role=Message.Role.ASSISTANT, content=reply,
                           completion_tokens=3, prompt_tokens=20, ttft_ms=42.0, duration_ms=90.0,
                           finish_reason="stop")
    return conv


def waiting(tenant, text: str, *, minutes: float = 0, days: float = 0, **who) -> Conversation:
    """A conversation whose visitor asked for a person (the hand-over button), waiting
    for `days` and `minutes` (since now when both are 0); `who`: the conversation's
    visitor fields (user_name, visitor_id, page_url ...)."""
    from tandem.handoff import states

    conv = conversation(tenant, text)
    if who:
        Conversation.objects.filter(pk=conv.pk).update(**who)
        conv.refresh_from_db()
    states.handoff_request(conversation=conv, reason="button")
    if minutes or days:
        Conversation.objects.filter(pk=conv.pk).update(
            handoff_at=timezone.now() - timedelta(days=days, minutes=minutes))
    return Conversation.objects.get(pk=conv.pk)


def forget_quota_counters(redis_client, *tenants) -> None:
    """Database ids come back after a rolled-back test; the limiter's counters in Redis
    (keyed by tenant id) would not, so each world starts with none."""
    for t in tenants:
        for key in redis_client.scan_iter(f"tandem:quota:{t.pk}:*"):
            redis_client.delete(key)


@pytest.fixture
def world(db, redis_client):
    a, b = make_tenant(slug="alpha"), make_tenant(slug="bravo")
    forget_quota_counters(redis_client, a.tenant, b.tenant)
    w = World(a=a, b=b, staff=user(is_staff=True), owner_a=user(), admin_a=user(), viewer_a=user(),
              owner_b=user(), conv_a=conversation(a.tenant, "Where is my alpha order?"),
              conv_b=conversation(b.tenant, "Bravo refund please"))
    for u, t, role in [(w.owner_a, a, "owner"), (w.admin_a, a, "admin"), (w.viewer_a, a, "viewer"),
                       (w.owner_b, b, "owner")]:
        Membership.objects.create(user=u, tenant=t.tenant, role=role)
    yield w
    forget_quota_counters(redis_client, a.tenant, b.tenant)


@pytest.fixture
def agent_a(world):
    """An agent of tenant A (the inbox's people), named Sam."""
    u = user(first_name="Sam")
    Membership.objects.create(user=u, tenant=world.a.tenant, role=Membership.Role.AGENT)
    return u
