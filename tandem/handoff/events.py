"""A conversation's live events, for the people in it (a web-tier concept: the pipeline
reports outcomes, it never speaks to people): the visitor's widget socket and the agents'
console sockets tail `tandem:conv:<id>:events` (a Redis Stream, as replies'
tokens are: never the channel layer, which drops at capacity).

An event is a flat JSON object with a `type`: `message` (a visitor's message held for
a person, an agent's reply or an internal note), `handoff` (the conversation's owner
changed) or `typing`. `audience` is "all", or "agents" for what the visitor never sees
(notes, the visitor's own typing echoed to agents). Readers that reconnect start again
from the transcript (the database) and this stream's last id read before it, so an event
may arrive twice: messages carry their id for that."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import redis

from inference.wire import keys, reader

MAXLEN = 500  # a conversation's recent events; the transcript is in the database
TTL_S = 24 * 3600
ALL, AGENTS = "all", "agents"
INBOX_MAXLEN = 200  # the tenant's inbox feed: what an agent's notifications need, from now on


def inbox_feed_key(tenant_id) -> str:
    """The tenant's inbox feed: one entry per hand-over, assignment and visitor message
    of a conversation with a person (tandem.handoff.inbox_feed), for the agents'
    notifications on every console page, whichever conversation they have open."""
    return f"tandem:tenant:{tenant_id}:inbox"


def publish(client: redis.Redis, conversation_id: str, event: dict[str, Any], *, audience: str = ALL,
            inbox: tuple[Any, dict[str, Any]] | None = None) -> None:
    """`event` on the conversation's stream; `inbox` (tenant id, entry or None) adds the
    entry to the tenant's inbox feed in the same round trip."""
    key = keys.conversation_events(str(conversation_id))
    pipe = client.pipeline(transaction=False)
    pipe.xadd(key, {"e": json.dumps({**event, "audience": audience})}, maxlen=MAXLEN, approximate=True)
    pipe.expire(key, TTL_S)
    if inbox is not None and inbox[1]:
        feed = inbox_feed_key(inbox[0])
        pipe.xadd(feed, {"e": json.dumps(inbox[1])}, maxlen=INBOX_MAXLEN, approximate=True)
        pipe.expire(feed, TTL_S)
    pipe.execute()


async def last_id(aredis, conversation_id: str) -> str:
    """The id of the newest event, to tail from after reading the transcript."""
    return await reader.last_id(aredis, keys.conversation_events(str(conversation_id)))


async def tail(aredis, conversation_id: str, *, after: str = "$", idle_s: float = 5.0) -> AsyncIterator[dict]:
    """The conversation's events after `after` ("$": from now on), forever (the caller
    cancels), through the event loop's one stream reader. Yields {"type": "idle"} when
    `idle_s` passes with none: a silence of any length is only a silence."""
    key = keys.conversation_events(str(conversation_id))
    if after == "$":
        after = await last_id(aredis, conversation_id)
    follower = reader.loop_reader().follow(key, after=after)
    try:
        while True:
            entries = await follower.next(idle_s)
            if not entries:
                yield {"type": "idle"}
            for _, fields in entries:
                yield json.loads(fields[b"e"])
    finally:
        follower.close()
