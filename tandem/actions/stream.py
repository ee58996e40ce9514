"""A tool call's tokens are not for the visitor: the widget socket passes a reply's
frames through a CallHider, which holds tokens while the text so far is or may become
"<tool_call>", lets them go once it cannot, and at the reply's end drops a call's tokens
(a call cut short by the token budget too) and says `finish_reason: "tool_calls"` (the visitor then reads the call's status line,
an `action` frame; agents read the call in the transcript). Under tools the grammar
lets a text reply never start with "<", so only a call is held to its end.

A REST conversation's reply is read through a TurnFollower: the same hider per pass,
and the passes after a call followed to the one that answers in text."""

from __future__ import annotations

import asyncio

from inference.wire.connections import async_redis
from tandem.api.tool_calls import CALL_OPEN
from tandem.chat.replies import ReplyFollower
from tandem.db_pool import pooled_sync_to_async
from tandem.handoff import events

from . import conf
from .selectors import continuation_of


class CallHider:
    def __init__(self):
        self.held: list[dict] = []
        self.text = ""
        self.decided = False  # text: frames pass straight through

    def frames(self, frames: list[dict]) -> list[dict]:
        out: list[dict] = []
        for f in frames:
            if self.decided or f["type"] not in ("token", "end"):
                out.append(f)
                continue
            if f["type"] == "token":
                self.held.append(f)
                self.text += f["text"]
                start = self.text.lstrip()
                if CALL_OPEN.startswith(start) or start.startswith(CALL_OPEN):
                    continue
                out += self.held
            else:
                if self.text.strip().startswith(CALL_OPEN):
                    # A call (one cut short too: calls.py settles it as a failed call).
                    f = {**f, "finish_reason": "tool_calls"}
                else:
                    out += self.held  # text after all
                out.append(f)
            self.held, self.decided = [], True
        return out


class TurnFollower:
    """A REST conversation reply's records across its passes, for the REST views (the
    interface of tandem.chat.replies.ReplyFollower: `records()`, `cancel()`): each pass
    through a CallHider; a pass that was a call is not shown (the call and its result
    are transcript entries), the follower waits for its continuation (continuation.py;
    after a person's approval, when the action needs one) and goes on with that reply,
    until one ends in text. That end carries the usage of every pass together and its
    own sources.

    The wait for a continuation is bounded by TANDEM_ACTIONS_REST_WAIT_S (an approval
    nobody gives): then a `timeout` error record ends it, and the answer arrives in the
    conversation's transcript when the call is decided. One whose reply the tenant's
    quota refused ends with a `continuation_refused` error record."""

    def __init__(self, request_id: str, *, conversation_id: str, served: bool = True):
        self.request_id, self.conversation_id, self.served = request_id, str(conversation_id), served
        self.finished = False
        self._current = None  # the ReplyFollower of the pass being read

    async def records(self):
        usage: list[dict] = []
        request_id = self.request_id
        while True:
            self._current = follower = ReplyFollower(request_id, served=self.served)
            hider, end = CallHider(), None
            async for rec in follower.records():
                for f in hider.frames([rec]):
                    if f["type"] == "end":
                        end = f
                    else:
                        yield f
            if end is None:  # an error record ended it (yielded above)
                self.finished = True
                return
            usage.append(end.get("usage") or {})
            if end.get("finish_reason") != "tool_calls":
                self.finished = True
                yield {**end, "usage": _summed(usage)}
                return
            next_id, error = await self._continuation(request_id)
            if next_id is None:
                self.finished = True
                yield error
                return
            request_id = next_id

    async def _continuation(self, message_id: str) -> tuple[str | None, dict]:
        """The continuation of the call `message_id` (the conversation's events wake the
        wait: a `reply` event when one is submitted, an `action` event when the call's
        state moves), or (None, the error record that ends the answer)."""
        aredis = async_redis()
        after = await events.last_id(aredis, self.conversation_id)  # before the read: nothing is missed
        lookup = pooled_sync_to_async(continuation_of)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + conf.rest_wait_s()
        tail = events.tail(aredis, self.conversation_id, after=after, idle_s=5.0)
        try:
            while True:
                next_id, settled = await lookup(message_id=message_id)
                if next_id is not None:
                    return next_id, {}
                if settled:
                    return None, _error("continuation_refused", "The action's result is in the conversation; "
                                        "the tenant's quota refused the reply after it.")
                if loop.time() >= deadline:
                    return None, _error("timeout", "The action is still waiting (for a person's approval, or to "
                                        "run); its result and the reply after it will be in the conversation's "
                                        "messages.")
                await anext(tail)  # an event, or an idle tick every 5 s: read the call again
        finally:
            await tail.aclose()

    async def cancel(self) -> None:
        if self._current is not None:
            await self._current.cancel()


def _summed(usages: list[dict]) -> dict:
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    last = usages[-1]
    return {**last, **{k: sum(int(u.get(k) or 0) for u in usages) for k in keys if k in last}}


def _error(code: str, message: str) -> dict:
    return {"type": "error", "code": code, "message": message}
