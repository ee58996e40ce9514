"""The agent socket, `/ws/agent/<tenant slug>/<conversation id>/`: the console's live
transcript of one conversation handed to a person (docs/protocol.md).

Signed in by the console's session (AuthMiddlewareStack, same-origin only), and resolved
through tenants.membership like every console page: a tenant that is not the person's,
or a conversation that is not the tenant's, is refused exactly as a missing one (close
4404), and a role without Can.INBOX is closed 4403. Thin: it forwards the conversation's
live events (tandem.handoff.events), tells others when the agent types, and streams a
suggested reply (`suggest`, tandem.handoff.drafts) into the agent's reply box, never to the
visitor; replies, notes, claims, assignments and resolves are the inbox's POSTs
(tandem.handoff.views). An open socket is its agent's presence heartbeat (tandem.handoff.assignment)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth

from inference.wire import reader
from inference.wire.connections import async_redis
from tandem.chat import services
from tandem.chat.models import Conversation
from tandem.chat.replies import ReplyFollower
from tandem.chat.validation import InvalidInput
from tandem.console import access_events
from tenants import membership
from tenants.membership import Can

from . import assignment, drafts, events, states

log = logging.getLogger(__name__)
SessionStore = import_module(settings.SESSION_ENGINE).SessionStore
CLOSE_NOT_FOUND, CLOSE_FORBIDDEN, CLOSE_UNAUTHORIZED = 4404, 4403, 4401
MAX_FRAME_BYTES = 4096


def _resolve(user, slug, conversation_id) -> tuple[str, str, object]:
    """(conversation id, the agent's display name, the tenant), or NotVisible / NotAllowed."""
    access = membership.tenant_access(user=user, slug=slug, need=Can.VIEW)
    conv = membership.tenant_object(access, Conversation.objects.all(), what="conversation", pk=conversation_id)
    access.require(Can.INBOX)
    assignment.presence_seen(tenant=access.tenant, agent=user)
    return str(conv.pk), assignment.display_name(user), access.tenant


def _access_verdict(session_key: str, user_id: int, slug: str) -> tuple[int, str, str] | None:
    """None while the session still signs this person in and their role has the inbox;
    else how the socket closes."""
    store = SessionStore(session_key)
    user = auth.get_user(SimpleNamespace(session=store))  # checks the session and its auth hash
    if not user.is_authenticated or user.pk != user_id:
        return CLOSE_UNAUTHORIZED, "signed_out", "You were signed out."
    try:
        membership.tenant_access(user=user, slug=slug, need=Can.INBOX)
    except (membership.NotAllowed, membership.NotVisible):
        return CLOSE_FORBIDDEN, "forbidden", "Your role may no longer use the inbox."
    return None


def _draft(user, tenant, conversation_id):
    """drafts.draft_request, for a person whose role still has the inbox: the role is read
    again, as every console page reads it, since it may have changed after connect."""
    membership.tenant_access(user=user, slug=tenant.slug, need=Can.INBOX)
    return drafts.draft_request(tenant=tenant, conversation_id=conversation_id, agent=user)


class AgentSocket(AsyncWebsocketConsumer):
    """What the console's agent sockets share (AgentConsumer below, and InboxFeedConsumer
    in tandem.handoff.inbox_feed): signed in, resolved through tenants.membership or
    refused, their person's access watched, and one stream of their own followed. Each
    one's connect is `_open`, the mark of its own stream, then `_start`."""

    channel_layer_alias = "tandem-consumers-use-no-layer"

    async def _open(self, resolve, *, missing: tuple[str, str]):
        """`resolve(user)` (in a thread) for a signed-in person, after their access stream
        is marked: its result, or None once the socket was refused (a NotVisible says
        `missing`, an error code and its text)."""
        self.task, self.access_task, self.redis = None, None, None
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse(CLOSE_UNAUTHORIZED, "not_signed_in", "Sign in to the console first.")
            return None
        self.user, self.redis = user, async_redis()
        # Where to follow the person's access changes from, read before their access is:
        # a change that lands after this read closes the socket (access_events).
        self.access_mark = await reader.last_id(self.redis, access_events.key(user.pk))
        try:
            return await database_sync_to_async(resolve)(user)
        except membership.NotAllowed:
            await self._refuse(CLOSE_FORBIDDEN, "forbidden", "Your role may not use the inbox.")
        except membership.NotVisible:
            await self._refuse(CLOSE_NOT_FOUND, *missing)
        return None

    async def _start(self, follow, after: str) -> None:
        """Accept the handshake, then tail the socket's own stream (`follow(after)`) and its
        person's access stream, each from the mark read before the accept: an event (a
        claim, a message) that lands the moment the client is connected is delivered,
        never lost between the accept and the first read."""
        await self.accept()
        self.task = asyncio.create_task(follow(after))
        self.access_task = asyncio.create_task(self._watch_access(self.access_mark))

    async def _refuse(self, code: int, error: str, text: str):
        """Accept only to say why, then close (a refused handshake carries no reason)."""
        await self.accept()
        await self._close(code, error, text)

    async def _close(self, code: int, error: str, text: str):
        await self.send(text_data=json.dumps({"type": "error", "code": error, "message": text, "detail": text}))
        await self.close(code=code)

    async def disconnect(self, code):
        for task in (self.task, self.access_task):
            if task:
                task.cancel()

    async def _watch_access(self, mark: str):
        """Close the socket the moment its person is signed out, loses the tenant, or
        loses the inbox role: a change is written to their access stream, and the
        socket checks again (the role as every console page reads it)."""
        follower = reader.loop_reader().follow(access_events.key(self.user.pk), after=mark)
        try:
            while True:
                entries = await follower.next(timeout=60)
                if not entries:
                    continue
                session_key = self.scope["session"].session_key or ""
                if any(f.get(b"signed_out", b"").decode() == session_key for _, f in entries):
                    verdict = (CLOSE_UNAUTHORIZED, "signed_out", "You were signed out.")
                else:
                    verdict = await database_sync_to_async(_access_verdict)(
                        session_key, self.user.pk, self.tenant.slug)
                if verdict is not None:
                    self.task.cancel()
                    await self._close(*verdict)
                    return
        except asyncio.CancelledError:
            pass
        finally:
            follower.close()


class AgentConsumer(AgentSocket):
    """One conversation, live: its events, the agent's typing, suggested replies."""

    async def connect(self):
        self.conversation_id, self.draft, self.typed_at = None, None, 0.0
        kw = self.scope["url_route"]["kwargs"]
        resolved = await self._open(lambda user: _resolve(user, kw["slug"], kw["conversation_id"]),
                                    missing=("conversation_not_found", "No such conversation."))
        if resolved is None:
            return
        self.conversation_id, self.name, self.tenant = resolved
        events_mark = await events.last_id(self.redis, self.conversation_id)
        await self._start(self._forward, events_mark)

    async def disconnect(self, code):
        if self.draft:
            self.draft.cancel()
        await super().disconnect(code)

    async def _forward(self, after: str):
        try:
            async for event in events.tail(self.redis, self.conversation_id, after=after):
                if event["type"] == "idle":
                    # An open socket keeps its agent online (the write is throttled there).
                    await database_sync_to_async(assignment.presence_seen)(
                        tenant=self.tenant, agent=self.user)
                else:
                    event.pop("audience", None)
                    await self.send(text_data=json.dumps(event))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("agent socket for %s failed", self.conversation_id)
            await self.close(code=1011)

    async def receive(self, text_data=None, bytes_data=None):
        if self.task is None or not text_data or len(text_data) > MAX_FRAME_BYTES:
            return
        try:
            frame = json.loads(text_data)
        except ValueError:
            return
        if isinstance(frame, dict) and frame.get("type") == "suggest":
            if self.draft is None or self.draft.done():  # one draft at a time
                self.draft = asyncio.create_task(self._suggest())
            return
        if isinstance(frame, dict) and frame.get("type") == "typing":
            now = time.monotonic()
            if now - self.typed_at >= 2.0:
                self.typed_at = now
                await database_sync_to_async(states.typing)(
                    conversation_id=self.conversation_id, who="agent", name=self.name)

    async def _suggest(self):
        """Start a draft and forward its tokens as `draft` frames, then `draft_end` (or
        `draft_error`). A disconnect cancels the draft: nobody would see it."""
        try:
            msg, served = await database_sync_to_async(_draft)(self.user, self.tenant, self.conversation_id)
        except (membership.NotAllowed, membership.NotVisible):
            await self.send(text_data=json.dumps({"type": "draft_error", "code": "forbidden",
                                                  "detail": "Your role may no longer use the inbox."}))
            return
        except (states.NotYours, InvalidInput, services.QuotaRefused, services.NotFound) as exc:
            await self.send(text_data=json.dumps({"type": "draft_error", "code": getattr(exc, "code", "refused"),
                                                  "detail": str(exc)}))
            return
        mid = str(msg.pk)
        await self.send(text_data=json.dumps({"type": "draft_start", "message": mid}))
        follower = ReplyFollower(mid, served=served)
        try:
            async for rec in follower.records():
                if rec["type"] == "token":
                    frame = {"type": "draft", "message": mid, "index": rec["index"], "text": rec["text"]}
                elif rec["type"] == "end":
                    frame = {"type": "draft_end", "message": mid, "finish_reason": rec["finish_reason"]}
                elif rec["type"] == "error":
                    frame = {"type": "draft_error", "message": mid, "code": rec["code"], "detail": rec["message"]}
                else:
                    continue
                await self.send(text_data=json.dumps(frame))
        except asyncio.CancelledError:
            await follower.cancel()
            raise
        except Exception:  # Redis went away: say so, rather than leave the agent waiting
            log.exception("draft %s failed", mid)
            await self.send(text_data=json.dumps({"type": "draft_error", "message": mid, "code": "internal_error",
                                                  "detail": "The draft failed; write the reply yourself."}))
