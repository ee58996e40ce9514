"""Turning a submitted chat request into an HTTP answer, in OpenAI's shapes: one
`chat.completion` object, or a `text/event-stream` of `chat.completion.chunk` events.
The sources the reply was grounded in ride as an extra top-level field `sources`, which
the official client keeps in `model_extra`: on the completion, and on a stream's final
chunk (the one with the finish reason, and the usage chunk after it when asked for).

The answer waits for the request's first stream record before choosing a status, so a
request that fails before its first token (prompt too long, no worker) gets a proper
HTTP error instead of a 200 stream that breaks; but no longer than one SSE keep-alive
interval (tandem.api.keepalive): after that the stream starts, silences carry keep-alive
comments, and a failure comes in-band."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.db import connections
from django.http import JsonResponse, StreamingHttpResponse

from tandem.chat.replies import ReplyFollower
from tandem.chat.services import Submission

from . import keepalive, tool_calls
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
    # An action's result could not be answered: the tenant's quota refused the pass
    # that continues the reply (the result is in the conversation's transcript).
    "continuation_refused": (429, "continuation_refused"),
}
FINISH = {"stop": "stop", "length": "length", "context": "length", "cancelled": "stop"}


def served_model_id() -> str:
    return settings.TANDEM_MODEL_ID


def _raise_for(rec: dict, headers: dict) -> None:
    status, code = ERROR_STATUS.get(rec["code"], (502, rec["code"]))
    raise ApiError(status, rec["message"], code=code, headers=headers)


class Reply:
    """One chat-completions answer over the replies of its choices (`n` submissions of
    the same prompt, choice i being submissions[i]); `logprobs`: the request asked for
    them (each token record then carries its content entry)."""

    def __init__(self, submissions: list[Submission], *, completion_id: str, tools: bool = False,
                 logprobs: bool = False):
        self.submissions = submissions
        self.tools = tools  # the reply may be a tool call (tandem.api.tool_calls)
        self.logprobs = logprobs
        self.request_ids = [str(sub.assistant_message.pk) for sub in submissions]
        self.request_id = self.request_ids[0]
        self.completion_id = completion_id
        self.created = int(time.time())
        # The rate-limit headers of the last admission: what is left after all the choices.
        self.headers = {**submissions[-1].admission.headers(), "x-request-id": self.request_id,
                        "x-tandem-conversation": str(submissions[0].conversation.pk)}

    def _followers(self) -> list[ReplyFollower]:
        return [ReplyFollower(rid, served=sub.served) for rid, sub in zip(self.request_ids, self.submissions,
                                                                           strict=True)]

    async def _first(self, records) -> list[dict]:
        """Records up to and including the first token or the end; raises on an error."""
        got = []
        async for rec in records:
            if rec["type"] == "error":
                _raise_for(rec, self.headers)
            if rec["type"] in ("token", "end"):
                got.append(rec)
                return got
        return got

    async def _collect(self, records) -> tuple[list[str], list[dict], dict]:
        """A whole choice: its texts, its logprobs entries and its end record."""
        pieces, entries = [], []
        async for rec in records:
            if rec["type"] == "token":
                pieces.append(rec["text"])
                if "logprobs" in rec:
                    entries.append(rec["logprobs"])
            elif rec["type"] == "error":
                _raise_for(rec, self.headers)
            elif rec["type"] == "end":
                return pieces, entries, rec
        raise ApiError(502, "The reply's stream ended without its end.", code="stream_broken")

    async def complete(self) -> JsonResponse:
        followers = self._followers()
        try:
            choices = await asyncio.gather(*(self._collect(f.records()) for f in followers))
        except BaseException:
            # The client went away, or one choice failed: free every decode slot.
            await asyncio.gather(*(f.cancel() for f in followers), return_exceptions=True)
            raise
        body_choices, ends = [], []
        for index, (request_id, (pieces, entries, end)) in enumerate(zip(self.request_ids, choices, strict=True)):
            message, finish = {"role": "assistant", "content": "".join(pieces)}, FINISH.get(end["finish_reason"], "stop")
            if self.tools:
                message, finish = tool_calls.completion_message(message["content"], finish, request_id=request_id)
            body_choices.append({"index": index, "message": message, "finish_reason": finish,
                                 "logprobs": _logprobs(entries) if self.logprobs else None})
            ends.append(end)
        body = {
            "id": self.completion_id, "object": "chat.completion", "created": self.created,
            "model": served_model_id(), "system_fingerprint": None,
            "choices": body_choices,
            "usage": _usage(ends),
            "sources": ends[0].get("sources", []),
        }
        resp = JsonResponse(body)
        for k, v in self.headers.items():
            resp[k] = v
        return resp

    async def stream(self, *, include_usage: bool) -> StreamingHttpResponse:
        followers = self._followers()
        iters = [f.records() for f in followers]
        # The status waits for the first records, but no longer than one keep-alive
        # interval: a longer silence (the queue, an action's approval) is spent inside a
        # 200 stream that keeps the connection alive, and a failure after it is in-band.
        opening = asyncio.ensure_future(_opening([self._first(it) for it in iters]))
        try:
            done, _ = await asyncio.wait({opening}, timeout=keepalive.interval_s())
            if done:
                opening.result()
            late = not done
        except BaseException:
            opening.cancel()
            await asyncio.gather(*(f.cancel() for f in followers), return_exceptions=True)
            raise

        async def events():
            try:
                if late:  # already silent for an interval: the first keep-alive is due
                    yield keepalive.COMMENT
                try:
                    firsts = await opening
                except ApiError as exc:
                    yield _sse_error(exc.code, exc.message)
                    await asyncio.gather(*(f.cancel() for f in followers), return_exceptions=True)
                    yield "data: [DONE]\n\n"
                    return
                for index in range(len(iters)):
                    yield self._chunk(index, {"role": "assistant", "content": ""}, include_usage=include_usage)
                calls = ([tool_calls.StreamedCalls(rid) for rid in self.request_ids] if self.tools
                         else [None] * len(iters))
                # Logprobs of tokens whose text is held back (part of a character, a
                # tool call's syntax) ride on their choice's next chunk.
                pending: list[list[dict]] = [[] for _ in iters]
                ends: dict[int, dict] = {}
                async for index, rec in _merge([_chain(first, it) for first, it in zip(firsts, iters, strict=True)]):
                    if rec["type"] == "token":
                        if "logprobs" in rec:
                            pending[index].append(rec["logprobs"])
                        if not rec["text"]:
                            continue
                        feed = calls[index].feed(rec["text"]) if calls[index] else [{"content": rec["text"]}]
                        for delta in feed:
                            yield self._chunk(index, delta, include_usage=include_usage, logprobs=pending[index])
                            pending[index] = []
                    elif rec["type"] == "error":
                        # Headers are gone: report in-band, as OpenAI does mid-stream.
                        yield _sse_error(rec["code"], rec["message"])
                        await asyncio.gather(*(f.cancel() for f in followers), return_exceptions=True)
                        break
                    elif rec["type"] == "end":
                        ends[index] = rec
                        finish = FINISH.get(rec["finish_reason"], "stop")
                        for delta in calls[index].end() if calls[index] else []:
                            yield self._chunk(index, delta, include_usage=include_usage, logprobs=pending[index])
                            pending[index] = []
                        if calls[index] and calls[index].called:
                            finish = "tool_calls"
                        if pending[index]:
                            yield self._chunk(index, {}, include_usage=include_usage, logprobs=pending[index])
                        last = len(ends) == len(iters)
                        sources = ends[0].get("sources", []) if last and 0 in ends else None
                        yield self._chunk(index, {}, finish=finish, include_usage=include_usage, sources=sources)
                        if last and include_usage:
                            yield _sse(self._base(choices=[], usage=_usage([ends[i] for i in sorted(ends)]),
                                                  sources=sources or []))
                yield "data: [DONE]\n\n"
            except (asyncio.CancelledError, GeneratorExit):
                # The client disconnected: cancel the requests.
                opening.cancel()
                await asyncio.gather(*(f.cancel() for f in followers), return_exceptions=True)
                raise

        resp = StreamingHttpResponse(keepalive.with_keepalive(events()), content_type="text/event-stream")
        resp["Cache-Control"] = "no-cache"
        resp["X-Accel-Buffering"] = "no"
        for k, v in self.headers.items():
            resp[k] = v
        return resp

    def _base(self, **extra) -> dict:
        return {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                "model": served_model_id(), "system_fingerprint": None, **extra}

    def _chunk(self, index: int, delta: dict, *, finish: str | None = None, include_usage: bool,
               sources: list | None = None, logprobs: list[dict] | None = None) -> str:
        choice = {"index": index, "delta": delta, "finish_reason": finish,
                  "logprobs": _logprobs(logprobs) if self.logprobs and logprobs else None}
        body = self._base(choices=[choice])
        if include_usage:
            body["usage"] = None
        if sources is not None:
            body["sources"] = sources
        return _sse(body)


def _logprobs(entries: list[dict]) -> dict:
    return {"content": entries, "refusal": None}


def _usage(ends: list[dict]) -> dict:
    """The choices' usage together: the prompt once (its KV is shared), every choice's
    completion tokens."""
    first = ends[0]["usage"]
    completion = sum(e["usage"]["completion_tokens"] for e in ends)
    return {**first, "completion_tokens": completion, "total_tokens": first["prompt_tokens"] + completion}


async def _opening(firsts: list) -> list[list[dict]]:
    """The choices' first records, awaited by a task that may outlive the view (a late
    stream's opening is read on while the response is sent). The view runs inside the
    sync middleware's AsyncToSync call, whose thread refuses work once the view returns,
    so this task's thread-sensitive calls (a follower's database lookups) go to a thread
    of its own, whose database connection closes with it."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stream-opening")
    try:
        async with ThreadSensitiveContext(executor=executor):
            tasks = [asyncio.ensure_future(first) for first in firsts]
            try:
                return await asyncio.gather(*tasks)
            except BaseException:
                # Its tasks must end inside the context (the other choices of a failed one).
                for task in tasks:
                    task.cancel()
                await asyncio.wait(tasks)
                raise
    finally:
        await asyncio.get_running_loop().run_in_executor(executor, connections.close_all)
        executor.shutdown(wait=False)


async def _chain(first: list[dict], rest):
    for rec in first:
        yield rec
    if first and first[-1]["type"] == "end":
        return
    async for rec in rest:
        yield rec


async def _merge(sources: list) -> AsyncIterator[tuple[int, dict]]:
    """(choice index, record) from several choices' records as they arrive; each
    choice's records stay in order. An error reading one is raised here."""
    if len(sources) == 1:
        async for rec in sources[0]:
            yield 0, rec
        return
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump(i: int, source) -> None:
        try:
            async for rec in source:
                await queue.put((i, rec))
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it
            await queue.put((i, exc))
        await queue.put((i, done))

    tasks = [asyncio.ensure_future(pump(i, src)) for i, src in enumerate(sources)]
    try:
        remaining = len(tasks)
        while remaining:
            i, rec = await queue.get()
            if rec is done:
                remaining -= 1
            elif isinstance(rec, Exception):
                raise rec
            else:
                yield i, rec
    finally:
        for t in tasks:
            t.cancel()


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _sse_error(code: str, message: str) -> str:
    """A failure once the headers are gone: in-band, as OpenAI reports one mid-stream."""
    return _sse({"error": {"message": message, "type": "server_error", "param": None, "code": code}})
