"""Token streams: one Redis Stream per request, `tandem:stream:<request id>`.

Why a Redis Stream and not the channel layer: channels-redis drops messages silently at
capacity, while a stream is a durable, ordered log that a client can re-read from any
point (resume after a reconnect) and that the web tier tails without any worker knowing
who listens.

Records (all values are strings in Redis, decoded here):
  token   index (0-based, dense), text (the detokenized increment), token_id, ts
  status  state (queued | prefilling | decoding), detail
  end     finish_reason, usage (JSON), timings (JSON: ttft_ms from the request's
          enqueueing, duration_ms, prefill_engine_ms: the prefill engine's share of the
          first token, when the request went through the prefill tier)
  error   code, message
A stream is closed by exactly one `end` or `error` record and expires STREAM_TTL_S after
its last write.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import redis

from . import keys

log = logging.getLogger(__name__)
PUBLISH_ATTEMPTS, PUBLISH_RETRY_S = 4, 0.25  # ~1.5 s of retries in all

STREAM_TTL_S = 3600
TERMINAL = {"end", "error"}


def _fields(record: dict[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in record.items():
        out[k] = json.dumps(v) if isinstance(v, (dict, list)) else str(v)
    return out


def decode_record(fields: dict) -> dict[str, Any]:
    rec = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
           for k, v in fields.items()}
    if "index" in rec:
        rec["index"] = int(rec["index"])
    if "token_id" in rec:
        rec["token_id"] = int(rec["token_id"])
    for key in ("usage", "timings"):
        if key in rec:
            rec[key] = json.loads(rec[key])
    return rec


def publish(client: redis.Redis, request_id: str, records: Iterable[dict[str, Any]]) -> None:
    """Append records to one request's stream in one round trip, refreshing its TTL."""
    pipe = client.pipeline(transaction=False)
    append(pipe, request_id, records)
    pipe.execute()


def append(pipe: redis.client.Pipeline, request_id: str, records: Iterable[dict[str, Any]]) -> None:
    """Queue `publish`'s commands on a pipeline the caller executes (with its own)."""
    name = keys.stream(request_id)
    for rec in records:
        pipe.xadd(name, _fields(rec))
    pipe.expire(name, STREAM_TTL_S)


def token_record(index: int, text: str, token_id: int, ts: float | None = None) -> dict[str, Any]:
    return {"type": "token", "index": index, "text": text, "token_id": token_id, "ts": ts or time.time()}


def end_record(finish_reason: str, usage: dict, timings: dict | None = None) -> dict[str, Any]:
    return {"type": "end", "finish_reason": finish_reason, "usage": usage, "timings": timings or {}}


def error_record(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message}


def status_record(state: str, detail: str = "") -> dict[str, Any]:
    return {"type": "status", "state": state, "detail": detail}


def read_all(client: redis.Redis, request_id: str) -> list[dict[str, Any]]:
    return [decode_record(f) for _, f in client.xrange(keys.stream(request_id))]


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
        for attempt in range(PUBLISH_ATTEMPTS):
            pipe = self._client.pipeline(transaction=False)
            for request_id, records in by_request.items():
                name = keys.stream(request_id)
                for rec in records:
                    pipe.xadd(name, _fields(rec))
                pipe.expire(name, STREAM_TTL_S)
            try:
                pipe.execute()
                return
            except redis.RedisError:
                if attempt + 1 == PUBLISH_ATTEMPTS:
                    # Still unreachable: drop the batch and keep the thread for the next.
                    log.warning("could not publish %d stream(s); dropped", len(by_request), exc_info=True)
                    return
                time.sleep(PUBLISH_RETRY_S * (attempt + 1))  # back off before trying again


async def tail(
    aredis, request_id: str, *, after_index: int = -1, block_ms: int = 1000
) -> AsyncIterator[dict[str, Any]]:
    """Yield a stream's records from the start, skipping tokens at or before
    `after_index` (resume), until the terminal record. Waits (XREAD BLOCK) for more.

    A token index is yielded once: a task redelivered after its worker died writes the
    indices it had already written again (acks are late), and the reader keeps the first."""
    name = keys.stream(request_id)
    last_id = "0-0"
    last_index = after_index
    while True:
        response = await aredis.xread({name: last_id}, count=256, block=block_ms)
        if not response:
            yield {"type": "idle"}  # lets the caller check deadlines and liveness
            continue
        for entry_id, fields in response[0][1]:
            last_id = entry_id
            rec = decode_record(fields)
            if rec["type"] == "token":
                if rec["index"] <= last_index:
                    continue
                last_index = rec["index"]
            yield rec
            if rec["type"] in TERMINAL:
                return
