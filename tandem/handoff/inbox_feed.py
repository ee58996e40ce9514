"""The agent's inbox feed socket, `/ws/agent/<tenant slug>/`: what an agent's
notifications need on every console page of the tenant (static/console/inbox_notify.js),
whichever conversation they have open, from the tenant's inbox feed
(tandem.handoff.events.inbox_feed_key) as tandem.handoff.states writes it:

    {"type": "handover", "conversation", "visitor", "url", "id"}  a conversation waits for a person
    {"type": "assigned", "conversation", "visitor", "url", "id"}  it was given to this agent by someone else
    {"type": "message", "conversation", "visitor", "text", "url", "id"}  the visitor wrote in one of theirs

`id` is the feed entry's, the same for every agent and tab (a page uses it to notify
once). Signed in and checked like the conversation socket (tandem.handoff.agent_socket,
whose access watch it shares: signed out, removed or demoted, it closes at once); an
open feed is its agent's presence heartbeat, as an open console page is."""

from __future__ import annotations

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from django.urls import reverse

from inference.wire import reader
from tenants import membership
from tenants.membership import Can

from . import assignment, events
from .agent_socket import AgentSocket

log = logging.getLogger(__name__)
IDLE_S = 20.0


def _resolve(user, slug):
    access = membership.tenant_access(user=user, slug=slug, need=Can.VIEW)
    access.require(Can.INBOX)
    assignment.presence_seen(tenant=access.tenant, agent=user)
    return access.tenant


def frame_for(entry_id: str, entry: dict, *, user_id: int, slug: str) -> dict | None:
    """The notification frame an agent gets for a feed entry, or None (not for them)."""
    kind, mine = entry.get("type"), entry.get("assignee") == user_id
    if entry.get("by") == user_id:
        return None  # their own claim or assignment
    if kind == "handoff" and entry.get("state") == "pending_human":
        out = {"type": "handover"}
    elif kind == "handoff" and entry.get("state") == "human" and mine:
        out = {"type": "assigned"}
    elif kind == "message" and mine:
        out = {"type": "message", "text": entry.get("text", "")}
    else:
        return None
    cid = entry.get("conversation", "")
    return {**out, "id": entry_id, "conversation": cid, "visitor": entry.get("visitor", ""),
            "url": reverse("console:inbox_conversation", kwargs={"slug": slug, "conversation_id": cid})}


class InboxFeedConsumer(AgentSocket):
    """The conversation socket's sign-in, access watch and close, with a feed instead of
    a transcript: it takes no frames."""

    async def connect(self):
        slug = self.scope["url_route"]["kwargs"]["slug"]
        self.tenant = await self._open(lambda user: _resolve(user, slug),
                                       missing=("tenant_not_found", "No such tenant."))
        if self.tenant is None:
            return
        feed_mark = await reader.last_id(self.redis, events.inbox_feed_key(self.tenant.pk))
        await self._start(self._feed, feed_mark)
        await self.send(text_data=json.dumps({"type": "ready"}))

    async def _feed(self, after: str):
        follower = reader.loop_reader().follow(events.inbox_feed_key(self.tenant.pk), after=after)
        try:
            while True:
                entries = await follower.next(IDLE_S)
                if not entries:
                    await database_sync_to_async(assignment.presence_seen)(tenant=self.tenant, agent=self.user)
                for entry_id, fields in entries:
                    frame = frame_for(entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id),
                                      json.loads(fields[b"e"]), user_id=self.user.pk, slug=self.tenant.slug)
                    if frame:
                        await self.send(text_data=json.dumps(frame))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("inbox feed of tenant %s failed", self.tenant.pk)
            await self.close(code=1011)
        finally:
            follower.close()

    async def receive(self, text_data=None, bytes_data=None):
        return  # the feed only speaks
