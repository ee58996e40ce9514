"""Token streams: one Redis Stream per request, `tandem:stream:<request id>`.

Why a Redis Stream and not the channel layer: channels-redis drops messages silently at
capacity, while a stream is a durable, ordered log that a client can re-read from any
point (resume after a reconnect) and that the web tier tails without any worker knowing
who listens.

Records (all values are strings in Redis, decoded here):
  token   index (0-based, dense), text (the detokenized increment), token_id, ts, and
          logprobs (JSON, only when the request asked: OpenAI's content entry, see
          inference.text.logprobs)
  status  state (queued | prefilling | decoding), detail
  end     finish_reason, usage (JSON), timings (JSON: ttft_ms from the request's
          enqueueing, duration_ms, prefill_engine_ms: the prefill engine's share of the
          first token, when the request went through the prefill tier), sources (JSON:
          the articles the prompt was grounded in, [{"article_id", "title", "url",
          "score"}], best first; [] without knowledge)
  error   code, message
A stream is closed by exactly one `end` or `error` record and expires STREAM_TTL_S after
its last write.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import redis

from . import keys
from .reader import LISTENER_TTL_S, loop_reader  # noqa: F401 - the lease's TTL, renewed by the reader

STREAM_TTL_S = 3600
TERMINAL = {"end", "error"}
IDLE = {"type": "idle"}


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
    for key in ("usage", "timings", "sources", "logprobs"):
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


def token_record(index: int, text: str, token_id: int, ts: float | None = None,
                 logprobs: dict | None = None) -> dict[str, Any]:
    rec = {"type": "token", "index": index, "text": text, "token_id": token_id, "ts": ts or time.time()}
    if logprobs is not None:
        rec["logprobs"] = logprobs
    return rec


def end_record(finish_reason: str, usage: dict, timings: dict | None = None,
               sources: list[dict] | None = None) -> dict[str, Any]:
    return {"type": "end", "finish_reason": finish_reason, "usage": usage, "timings": timings or {},
            "sources": sources or []}


def error_record(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message}


def status_record(state: str, detail: str = "") -> dict[str, Any]:
    return {"type": "status", "state": state, "detail": detail}


def read_all(client: redis.Redis, request_id: str) -> list[dict[str, Any]]:
    return [decode_record(f) for _, f in client.xrange(keys.stream(request_id))]


@dataclass
class Progress:
    """What a reply's stream holds so far: the tokens, dense from index 0 (the first of
    each index, as readers keep it), and its terminal record if it has one."""

    token_ids: list[int]
    texts: list[str]
    first_ts: float | None  # when index 0 was produced
    terminal: dict[str, Any] | None


def progress(client: redis.Redis, request_id: str) -> Progress:
    """Read a reply back, for a worker that continues it after its worker died."""
    tokens: dict[int, dict] = {}
    terminal = None
    for rec in read_all(client, request_id):
        if rec["type"] == "token":
            tokens.setdefault(rec["index"], rec)
        elif rec["type"] in TERMINAL and terminal is None:
            terminal = rec
    dense = []
    while len(dense) in tokens:  # a gap (never written, so never read) ends what counts
        dense.append(tokens[len(dense)])
    return Progress(token_ids=[r["token_id"] for r in dense], texts=[r["text"] for r in dense],
                    first_ts=float(dense[0]["ts"]) if dense else None, terminal=terminal)


async def exists(aredis, request_id: str) -> bool:
    """Whether the request's stream is still there (it expires STREAM_TTL_S after its
    last write)."""
    return bool(await aredis.exists(keys.stream(request_id)))


async def tail(request_id: str, *, after_index: int = -1, idle_s: float = 1.0) -> AsyncIterator[list[dict[str, Any]]]:
    """Yield a stream's records in batches (what arrived together), from the start,
    skipping tokens at or before `after_index` (resume), until the terminal record.
    Follows through the event loop's one stream reader (`reader.py`), which also keeps
    the request's listener lease alive. Yields [{"type": "idle"}] when `idle_s` passes
    with nothing, so the caller can check deadlines and liveness.

    A token index is yielded once: a task redelivered after its worker died writes the
    indices it had already written again (acks are late), and the reader keeps the first."""
    follower = loop_reader().follow(keys.stream(request_id), lease=keys.listener(request_id))
    last_index = after_index
    try:
        while True:
            entries = await follower.next(idle_s)
            if not entries:
                yield [IDLE]
                continue
            batch = []
            for _, fields in entries:
                rec = decode_record(fields)
                if rec["type"] == "token":
                    if rec["index"] <= last_index:
                        continue
                    last_index = rec["index"]
                batch.append(rec)
                if rec["type"] in TERMINAL:
                    yield batch
                    return
            if batch:
                yield batch
    finally:
        follower.close()
