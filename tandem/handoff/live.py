"""The widget socket's side of a hand-over to a person (docs/protocol.md, docs/handoff.md):
the `handoff` and `typing` frames a visitor sends, and the conversation's live events
(`tandem.handoff.events`) forwarded to them as `agent_message`, `handoff` and `typing`
frames. The consumer owns one `WidgetLive`; it watches the conversation the socket last
sent to or restored, which the visitor was checked to own."""

from __future__ import annotations

import asyncio
import logging
import time

from channels.db import database_sync_to_async

from tandem.chat import services
from tandem.chat.validation import InvalidInput

from . import assignment, events, offline, states

log = logging.getLogger(__name__)
TYPING_EVERY_S = 2.0  # at most one typing event a visitor sends on, per this many seconds


def _ask(*, tenant, visitor, conversation_id) -> tuple[str, dict]:
    conv = (services.conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
            if conversation_id else None)
    conv = states.visitor_asks_for_person(conversation=conv,
                                          create={"tenant": tenant, **visitor.conversation_fields()})
    return str(conv.pk), assignment.state_event(state=conv.handoff, agent=conv.assignee, tenant_id=tenant.pk)


def _leave(*, tenant, visitor, conversation_id, email, text) -> None:
    conv = services.conversation_get(tenant=tenant, conversation_id=conversation_id, visitor=visitor)
    offline.offline_message_leave(conversation=conv, email=email, text=text)


def widget_frame(conversation_id: str, event: dict) -> dict | None:
    """An event as the visitor's frame, or None for what they do not see."""
    if event.get("audience") != events.ALL:
        return None
    kind = event.get("type")
    if kind == "message" and event.get("role") == "agent":
        return {"type": "agent_message", "conversation": conversation_id, "id": event["id"],
                "text": event["text"], "author": event["author"],
                **({"attachments": event["attachments"]} if event.get("attachments") else {})}
    if kind == "handoff":
        frame = {"type": "handoff", "conversation": conversation_id, "state": event["state"],
                 "agent": event.get("agent", "")}
        # Nobody can take it now: the offline form, and out of hours when they are back.
        frame.update({k: event[k] for k in ("offline", "closed", "back_at") if event.get(k)})
        return frame
    if kind == "typing" and event.get("from") == "agent":
        return {"type": "typing", "conversation": conversation_id, "name": event.get("name", "")}
    if kind == "action":  # an action's status line (tandem.actions); the call itself is for agents
        return {"type": "action", "conversation": conversation_id, "message": event["message"],
                "state": event["state"], "text": event["text"]}
    if kind == "reply":  # the reply continuing after an action: the socket follows it
        return {"type": "start", "conversation": conversation_id, "message": event["message"]}
    return None


class WidgetLive:
    def __init__(self, consumer):
        self.consumer = consumer
        self.conversation_id: str | None = None
        self.task: asyncio.Task | None = None
        self.typed_at = 0.0

    async def mark(self, conversation_id) -> str:
        """Where to watch from, read before the transcript is."""
        return await events.last_id(self.consumer.redis, conversation_id)

    async def mark_before_send(self, conversation_id: str | None) -> str:
        """Where to watch from once a message to `conversation_id` is sent: everything of
        a new conversation ("0-0"), what comes after the newest event of another one, and
        nothing new to read for the one this socket already watches."""
        if conversation_id is None:
            return "0-0"
        if conversation_id == self.conversation_id and self.task and not self.task.done():
            return "$"  # watched already: watch() keeps the running task
        if len(conversation_id) > 64:
            return "$"  # not an id: the submission refuses it
        return await self.mark(conversation_id)

    def watch(self, conversation_id: str, after: str = "$") -> None:
        if conversation_id == self.conversation_id and self.task and not self.task.done():
            return
        self.stop()
        self.conversation_id = conversation_id
        self.task = asyncio.create_task(self._forward(conversation_id, after))

    def stop(self) -> None:
        if self.task:
            self.task.cancel()
        self.task = None

    async def _forward(self, conversation_id: str, after: str):
        try:
            async for event in events.tail(self.consumer.redis, conversation_id, after=after):
                frame = widget_frame(conversation_id, event)
                if frame:
                    await self.consumer._send(frame)
                    if frame["type"] == "start":
                        self.consumer._follow(frame["message"], after=-1, served=True)
        except asyncio.CancelledError:
            pass
        except Exception:  # Redis went away: the widget restores from history on reconnect
            log.exception("watching conversation %s failed", conversation_id)

    async def held(self, exc: states.HeldForPerson, after: str = "$") -> None:
        """The visitor's message went to the inbox: acknowledge it (no reply follows)."""
        cid = str(exc.message.conversation_id)
        await self.consumer._send({"type": "conversation", "id": cid})
        await self.consumer._send({"type": "received", "conversation": cid, "message": str(exc.message.pk)})
        self.watch(cid, after)

    async def on_handoff(self, frame: dict) -> None:
        """`{"type": "handoff", "conversation": id | null}`: the visitor asks for a person."""
        cid = frame.get("conversation")
        if cid is not None and not isinstance(cid, str):
            await self.consumer._error("invalid_frame", "conversation must be an id or null.")
            return
        if not await self.consumer._key_still_works():
            return
        c = self.consumer
        try:
            cid, event = await database_sync_to_async(_ask)(tenant=c.api_key.tenant, visitor=c.visitor,
                                                            conversation_id=cid)
        except services.NotFound as exc:
            await c._error(exc.code, str(exc))
            return
        await c._send({"type": "conversation", "id": cid})
        # Watched from after the events this request published, which the frame sums up.
        await c._send(widget_frame(cid, {**event, "audience": events.ALL}))
        self.watch(cid)

    async def on_offline(self, frame: dict) -> None:
        """`{"type": "offline", "conversation": id, "email", "text"}`: the offline form."""
        cid = frame.get("conversation")
        if not isinstance(cid, str):
            await self.consumer._error("invalid_frame", "conversation must be an id.")
            return
        if not await self.consumer._key_still_works():
            return
        c = self.consumer
        try:
            await database_sync_to_async(_leave)(tenant=c.api_key.tenant, visitor=c.visitor, conversation_id=cid,
                                                 email=frame.get("email"), text=frame.get("text"))
        except (services.NotFound, InvalidInput) as exc:
            await c._error(exc.code, str(exc))
            return
        await c._send({"type": "offline_received", "conversation": cid})

    async def on_typing(self, frame: dict) -> None:
        """`{"type": "typing", "conversation": id}`: told to agents, at most every 2 s."""
        if frame.get("conversation") != self.conversation_id or self.conversation_id is None:
            return  # only the conversation this socket was checked to own
        now = time.monotonic()
        if now - self.typed_at < TYPING_EVERY_S:
            return
        self.typed_at = now
        await database_sync_to_async(states.typing)(conversation_id=self.conversation_id, who="visitor")

