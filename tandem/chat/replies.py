"""Following one reply from the web tier: tail its Redis Stream, keep the listener lease
alive, and give up with a clear error when the stream goes silent for too long. Used by
the websocket consumer and the REST views, so both surfaces behave the same."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from django.conf import settings

from inference.pipeline import api
from inference.wire import streams
from tandem.db_pool import pooled_sync_to_async

EXPIRED = streams.error_record(
    "stream_expired", "This reply's stream has expired; its final text is in the conversation's transcript.")


def _give_up(request_id: str, *, served: bool, stalled: bool) -> bool:
    """Cancel and fail a request that went silent. False when it was already final (its
    stream then holds nothing more to read: it expired)."""
    api.cancel(request_id=request_id)
    if stalled:
        code, text = "timeout", "The reply stopped arriving; please retry."
    else:
        code = "timeout" if served else "no_worker"
        text = "No worker picked up the request in time; please retry later."
    return api.fail(request_id=request_id, code=code, message=text)


class ReplyFollower:
    """Records of one reply, in order, until its end or error record, read through the
    web process's one stream reader.

    Silence is bounded: when no record comes for TANDEM_QUEUE_TIMEOUT_S before the first
    token (no worker took the request), or for TANDEM_STALL_TIMEOUT_S after it (the worker
    generating it died), the request is cancelled and failed, and its error record ends
    the stream like any other. A reply that was already final and whose stream expired
    gets a `stream_expired` error."""

    def __init__(self, request_id: str, *, served: bool = True, after_index: int = -1):
        self.request_id, self.served = request_id, served
        self.finished = False  # an end or error record was seen
        self._batches = streams.tail(request_id, after_index=after_index)
        self._heard_at = time.monotonic()
        self._seen_token = after_index >= 0
        self._gave_up = False

    async def batches(self) -> AsyncIterator[list[dict]]:
        """The records in the groups they arrived in (consecutive tokens of a busy reply
        often arrive together: the socket sends them as one frame)."""
        async for batch in self._batches:
            now = time.monotonic()
            if batch[0]["type"] != "idle":
                self._heard_at = now
            elif self._gave_up or now - self._heard_at <= self._patience():
                continue
            else:
                self._gave_up = True
                failed = await pooled_sync_to_async(_give_up)(self.request_id, served=self.served,
                                                              stalled=self._seen_token)
                # When it failed the request, its error record arrives through the stream next.
                if failed:
                    continue
                batch = [EXPIRED]
            self._seen_token = self._seen_token or any(r["type"] == "token" for r in batch)
            self.finished = batch[-1]["type"] in streams.TERMINAL
            yield batch
            if self.finished:
                await self._batches.aclose()
                return

    async def records(self) -> AsyncIterator[dict]:
        async for batch in self.batches():
            for rec in batch:
                yield rec

    def _patience(self) -> float:
        return settings.TANDEM_STALL_TIMEOUT_S if self._seen_token else settings.TANDEM_QUEUE_TIMEOUT_S

    async def cancel(self) -> None:
        if not self.finished:
            await pooled_sync_to_async(api.cancel)(request_id=self.request_id)
