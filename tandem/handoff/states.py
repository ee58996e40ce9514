"""Who answers a conversation: the assistant or a person of the tenant (docs/handoff.md).

    bot ──(the visitor's "Talk to a person"; an agent takes over)──► pending_human
    bot | resolved ──(the assistant's reply hands over: asked in words, no grounded answer)──► pending_human
    pending_human ──(an agent claims; round-robin)──► human          bot ──(an agent claims)──► human
    pending_human | human ──(assign to another agent)──► human
    pending_human | human ──(resolve)──► resolved ──(the visitor's next message)──► bot

Every change is one conditional UPDATE (`WHERE handoff IN <the states it may come
from>`): the database decides, so two agents claiming at the same moment make exactly
one owner, and the loser is told who won. While the conversation is `pending_human` or
`human`, a visitor's message is stored for the inbox and nothing goes to the model tiers
(`hold_if_with_person`, called at the top of `tandem.chat.services.chat_submit`): no
admission, no request in Redis, no UsageRecord. Agents' messages and notes are Message
rows with an `author`; they count against no model quota.

Every change is published on commit to the conversation's live events
(`tandem.handoff.events`), which the widget socket and the agents' sockets tail."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from inference.text import handover
from inference.wire.connections import get_redis
from tandem.chat.models import Conversation, Message
from tandem.chat.validation import InvalidInput, clean_user_text
from tandem.hours import texts as hours_texts
from tandem.webhooks import chat_events as webhook_events
from tenants import audit

from . import assignment, events
from .assignment import display_name
from .inbox import visitor_name

H = Conversation.Handoff
# To a state, from the states it may be reached from.
_FROM = {
    H.PENDING_HUMAN: (H.BOT, H.RESOLVED),
    H.HUMAN: (H.BOT, H.PENDING_HUMAN, H.RESOLVED),
    H.RESOLVED: (H.PENDING_HUMAN, H.HUMAN),
    H.BOT: (H.RESOLVED,),
}


class HeldForPerson(InvalidInput):
    """The visitor's message was stored for the person who owns the conversation: the
    assistant does not answer it. (An InvalidInput so the REST surface answers 400 with
    this code rather than a completion; the widget socket acknowledges it.)"""

    def __init__(self, message: Message):
        super().__init__("A person is answering this conversation: the message was stored for them.",
                         code="conversation_with_person")
        self.message = message


class Taken(Exception):
    """Another agent claimed it first (or it cannot be claimed now)."""

    code = "already_claimed"

    def __init__(self, conversation: Conversation):
        owner = conversation.assignee
        super().__init__(f"{display_name(owner)} is answering this conversation." if owner
                         else "This conversation cannot be claimed now.")
        self.conversation = conversation


class NotYours(Exception):
    code = "not_assigned"

    def __init__(self):
        super().__init__("Claim this conversation before you reply.")


def _move(conversation: Conversation, to: str, by=None, **fields) -> bool:
    """One conditional UPDATE to `to` (by the agent `by`, if one made it); True if this
    call made the change. `conversation` is read again either way, so the caller sees
    who won."""
    now = timezone.now()
    won = Conversation.objects.filter(pk=conversation.pk, handoff__in=_FROM[to]).update(
        handoff=to, updated_at=now, **fields) == 1
    conversation.refresh_from_db()
    if won:
        _publish(conversation, _state_event(conversation), by=by)
        _handoff_event(conversation)
    return won


def _handoff_event(conversation: Conversation) -> None:
    webhook_events.handoff_changed(tenant_id=conversation.tenant_id, conversation_id=conversation.pk,
                                   state=conversation.handoff, reason=conversation.handoff_reason,
                                   agent=conversation.assignee)


def _state_event(conversation: Conversation) -> dict:
    return assignment.state_event(state=conversation.handoff, agent=conversation.assignee,
                                  tenant_id=conversation.tenant_id)


def _publish(conversation: Conversation, event: dict, *, audience: str = events.ALL, by=None) -> None:
    cid = str(conversation.pk)
    feed = inbox_feed_entry(conversation, event, by=by)
    inbox = (conversation.tenant_id, feed) if feed else None
    transaction.on_commit(lambda: events.publish(get_redis(), cid, event, audience=audience, inbox=inbox))


def inbox_feed_entry(conversation: Conversation, event: dict, *, by=None) -> dict | None:
    """What the tenant's inbox feed (events.inbox_feed_key) says of `event`, or None: a
    hand-over or an assignment, and a visitor's message to a person. `by` is the agent
    who made the change (they are not told of their own doing)."""
    kind = event.get("type")
    if kind == "handoff" and event.get("state") in (H.PENDING_HUMAN, H.HUMAN):
        entry = {"type": "handoff", "state": event["state"]}
    elif kind == "message" and event.get("role") == Message.Role.USER:
        entry = {"type": "message", "text": (event.get("text") or "")[:140]}
    else:
        return None
    return {**entry, "conversation": str(conversation.pk), "assignee": conversation.assignee_id,
            "by": getattr(by, "pk", None), "visitor": visitor_name(conversation)}


def handoff_request(*, conversation: Conversation, reason: str) -> bool:
    """The visitor asked for a person (reason "button"), or an agent will take it
    ("agent"). False when a person already has it, or it already waits for one. With
    round-robin on, it goes on to an online agent at once."""
    moved = _move(conversation, H.PENDING_HUMAN, handoff_reason=reason, handoff_at=timezone.now(),
                  assignee=None, claimed_at=None, first_human_reply_at=None, resolved_at=None)
    if moved and reason != "agent":  # an agent taking over claims it next themselves
        after_handoff(conversation=conversation)
    return moved


def after_handoff(*, conversation: Conversation) -> None:
    """Round-robin, for a conversation that just started to wait for a person."""
    if assignment.assign_round_robin(conversation_id=conversation.pk, tenant=conversation.tenant):
        conversation.refresh_from_db()
        _publish(conversation, _state_event(conversation))


def handoff_by_assistant(*, conversation_id, reason: str, now) -> bool:
    """The assistant's reply hands the conversation over (reason "words": the visitor asked
    in words; "ungrounded": it had no grounded answer), in the caller's transaction (the
    reply's, tandem.chat.reply_sink). Published later, by `announce_waiting`, once the
    reply is told. The evaluation harness's conversations (tandem.evals.ask) keep the
    hand-over on the reply alone: they are tests, nobody waits for a person there."""
    moved = Conversation.objects.filter(pk=conversation_id, handoff__in=_FROM[H.PENDING_HUMAN]).exclude(
        visitor_id__startswith="eval:").update(
        handoff=H.PENDING_HUMAN, handoff_reason=reason, handoff_at=now, updated_at=now, assignee=None,
        claimed_at=None, first_human_reply_at=None, resolved_at=None)
    if moved:
        webhook_events.handoff_changed(tenant_id=Conversation.objects.get(pk=conversation_id).tenant_id,
                                       conversation_id=conversation_id, state=H.PENDING_HUMAN, reason=reason)
    return bool(moved)


def announce_waiting(*, conversation_id) -> None:
    """After `handoff_by_assistant`: it waits for a person (offline when no agent is
    online); then to the next agent when the tenant assigns round-robin."""
    conversation = Conversation.objects.select_related("tenant").get(pk=conversation_id)
    client = get_redis()
    event = assignment.state_event(state=H.PENDING_HUMAN, agent=None, tenant_id=conversation.tenant_id)
    events.publish(client, conversation_id, event,
                   inbox=(conversation.tenant_id, inbox_feed_entry(conversation, event)))
    agent = assignment.assign_round_robin(conversation_id=conversation_id, tenant=conversation.tenant)
    if agent is not None:
        conversation.refresh_from_db()
        event = assignment.state_event(state=H.HUMAN, agent=agent, tenant_id=conversation.tenant_id)
        events.publish(client, conversation_id, event,
                       inbox=(conversation.tenant_id, inbox_feed_entry(conversation, event)))


def conversation_claim(*, conversation: Conversation, agent) -> Conversation:
    """`agent` owns it now, or Taken says who does. An API conversation has no one to
    answer it live, so only the widget's are claimed."""
    if conversation.channel != Conversation.Channel.WIDGET:
        raise Taken(conversation)
    now = timezone.now()
    extra = {} if conversation.handoff == H.PENDING_HUMAN else {"handoff_reason": "agent", "handoff_at": now}
    if not _move(conversation, H.HUMAN, by=agent, assignee=agent, claimed_at=now, resolved_at=None, **extra):
        raise Taken(conversation)
    return conversation


