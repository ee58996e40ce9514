"""The step loop of the decode and colocated engines: one background thread that takes
what callers submitted and cancelled, then schedules, runs and postprocesses a step:

    plan = scheduler.schedule(runner.seqs)   # who computes, how many tokens each
    out = runner.execute(plan)               # the forwards
    self._postprocess(plan, out)             # tokens to their sequences; who has finished

Owns the inbox (any thread submits and cancels), the finishing of sequences and the
published stats. Every callback runs on this thread, so callbacks must be quick (push to
a queue or a Redis pipeline, not a network round trip per token).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from .config import EngineConfig
from .runner import ModelRunner, StepOutput
from .scheduler import Scheduler, StepPlan
from .sequence import Sequence

log = logging.getLogger(__name__)
_RATE_WINDOW_S = 5.0


@dataclass(frozen=True)
class DecodeStats:
    active: int
    waiting: int  # not yet in the decode batch (queued, or being prefilled)
    kv_tokens: int  # KV positions held by the running batch
    kv_tokens_reserved: int  # held against kv_token_budget
    kv_token_budget: int
    max_batch: int
    tokens_per_s: float  # output tokens over the last few seconds
    total_tokens: int
    steps: int


class EngineLoop:
    def __init__(self, config: EngineConfig, scheduler: Scheduler, runner: ModelRunner, *,
                 eos_ids: frozenset[int], name: str):
        self.config = config
        self.scheduler = scheduler
        self.runner = runner
        self.eos_ids = eos_ids
        self.max_context = config.max_context
        self.budget = int(config.kv_token_budget or 0)
        self._cv = threading.Condition()
        self._inbox: list[Sequence] = []  # submitted, not yet seen by the loop
        self._cancels: set[str] = set()
        self._known: set[str] = set()  # request ids in flight (any state)
        self._order = itertools.count()
        self._stopping = False
        self._rate: deque[tuple[float, int]] = deque()
        self._total_tokens = 0
        self._steps = 0
        self._stats = DecodeStats(0, 0, 0, 0, self.budget, config.max_batch, 0.0, 0, 0)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    # -- any thread -------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def enqueue(self, seq: Sequence) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError("engine is shut down")
            if seq.request_id in self._known:
                raise ValueError(f"request {seq.request_id} is already in flight")
            seq.order = next(self._order)
            self._known.add(seq.request_id)
            self._inbox.append(seq)
            self._cv.notify()

    def cancel(self, request_id: str) -> bool:
        """Stop a sequence (waiting, prefilling or running); its slot is free before the
        next step."""
        with self._cv:
            if request_id not in self._known:
                return False
            self._cancels.add(request_id)
            self._cv.notify()
            return True

    def stats(self) -> DecodeStats:
        return self._stats

    def shutdown(self, timeout: float | None = 10.0) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- engine thread ----------------------------------------------------------------

    def is_alive(self) -> bool:
        """The stepping thread still runs (a worker's /healthz asks)."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        # OpenMP's thread count is per calling thread: set it here too, or this thread
        # would use one thread per core whatever the config says.
        self.config.apply_cpu_settings()
        while True:
            with self._cv:
                if not (self._stopping or self._inbox or self._cancels or self._has_work()):
                    # Wakes now and then while idle, so the published tokens/s falls to 0
                    # once the rate window has passed instead of showing the last burst.
                    self._cv.wait(timeout=_RATE_WINDOW_S)
                if self._stopping:
                    break
                inbox, self._inbox = self._inbox, []
                cancels, self._cancels = self._cancels, set()
            self.scheduler.add(inbox)
            self._apply_cancels(cancels)
            try:
                plan = self.scheduler.schedule(self.runner.seqs)
                for seq in plan.admitted:
                    seq.handle.started.set()
                    if seq.prompt is None:
                        seq.joined_at = time.perf_counter()
                out = self.runner.execute(plan) if not plan.empty else StepOutput()
                self._postprocess(plan, out)
            except Exception as exc:  # fail what is in flight, keep serving new work
                log.exception("engine step failed")
                for seq in self.runner.remove(set(self.runner.seqs)):
                    self._finish(seq, "error", repr(exc))
            self._publish_stats()
        self._drain_on_shutdown()

    def _has_work(self) -> bool:
        return bool(self.runner.size or self.scheduler.has_work())

    def _postprocess(self, plan: StepPlan, out: StepOutput) -> None:
        for seq, reason in plan.finished:
            self._finish(seq, reason)
        errors = dict(out.errors)
        leaving: dict[Sequence, tuple[str, str | None]] = {}
        now = time.perf_counter()
        completed = [c.seq for c in plan.prefill if c.completes and c.seq in out.tokens]
        for seq in completed:
            seq.joined_at = now
        # The batch in slot order, then the prompts completed this step (index 0 each).
        ordered = [*(s for s in self.runner.seqs if s in out.tokens), *completed]
        emitted = 0
        for seq in ordered:
            try:
                reason = seq.accept(out.tokens[seq], self.eos_ids, self.max_context, out.logprobs.get(seq))
            except Exception as exc:  # a callback raised: end this sequence only
                log.exception("token callback failed for %s", seq.request_id)
                leaving[seq] = ("error", repr(exc))
                continue
            emitted += 1
            if reason is not None:
                leaving[seq] = (reason, None)
        for seq, exc in errors.items():
            if seq not in leaving:
                log.error("%s failed: %r", seq.request_id, exc, exc_info=exc)
                leaving[seq] = ("error", repr(exc))
        for c in plan.prefill:
            if c.seq in leaving:
                self.scheduler.drop(c.seq)
            elif c.completes and c.seq in out.tokens:
                self.scheduler.done_prefilling(c.seq)
        if out.tokens:
            self._steps += 1
            self._total_tokens += emitted
            self._rate.append((now, emitted))
        self.runner.remove(set(leaving))
        for seq, (reason, error) in leaving.items():
            self._finish(seq, reason, error)

    def _apply_cancels(self, cancels: set[str]) -> None:
        if not cancels:
            return
        for seq in self.scheduler.take(cancels):
            self._finish(seq, "cancelled")
        for seq in self.runner.remove({s for s in self.runner.seqs if s.request_id in cancels}):
            self._finish(seq, "cancelled")

    def _finish(self, seq: Sequence, reason: str, error: str | None = None) -> None:
        seq.reserved = 0
        with self._cv:
            self._known.discard(seq.request_id)
        seq.finish(reason, error)

    def _publish_stats(self) -> None:
        now = time.perf_counter()
        while self._rate and now - self._rate[0][0] > _RATE_WINDOW_S:
            self._rate.popleft()
        span = now - self._rate[0][0] if len(self._rate) > 1 else 0.0
        rate = sum(n for _, n in list(self._rate)[1:]) / span if span > 0 else 0.0
        seqs = self.runner.seqs
        self._stats = DecodeStats(
            active=len(seqs),
            waiting=len(self.scheduler.pending),
            kv_tokens=sum(s.kv_len for s in seqs),
            kv_tokens_reserved=sum(s.reserved for s in seqs) + self.scheduler.pending_reserved,
            kv_token_budget=self.budget,
            max_batch=self.config.max_batch,
            tokens_per_s=rate,
            total_tokens=self._total_tokens,
            steps=self._steps,
        )

    def _drain_on_shutdown(self) -> None:
        with self._cv:
            inbox, self._inbox = self._inbox, []
        for seq in [*inbox, *self.scheduler.take({s.request_id for s in self.scheduler.pending})]:
            self._finish(seq, "cancelled")
        for seq in self.runner.remove(set(self.runner.seqs)):
            self._finish(seq, "cancelled")
        self._publish_stats()
