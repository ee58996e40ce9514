"""Publishing a model worker's token records without making its engine loop wait on
Redis: the engine's callbacks put records on an in-memory queue, and one thread sends
whatever accumulated in one pipeline (at 64 streams, one round trip a step, not 64)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import redis

from . import metrics, streams

log = logging.getLogger(__name__)
# Retries over a Redis outage, backing off to a second between tries: long enough for a
# Redis restart (a reply's tokens wait here meanwhile, and go out once it is back).
PUBLISH_RETRY_FOR_S, PUBLISH_RETRY_S, PUBLISH_RETRY_MAX_S = 20.0, 0.25, 1.0


class StreamPublisher:
    """Publishes token records from the decode loop without making it wait on Redis.

    The engine's callbacks only put on an in-memory queue; this thread drains it and
    sends everything that accumulated in one pipeline per request, so at 64 streams a
    step costs one Redis round trip, not 64."""

    def __init__(self, client: redis.Redis):
        self._client = client
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stream-publisher", daemon=True)
        self._thread.start()

    def put(self, request_id: str, record: dict[str, Any], done: threading.Event | None = None) -> None:
        """Queue a record; `done` (if given) is set once it and all before it are in Redis."""
        self._queue.put((request_id, record, done))

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            by_request: dict[str, list[dict]] = {}
            events = []
            for request_id, record, done in batch:
                if request_id is not None:
                    by_request.setdefault(request_id, []).append(record)
                if done is not None:
                    events.append(done)
            self._send(by_request)
            for ev in events:
                ev.set()

    def _send(self, by_request: dict[str, list[dict]]) -> None:
        """One pipeline for the batch, tried again over a short Redis outage: the batch
        may hold a reply's end record, whose loss would leave its readers waiting. (A
        retry after a send that did land repeats records; readers skip repeated token
        indices and stop at the first end.)"""
        give_up_at = time.monotonic() + PUBLISH_RETRY_FOR_S
        attempt = 0
        while True:
            pipe = self._client.pipeline(transaction=False)
            for request_id, records in by_request.items():
                streams.append(pipe, request_id, records)
            try:
                pipe.execute()
                return
            except redis.RedisError:
                if time.monotonic() > give_up_at:
                    # Still unreachable: drop the batch and keep the thread for the next.
                    log.warning("could not publish %d stream(s); dropped", len(by_request), exc_info=True)
                    return
                metrics.RETRIES.labels("publish").inc()
                attempt += 1
                time.sleep(min(PUBLISH_RETRY_MAX_S, PUBLISH_RETRY_S * attempt))  # back off before trying again
