"""Following one reply from the web tier: tail its Redis Stream, keep the listener lease
alive, and give up with a clear error when no worker picks the request up in time.
Used by the REST views (the websocket consumer forwards records as they come)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings

from inference import keys, streams
from inference import services as pipeline
from inference.services import LISTENER_TTL_S


def _give_up(request_id: str, served: bool) -> None:
    pipeline.request_cancel(request_id=request_id)
    pipeline.request_fail(request_id=request_id, code="timeout" if served else "no_worker",
                          message="No worker picked up the request in time; please retry later.")


class ReplyFollower:
    def __init__(self, aredis, request_id: str, *, served: bool = True, after_index: int = -1):
        self.aredis, self.request_id, self.served = aredis, request_id, served
        self.finished = False  # an end or error record was seen
        self._records = streams.tail(aredis, request_id, after_index=after_index)
        self._deadline = time.monotonic() + settings.TANDEM_QUEUE_TIMEOUT_S
        self._seen_token = after_index >= 0
        self._gave_up = False
        self._last_touch = 0.0

    async def records(self) -> AsyncIterator[dict]:
        """Token, status, end and error records, in order, until end or error."""
        async for rec in self._records:
            now = time.monotonic()
            if now - self._last_touch > LISTENER_TTL_S / 3:
                await self.aredis.set(keys.listener(self.request_id), "1", ex=LISTENER_TTL_S)
                self._last_touch = now
            kind = rec["type"]
            if kind == "idle":
                if not self._seen_token and not self._gave_up and now > self._deadline:
                    self._gave_up = True
                    await sync_to_async(_give_up)(self.request_id, self.served)
                continue
            if kind == "token":
                self._seen_token = True
            if kind in streams.TERMINAL:
                self.finished = True
            yield rec
            if self.finished:
                return

    async def cancel(self) -> None:
        if not self.finished:
            await sync_to_async(pipeline.request_cancel)(request_id=self.request_id)
