"""Which agent of a tenant answers a conversation handed to a person (docs/handoff.md):
agents' presence (online / away), the agents a conversation may be assigned to, and the
tenant's optional round-robin assignment of new hand-overs.

Presence is what the agent said (the console's online / away toggle) and whether one of
their console pages or agent sockets was heard from in the last `ONLINE_TTL_S` seconds
(`presence_seen`, throttled to one write per `SEEN_EVERY_S`): "online" in a tab closed an
hour ago is not online. Every read is scoped through tenants.access.

Round-robin (Tenant.handover_round_robin, off by default) gives a new hand-over to the
online agent who was assigned one least recently, by the same kind of conditional
UPDATE as a claim (`WHERE handoff = 'pending_human' AND assignee IS NULL`), so an agent
claiming at the same moment and the round-robin make exactly one owner. Nothing here
publishes: the callers (tandem.handoff.states) tell the conversation's sockets, as
they do for every change of owner."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from tandem.chat.models import AgentPresence, Conversation
from tandem.chat.validation import InvalidInput
from tandem.hours import selectors as business_hours
from tandem.url_converters import row_id
from tandem.webhooks import chat_events as webhook_events
from tenants.access import NotFound, access_list
from tenants.membership import Can, role_can
from tenants.models import Membership, Tenant

ONLINE_TTL_S = 30  # an online agent not heard from for this long is away
SEEN_EVERY_S = 10  # at most one heartbeat write per agent and tenant this often
INBOX_ROLES = [r for r in Membership.Role.values if role_can(r, Can.INBOX)]
H = Conversation.Handoff
P = AgentPresence.Status


def display_name(user) -> str:
    """How a visitor sees an agent: their first name, else their username's local part."""
    if user is None:
        return ""
    return (user.first_name or user.get_username().split("@")[0])[:150]


def presence_seen(*, tenant: Tenant, agent) -> None:
    """A heartbeat from one of the agent's console pages or sockets."""
    now = timezone.now()
    fresh = now - timedelta(seconds=SEEN_EVERY_S)
    rows = access_list(AgentPresence, tenant=tenant).filter(user=agent)
    if not rows.filter(Q(seen_at__isnull=True) | Q(seen_at__lt=fresh)).update(seen_at=now):
        AgentPresence.objects.get_or_create(tenant=tenant, user=agent, defaults={"seen_at": now})


def presence_set(*, tenant: Tenant, agent, status: str) -> str:
    """The agent's online / away toggle (and a heartbeat); returns the status."""
    if status not in P.values:
        raise InvalidInput("Choose online or away.", param="status", code="invalid_status")
    now = timezone.now()
    AgentPresence.objects.update_or_create(tenant=tenant, user=agent, defaults={"status": status, "seen_at": now})
    return status


def online_agents(*, tenant: Tenant):
    """The tenant's agents who take conversations now: online, heard from lately, and
    still members whose role has the inbox (one whose role changed since is not; an
    operator who is no member is never assigned one, as `agent_get` finds no such person)."""
    since = timezone.now() - timedelta(seconds=ONLINE_TTL_S)
    members = access_list(Membership, tenant=tenant).filter(role__in=INBOX_ROLES).values("user_id")
    return (access_list(AgentPresence, tenant=tenant).filter(status=P.ONLINE, seen_at__gte=since)
            .filter(user__in=members, user__is_active=True))


def presence_of(*, tenant: Tenant, agent) -> str:
    return P.ONLINE if online_agents(tenant=tenant).filter(user=agent).exists() else P.AWAY


def anyone_online(*, tenant_id: int) -> bool:
    return online_agents(tenant=Tenant(pk=tenant_id)).exists()


def inbox_agents(*, tenant: Tenant) -> list:
    """The people a conversation may be assigned to: members whose role has the inbox,
    each with their effective presence."""
    rows = (access_list(Membership, tenant=tenant).filter(role__in=INBOX_ROLES, user__is_active=True)
            .select_related("user").order_by("user__first_name", "user__username"))
    online = set(online_agents(tenant=tenant).values_list("user_id", flat=True))
    return [{"user": m.user, "name": display_name(m.user), "online": m.user_id in online} for m in rows]


def agent_get(*, tenant: Tenant, user_id):
    """A person a conversation of `tenant` may be assigned to; NotFound("agent") for
    anyone else (another tenant's member, a viewer, a malformed id) alike."""
    try:
        m = (access_list(Membership, tenant=tenant).filter(role__in=INBOX_ROLES, user__is_active=True,
                                                            user_id=row_id(user_id)).select_related("user").first())
    except (TypeError, ValueError):
        m = None
    if m is None:
        raise NotFound("agent")
    return m.user


def unreachable(*, tenant_id: int) -> dict:
    """{} when a person can take a conversation now. Else `offline` (the widget offers to
    leave an e-mail address and a message instead of promising a person), and out of the
    tenant's business hours (tandem.hours) `closed` with `back_at`, the next opening
    (ISO 8601), when there is one."""
    hours = business_hours.availability(tenant_id=tenant_id)
    if not hours.in_hours:
        return {"offline": True, "closed": True, **({"back_at": hours.back_at.isoformat()} if hours.back_at else {})}
    return {} if anyone_online(tenant_id=tenant_id) else {"offline": True}


def state_event(*, state: str, agent, tenant_id: int) -> dict:
    """The conversation's `handoff` event; while it waits for a person, whether anyone
    can take it (`unreachable`)."""
    event = {"type": "handoff", "state": state, "agent": display_name(agent)}
    if state == H.PENDING_HUMAN:
        event.update(unreachable(tenant_id=tenant_id))
    return event


def assign_round_robin(*, conversation_id, tenant: Tenant):
    """When the tenant has round-robin on, give the conversation (now waiting for a
    person) to the online agent whose last assignment is oldest; returns that agent,
    or None (off, nobody online, or someone claimed it first)."""
    if not tenant.handover_round_robin:
        return None
    turn = (online_agents(tenant=tenant).select_related("user")
            .order_by(F("last_assigned_at").asc(nulls_first=True), "pk").first())
    if turn is None:
        return None
    now = timezone.now()
    with transaction.atomic():
        won = Conversation.objects.filter(pk=conversation_id, handoff=H.PENDING_HUMAN, assignee__isnull=True).update(
            handoff=H.HUMAN, assignee=turn.user, claimed_at=now, updated_at=now)
        if not won:
            return None
        AgentPresence.objects.filter(pk=turn.pk).update(last_assigned_at=now)
        webhook_events.handoff_changed(tenant_id=tenant.pk, conversation_id=conversation_id, state=H.HUMAN,
                                       reason="round_robin", agent=turn.user)
    return turn.user
