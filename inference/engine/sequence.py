"""A sequence in flight: its tokens, its stop rules, its callbacks, and the handle through
which a caller follows it.

Owns the per-sequence state the engines share (decode and colocated) and the rule for
when a sequence ends. Token indices: the prefill's first token is index 0; decode emits
1..n-1; on_finish reports n (`SequenceStats.output_tokens`). A stop token (EOS or one of
SamplingParams.stop_token_ids) ends the sequence without being emitted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch

from .kv import KVCache
from .prefix_cache import SharedPrefix
from .sampling import SamplingParams, TokenLogprobs

log = logging.getLogger(__name__)

# stop: a stop token or the stop checker; length: max_tokens; context: max_context reached;
# cancelled: cancel() or shutdown; error: the engine failed this sequence (see stats.error).
FinishReason = Literal["stop", "length", "context", "cancelled", "error"]

OnToken = Callable[[str, int, int, float], None]  # (request_id, index, token_id, unix time)
OnFinish = Callable[[str, str, "SequenceStats"], None]  # (request_id, finish_reason, stats)
StopChecker = Callable[[list[int]], bool]  # output token ids so far -> stop now?


@dataclass
class SequenceStats:
    prompt_tokens: int
    output_tokens: int  # indices 0..n-1 emitted, by prefill and decode together
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (colocated)
    queue_ms: float = 0.0  # submit -> joined the running batch
    decode_ms: float = 0.0  # joined -> finished
    error: str | None = None


@dataclass(frozen=True)
class TokenEvent:
    request_id: str
    index: int
    token_id: int
    timestamp: float
    logprobs: TokenLogprobs | None = None  # when the sequence's sampling asked for them


@dataclass(frozen=True)
class FinishEvent:
    request_id: str
    finish_reason: str
    stats: SequenceStats


class StreamHandle:
    """Follow one sequence from any thread: iterate its TokenEvents, or wait for its end."""

    def __init__(self, request_id: str, cancel: Callable[[str], bool]):
        self.request_id = request_id
        self._events: queue.Queue[TokenEvent | FinishEvent] = queue.Queue()
        self._cancel = cancel
        self.finish: FinishEvent | None = None
        # Set when the engine takes the sequence into its batch (or its prefill), or ends
        # it: until then it waits for a slot, which is not a stall.
        self.started = threading.Event()

    def __iter__(self) -> Iterator[TokenEvent]:
        return self.events()

    def events(self, timeout: float | None = None) -> Iterator[TokenEvent]:
        """Yield tokens until the sequence ends; queue.Empty if none comes within timeout."""
        while self.finish is None:
            ev = self._events.get(timeout=timeout)
            if isinstance(ev, FinishEvent):
                self.finish = ev
            else:
                yield ev

    def result(self, timeout: float | None = None) -> tuple[list[int], FinishEvent]:
        """All tokens this handle saw, and the finish; raises queue.Empty on timeout."""
        tokens = [ev.token_id for ev in self.events(timeout)]
        assert self.finish is not None
        return tokens, self.finish

    def cancel(self) -> bool:
        return self._cancel(self.request_id)

    def _put(self, ev: TokenEvent | FinishEvent) -> None:
        self._events.put(ev)


@dataclass(eq=False)
class Sequence:
    request_id: str
    prompt_len: int
    sampling: SamplingParams
    tokens: list[int]  # output tokens so far, index 0 first
    handle: StreamHandle
    on_token: OnToken | None = None
    on_finish: OnFinish | None = None
    stop_checker: StopChecker | None = None
    priority: int = 0
    group: str | None = None
    group_max_slots: int | None = None
    generator: torch.Generator | None = None
    kv: KVCache | None = None  # the prompt's KV until it joins the batch
    reserved: int = 0  # KV tokens held against the budget while admitted
    order: int = 0  # arrival order, the tie-break within a priority
    submitted_at: float = field(default_factory=time.perf_counter)
    joined_at: float | None = None
    cached_tokens: int = 0
    # Prompts the engine prefills itself (colocated): the prompt, its prefix-cache salt,
    # and how many of its tokens have KV (in `kv`). None: the prompt's KV came with it.
    prompt: list[int] | None = None
    cache_salt: str | None = None
    cache_shared: SharedPrefix | None = None
    prefilled: int = 0
    # The prompt's token ids of a sequence whose KV came with it (decode, resumed), kept
    # for what looks back at the prompt (repetition_penalty); colocated ones have `prompt`.
    prompt_ids: list[int] | None = None
    # The grammar's matcher (grammar.py) of a constrained sequence, having consumed
    # `tokens`; the engine that takes the sequence in sets it.
    matcher: object | None = None

    @property
    def history(self) -> tuple[list[int], list[int]]:
        """(prompt ids, output ids so far): what penalties look back on."""
        return (self.prompt if self.prompt is not None else self.prompt_ids or []), self.tokens

    @property
    def kv_len(self) -> int:
        """KV positions the sequence holds once its last token is fed back."""
        return self.prompt_len + len(self.tokens) - 1

    def reservation(self, max_context: int) -> int:
        return min(self.prompt_len + self.sampling.max_tokens, max_context)

    def is_stop_token(self, token: int, eos_ids: frozenset[int]) -> bool:
        return token in self.sampling.stop_token_ids or (not self.sampling.ignore_eos and token in eos_ids)

    def accept(self, token: int, eos_ids: frozenset[int], max_context: int,
               logprobs: TokenLogprobs | None = None) -> str | None:
        """Take the next output token: emit it unless it stops the sequence; say if done."""
        if self.is_stop_token(token, eos_ids):
            return "stop"
        index = len(self.tokens)
        self.tokens.append(token)
        now = time.time()
        self.handle._put(TokenEvent(self.request_id, index, token, now, logprobs))
        if self.on_token is not None:
            self.on_token(self.request_id, index, token, now)
        return self.done_reason(max_context)

    def done_before_joining(self, eos_ids: frozenset[int], max_context: int) -> str | None:
        """Whether the tokens a sequence arrives with (a prefill worker's first token)
        already end it, so that it never joins a decode batch."""
        if self.tokens and self.is_stop_token(self.tokens[-1], eos_ids):
            return "stop"
        return self.done_reason(max_context)

    def done_reason(self, max_context: int) -> str | None:
        if self.stop_checker is not None and self.stop_checker(self.tokens):
            return "stop"
        if len(self.tokens) >= self.sampling.max_tokens:
            return "length"
        if self.prompt_len + len(self.tokens) >= max_context:
            return "context"  # the next token would not fit the context window
        return None

    def finish(self, reason: str, error: str | None = None) -> None:
        now = time.perf_counter()
        joined = self.joined_at
        stats = SequenceStats(
            prompt_tokens=self.prompt_len,
            output_tokens=len(self.tokens),
            cached_tokens=self.cached_tokens,
            queue_ms=((joined or now) - self.submitted_at) * 1e3,
            decode_ms=(now - joined) * 1e3 if joined is not None else 0.0,
            error=error,
        )
        self.kv = None
        self.handle._put(FinishEvent(self.request_id, reason, stats))
        self.handle.started.set()
        if self.on_finish is not None:
            try:
                self.on_finish(self.request_id, reason, stats)
            except Exception:  # a caller's bug must not take the engine down
                log.exception("on_finish callback failed for %s", self.request_id)