class Stale(Exception):
    code = "assignee_changed"

    def __init__(self, conversation: Conversation):
        owner = conversation.assignee
        super().__init__(f"Assigned to {display_name(owner)} meanwhile: look again." if owner and conversation.with_person
                         else "This conversation is no longer with a person.")
        self.conversation = conversation


def conversation_assign(*, conversation: Conversation, to, by) -> Conversation:
    """Another agent (`to`, one `assignment.agent_get` found in the tenant) answers it
    now, as `by` decided: one conditional UPDATE, from the owner `by` saw, so two people
    reassigning the same conversation at once cannot both win (the loser gets Stale).
    Audited, and told to the conversation's sockets like a claim."""
    if conversation.channel != Conversation.Channel.WIDGET:
        raise Stale(conversation)
    before, now = conversation.assignee, timezone.now()
    with transaction.atomic():  # no assignment without its audit record
        won = Conversation.objects.filter(pk=conversation.pk, handoff__in=[H.PENDING_HUMAN, H.HUMAN],
                                          assignee=before).update(handoff=H.HUMAN, assignee=to, claimed_at=now,
                                                                  updated_at=now)
        conversation.refresh_from_db()
        if not won:
            raise Stale(conversation)
        audit.record(actor=audit.Actor.console(by), tenant=conversation.tenant, entity="conversation",
                     entity_id=conversation.pk, action="assign",
                     changes={"assignee": [before.get_username() if before else None, to.get_username()]},
                     summary=f"conversation {conversation.pk} assigned to {to.get_username()}")
        _publish(conversation, _state_event(conversation), by=by)
        _handoff_event(conversation)
    return conversation


