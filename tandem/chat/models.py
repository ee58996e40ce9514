"""Chat records: conversations and their messages. An assistant message's UUID is the
request id that follows a request through every tier (stream, KV and request keys in
Redis are derived from it)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models, transaction
from django.db.models import F


class Conversation(models.Model):
    class Channel(models.TextChoices):
        WIDGET = "widget"
        API = "api"

    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="conversations")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    # Who the conversation belongs to. A widget visitor is the browser's random id; a
    # site's signed-in user proved with the tenant's identity hash is `user_id` with
    # `user_verified` (tandem.chat.visitors), and owns the conversation on any device.
    visitor_id = models.CharField(max_length=128, blank=True, default="")
    user_id = models.CharField(max_length=128, blank=True, default="")
    user_verified = models.BooleanField(default=False)
    user_name = models.CharField(max_length=200, blank=True, default="")
    user_email = models.CharField(max_length=254, blank=True, default="")
    # Where and with what the visitor started it, as their widget socket said when it
    # connected (tandem.chat.visitors): the inbox's side panel shows them.
    page_url = models.CharField(max_length=2000, blank=True, default="")
    user_agent = models.CharField(max_length=400, blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Who answers: the assistant, or a person (tandem.handoff.states changes it, atomically).
    class Handoff(models.TextChoices):
        BOT = "bot"
        PENDING_HUMAN = "pending_human"
        HUMAN = "human"
        RESOLVED = "resolved"

    handoff = models.CharField(max_length=16, choices=Handoff.choices, default=Handoff.BOT)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="assigned_conversations")
    handoff_reason = models.CharField(max_length=16, blank=True, default="")  # button | words | agent | ungrounded
    handoff_at = models.DateTimeField(null=True, blank=True)  # when it last left the bot
    claimed_at = models.DateTimeField(null=True, blank=True)
    first_human_reply_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The last `Message.seq` handed out in this conversation (`allocate_seq`).
    message_seq = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "-updated_at"]), models.Index(fields=["tenant", "handoff"])]

    @property
    def with_person(self) -> bool:
        """A person owns it, or it waits for one: the bot does not answer."""
        return self.handoff in (self.Handoff.PENDING_HUMAN, self.Handoff.HUMAN)

    def __str__(self) -> str:
        return f"conversation {self.id} ({self.tenant_id})"

    def save(self, *args, **kwargs):
        # A full save of a copy read before messages were added would write its stale
        # counter back and hand out the same `Message.seq` twice: only allocate_seq
        # writes it, by an UPDATE of its own.
        if not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [f.name for f in self._meta.concrete_fields
                                       if not f.primary_key and f.name != "message_seq"]
        super().save(*args, **kwargs)


def allocate_seq(conversation_id, n: int = 1) -> int:
    """The first of `n` new message numbers of the conversation, strictly above every one
    handed out before. One conditional UPDATE of the conversation's counter: the row lock
    (PostgreSQL) or the write lock (SQLite) orders concurrent writers, so two messages
    never share a number, whatever their clocks say."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(message_seq=F("message_seq") + n)
        last = Conversation.objects.filter(pk=conversation_id).values_list("message_seq", flat=True).get()
    return last - n + 1


class MessageQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        by_conversation: dict = {}
        for m in objs:
            if not m.seq:
                by_conversation.setdefault(m.conversation_id, []).append(m)
        for cid, rows in by_conversation.items():
            first = allocate_seq(cid, len(rows))
            for i, m in enumerate(rows):  # in the order given: the order they were said in
                m.seq = first + i
        return super().bulk_create(objs, *args, **kwargs)


class Message(models.Model):
    TENANT_PATH = "conversation__tenant"  # how tenants.access scopes a message

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        AGENT = "agent"  # a person of the tenant, answering in the inbox (`author`)
        NOTE = "note"  # an agent's internal note: never shown to the visitor, never in a prompt
        DRAFT = "draft"  # a reply the assistant suggested to an agent (tandem.handoff.drafts): the agent's only

    class Status(models.TextChoices):
        QUEUED = "queued"
        PREFILLING = "prefilling"
        DECODING = "decoding"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")  # an agent's message or note
    author_name = models.CharField(max_length=150, blank=True, default="")  # as the visitor sees it
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DONE)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=32, blank=True, default="")
    # An assistant reply whose request was offered the tenant's actions as tools
    # (tandem.actions.offer): only then is a REST reply that starts with a call an action
    # call (tandem.actions.calls), not a /v1/chat/completions client's own tool call.
    # Stored on the row because the reply's end reads that row anyway, and it outlives
    # the request's spec in Redis.
    offered_actions = models.BooleanField(default=False)
    error = models.TextField(blank=True, default="")
    ttft_ms = models.FloatField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The message's place in its conversation (allocate_seq): strictly increasing in the
    # order messages were written. Transcripts are read in this order, never by
    # created_at, which ties (messages of one request, a coarse clock) and can run
    # backwards between hosts.
    seq = models.PositiveBigIntegerField(default=0, editable=False)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        indexes = [models.Index(fields=["conversation", "created_at"]), models.Index(fields=["conversation", "seq"])]

    def save(self, *args, **kwargs):
        if self._state.adding and not self.seq:
            self.seq = allocate_seq(self.conversation_id)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.role} message {self.id}"

    @property
    def is_final(self) -> bool:
        return self.status in {self.Status.DONE, self.Status.FAILED, self.Status.CANCELLED}


class AgentPresence(models.Model):
    """Whether an agent of a tenant takes conversations now (tandem.handoff.assignment): they
    said so (`status`), and one of their console pages or agent sockets was heard from
    lately (`seen_at`), so a closed laptop does not stay "online"."""

    class Status(models.TextChoices):
        ONLINE = "online"
        AWAY = "away"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="agent_presence")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.AWAY)
    seen_at = models.DateTimeField(null=True, blank=True)
    last_assigned_at = models.DateTimeField(null=True, blank=True)  # round-robin's turn order

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="uniq_agent_presence")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant_id}: {self.status}"


class OfflineMessage(models.Model):
    """What a visitor left in the widget's offline form when no agent was online: an
    e-mail address to answer and a message (docs/handoff.md), shown in the inbox."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="offline_messages")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="offline_messages")
    email = models.EmailField(max_length=254)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The agent's answer, sent to `email` from the inbox (tandem.handoff.offline.offline_message_answer).
    answer = models.TextField(blank=True, default="")
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"offline message from {self.email} ({self.tenant_id})"
