"""Turning a submitted chat request into an HTTP answer, in OpenAI's shapes: one
`chat.completion` object, or a `text/event-stream` of `chat.completion.chunk` events.
The sources the reply was grounded in ride as an extra top-level field `sources`, which
the official client keeps in `model_extra`: on the completion, and on a stream's final
chunk (the one with the finish reason, and the usage chunk after it when asked for).

The answer waits for the request's first stream record before choosing a status, so a
request that fails before its first token (prompt too long, no worker) gets a proper
HTTP error instead of a 200 stream that breaks."""

from __future__ import annotations

import asyncio
import json
import time

from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse

from tandem.chat.replies import ReplyFollower
from tandem.chat.services import Submission

from . import tool_calls
from .errors import ApiError

# Failure codes from the pipeline → HTTP status.
ERROR_STATUS = {
    "prompt_too_long": (400, "context_length_exceeded"),
    "invalid_message": (400, "invalid_value"),
    "empty_message": (400, "invalid_value"),
    "message_too_long": (400, "invalid_value"),
    "no_worker": (503, "no_worker"),
    "worker_lost": (503, "worker_lost"),
    "timeout": (503, "timeout"),
    "expired": (503, "expired"),
    "cancelled": (409, "cancelled"),
    "stream_expired": (410, "stream_expired"),
}
FINISH = {"stop": "stop", "length": "length", "context": "length", "cancelled": "stop"}


def served_model_id() -> str:
    return settings.TANDEM_MODEL_ID


def _raise_for(rec: dict, headers: dict) -> None:
    status, code = ERROR_STATUS.get(rec["code"], (502, rec["code"]))
    raise ApiError(status, rec["message"], code=code, headers=headers)


class Reply:
    def __init__(self, submission: Submission, *, completion_id: str, tools: bool = False):
        self.submission = submission
        self.tools = tools  # the reply may be a tool call (tandem.api.tool_calls)
        self.request_id = str(submission.assistant_message.pk)
        self.completion_id = completion_id
        self.created = int(time.time())
        self.headers = {**submission.admission.headers(), "x-request-id": self.request_id,
                        "x-tandem-conversation": str(submission.conversation.pk)}

    async def _first(self, follower: ReplyFollower, records) -> list[dict]:
        """Records up to and including the first token or the end; raises on an error."""
        got = []
        async for rec in records:
            if rec["type"] == "error":
                _raise_for(rec, self.headers)
            if rec["type"] in ("token", "end"):
                got.append(rec)
                return got
        return got

    async def complete(self) -> JsonResponse:
        follower = ReplyFollower(self.request_id, served=self.submission.served)
        records = follower.records()
        try:
            pieces, end = [], None
            for rec in await self._first(follower, records):
                if rec["type"] == "token":
                    pieces.append(rec["text"])
                else:
                    end = rec
            if end is None:
                async for rec in records:
                    if rec["type"] == "token":
                        pieces.append(rec["text"])
                    elif rec["type"] == "error":
                        _raise_for(rec, self.headers)
                    elif rec["type"] == "end":
                        end = rec
        except asyncio.CancelledError:
            await follower.cancel()  # the client went away: free the decode slot
            raise
        message, finish = {"role": "assistant", "content": "".join(pieces)}, FINISH.get(end["finish_reason"], "stop")
        if self.tools:
            message, finish = tool_calls.completion_message(message["content"], finish, request_id=self.request_id)
        body = {
            "id": self.completion_id, "object": "chat.completion", "created": self.created,
            "model": served_model_id(), "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": end["usage"],
            "sources": end.get("sources", []),
        }
        resp = JsonResponse(body)
        for k, v in self.headers.items():
            resp[k] = v
        return resp

    async def stream(self, *, include_usage: bool) -> StreamingHttpResponse:
        follower = ReplyFollower(self.request_id, served=self.submission.served)
        records = follower.records()
        try:
            first = await self._first(follower, records)
        except asyncio.CancelledError:
            await follower.cancel()  # the client went away before the first token
            raise

        async def events():
            try:
                yield self._chunk({"role": "assistant", "content": ""}, include_usage=include_usage)
                calls = tool_calls.StreamedCalls(self.request_id) if self.tools else None
                async for rec in _chain(first, records):
                    if rec["type"] == "token" and rec["text"]:
                        for delta in calls.feed(rec["text"]) if calls else [{"content": rec["text"]}]:
                            yield self._chunk(delta, include_usage=include_usage)
                    elif rec["type"] == "error":
                        # Headers are gone: report in-band, as OpenAI does mid-stream.
                        yield _sse({"error": {"message": rec["message"], "type": "server_error",
                                              "param": None, "code": rec["code"]}})
                        break
                    elif rec["type"] == "end":
                        sources = rec.get("sources", [])
                        finish = FINISH.get(rec["finish_reason"], "stop")
                        for delta in calls.end() if calls else []:
                            yield self._chunk(delta, include_usage=include_usage)
                        if calls and calls.called:
                            finish = "tool_calls"
                        yield self._chunk({}, finish=finish, include_usage=include_usage, sources=sources)
                        if include_usage:
                            yield _sse(self._base(choices=[], usage=rec["usage"], sources=sources))
                yield "data: [DONE]\n\n"
            except (asyncio.CancelledError, GeneratorExit):
                await follower.cancel()  # the client disconnected: cancel the request
                raise

        resp = StreamingHttpResponse(events(), content_type="text/event-stream")
        resp["Cache-Control"] = "no-cache"
        resp["X-Accel-Buffering"] = "no"
        for k, v in self.headers.items():
            resp[k] = v
        return resp

    def _base(self, **extra) -> dict:
        return {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                "model": served_model_id(), "system_fingerprint": None, **extra}

    def _chunk(self, delta: dict, *, finish: str | None = None, include_usage: bool,
               sources: list | None = None) -> str:
        body = self._base(choices=[{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}])
        if include_usage:
            body["usage"] = None
        if sources is not None:
            body["sources"] = sources
        return _sse(body)


async def _chain(first: list[dict], rest):
    for rec in first:
        yield rec
    if first and first[-1]["type"] == "end":
        return
    async for rec in rest:
        yield rec


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"