def conversation_resolve(*, conversation: Conversation) -> bool:
    return _move(conversation, H.RESOLVED, resolved_at=timezone.now())


def agent_message(*, conversation: Conversation, agent, text: str, note: bool = False) -> Message:
    """An agent's reply (the conversation must be theirs), or an internal note (any
    agent's, the visitor never sees it)."""
    text = clean_user_text(text)
    if not note and not (conversation.handoff == H.HUMAN and conversation.assignee_id == agent.pk):
        raise NotYours()
    with transaction.atomic():
        msg = Message.objects.create(conversation=conversation, role=Message.Role.NOTE if note else Message.Role.AGENT,
                                     content=text, author=agent, author_name=display_name(agent))
        now = timezone.now()
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now)
        if not note:
            Conversation.objects.filter(pk=conversation.pk, first_human_reply_at__isnull=True).update(
                first_human_reply_at=now)
        _publish(conversation, message_event(msg), audience=events.AGENTS if note else events.ALL)
        if not note:
            webhook_events.message_created(msg, tenant_id=conversation.tenant_id)
    return msg


def message_event(msg: Message) -> dict:
    return {"type": "message", "id": str(msg.pk), "role": msg.role, "text": msg.content,
            "author": msg.author_name, "at": msg.created_at.isoformat()}


def hold_if_with_person(*, conversation: Conversation, text: str) -> None:
    """Called for a visitor's message before any admission: when a person owns the
    conversation (or it waits for one, in business hours), store the message for them
    and raise HeldForPerson; after `resolved`, give the conversation back to the bot."""
    if conversation.handoff == H.RESOLVED:
        _move(conversation, H.BOT)
    if not conversation.with_person:
        return
    if conversation.handoff == H.PENDING_HUMAN and assignment.unreachable(tenant_id=conversation.tenant_id).get("closed"):
        return  # out of business hours nobody reads it before morning: the assistant keeps answering
    with transaction.atomic():
        msg = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=text)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
        _publish(conversation, message_event(msg))
        webhook_events.message_created(msg, tenant_id=conversation.tenant_id)
    raise HeldForPerson(msg)


def visitor_asks_for_person(*, conversation: Conversation | None, create: dict) -> Conversation:
    """The widget's "Talk to a person": the conversation (a new one of `create`'s fields
    when there is none yet) waits for a person."""
    if conversation is None:
        conversation = Conversation.objects.create(channel=Conversation.Channel.WIDGET, **create)
        webhook_events.conversation_created(conversation)
    handoff_request(conversation=conversation, reason="button")
    return conversation


def typing(*, conversation_id, who: str, name: str = "") -> None:
    """Someone is typing (not stored). `who` is "visitor" (only agents hear it) or "agent"."""
    events.publish(get_redis(), str(conversation_id), {"type": "typing", "from": who, "name": name},
                   audience=events.AGENTS if who == "visitor" else events.ALL)


def handoff_spec(*, tenant, channel: str, locale: str = "") -> dict:
    """What the CPU tier's "asks for a person in words" check needs, for the request's
    spec: the tenant's patterns (off for the REST API, which has no one to hand over to)
    and what the assistant then says: the tenant's text while someone can take the
    conversation, else one that promises nobody (out of business hours or with no agent
    online: tandem.hours.texts, in the visitor's `locale`), beside the offline form."""
    if channel != Conversation.Channel.WIDGET:
        return {"handover_patterns": handover.OFF}
    text = tenant.handover_text
    if tenant.handover_patterns.strip() != handover.OFF or tenant.handover_ungrounded:
        if assignment.unreachable(tenant_id=tenant.pk):
            text = hours_texts.unavailable_text(locale)
    return {"handover_patterns": tenant.handover_patterns, "handover_text": text,
            "handover_ungrounded": tenant.handover_ungrounded}
