"""The decode engine: continuous batching of sequences whose prompt KV was computed
elsewhere (a prefill worker), stepped by one background thread.

Owns the waiting queue, admission (priority, tenant group caps, slots, KV-token budget)
and the step loop: admit -> step -> postprocess. Callers on any thread submit(), cancel()
and read stats(); every callback runs on the engine thread, so callbacks must be quick
(push to a queue or a Redis pipeline, not a network round trip per token).

Index numbering: the prefill's first token is index 0 and is not re-emitted here; decode
emits indices 1..n-1 through on_token and the returned StreamHandle, and on_finish
reports the totals (SequenceStats.output_tokens = n). A sequence resumed on another
worker (its first worker died) arrives with the k tokens it had already produced and the
KV of prompt + all but the last of them; it emits k, k+1, … and counts all n.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

from .config import EngineConfig
from .kv import KVCache
from .loader import LoadedModel
from .runner import BatchRunner
from .sampling import SamplingParams, make_generator
from .sequence import OnFinish, OnToken, Sequence, StopChecker, StreamHandle

log = logging.getLogger(__name__)
_RATE_WINDOW_S = 5.0


@dataclass
class DecodeRequest:
    request_id: str
    prompt_token_ids: list[int]
    first_token: int  # index 0, produced (and already streamed) by the prefill
    kv: KVCache  # the prompt's KV: length == len(prompt_token_ids) (+ len(output_token_ids) - 1)
    sampling: SamplingParams
    on_token: OnToken | None = None
    on_finish: OnFinish | None = None
    stop_checker: StopChecker | None = None
    priority: int = 0  # higher is admitted first
    group: str | None = None  # e.g. the tenant
    group_max_slots: int | None = None  # this group's cap on the engine's slots
    # A resumed sequence: every token already produced (and streamed), index 0 first.
    # None: just the first token. The KV then covers the prompt and all but the last.
    output_token_ids: list[int] | None = None

    @property
    def tokens(self) -> list[int]:
        return [int(t) for t in self.output_token_ids] if self.output_token_ids else [int(self.first_token)]


@dataclass(frozen=True)
class DecodeStats:
    active: int
    waiting: int
    kv_tokens: int  # KV positions held by the running batch
    kv_tokens_reserved: int  # held against kv_token_budget
    kv_token_budget: int
    max_batch: int
    tokens_per_s: float  # output tokens over the last few seconds
    total_tokens: int
    steps: int


def pick_admissions(
    waiting: list[Sequence], *, free_slots: int, free_tokens: int, group_active: Counter[str | None],
    max_context: int,
) -> list[Sequence]:
    """Which waiting sequences join now: highest priority first, then arrival order.

    A sequence whose group is at its cap is passed over (others go first). Otherwise the
    first one that does not fit (slots or budget) stops admission, so a long request is
    not starved by a stream of short ones behind it.
    """
    chosen: list[Sequence] = []
    active = Counter(group_active)
    for seq in sorted(waiting, key=lambda s: (-s.priority, s.order)):
        cap = seq.group_max_slots
        if seq.group is not None and cap is not None and active[seq.group] >= cap:
            continue
        need = seq.reservation(max_context)
        if free_slots < 1 or need > free_tokens:
            break
        chosen.append(seq)
        free_slots -= 1
        free_tokens -= need
        active[seq.group] += 1
    return chosen


class DecodeEngine:
    def __init__(self, model: LoadedModel, config: EngineConfig, *, start: bool = True):
        self.config = config
        self.fingerprint = model.fingerprint
        self.eos_ids = model.eos_token_ids
        self.max_context = config.max_context
        self.budget = int(config.kv_token_budget or 0)
        self.runner = BatchRunner(model.model, max_batch=config.max_batch, max_context=config.max_context)
        self._cv = threading.Condition()
        self._inbox: list[Sequence] = []  # submitted, not yet seen by the loop
        self._cancels: set[str] = set()
        self._waiting: list[Sequence] = []  # engine thread only
        self._known: set[str] = set()  # request ids in flight (any state)
        self._order = itertools.count()
        self._stopping = False
        self._rate: deque[tuple[float, int]] = deque()
        self._total_tokens = 0
        self._steps = 0
        self._stats = DecodeStats(0, 0, 0, 0, self.budget, config.max_batch, 0.0, 0, 0)
        self._thread = threading.Thread(target=self._loop, name="tandem-decode", daemon=True)
        if start:
            self._thread.start()

    # -- any thread -------------------------------------------------------------------

    def submit(self, req: DecodeRequest) -> StreamHandle:
        if req.kv.model_fingerprint != self.fingerprint:
            raise ValueError(
                f"KV for {req.request_id} was computed with model {req.kv.model_fingerprint}, "
                f"this engine serves {self.fingerprint}"
            )
        tokens = req.tokens
        if req.kv.length != len(req.prompt_token_ids) + len(tokens) - 1:
            raise ValueError(f"KV length {req.kv.length} != prompt length {len(req.prompt_token_ids)}"
                             f" + {len(tokens) - 1} earlier output tokens")
        seq = Sequence(
            request_id=req.request_id, prompt_len=len(req.prompt_token_ids), sampling=req.sampling,
            tokens=tokens, handle=StreamHandle(req.request_id, self.cancel),
            on_token=req.on_token, on_finish=req.on_finish, stop_checker=req.stop_checker,
            priority=req.priority, group=req.group, group_max_slots=req.group_max_slots,
            # A seeded sequence draws one number per token: skip those its tokens used.
            generator=make_generator(req.sampling, tokens_done=len(tokens)), kv=req.kv,
        )
        self._enqueue(seq)
        return seq.handle

    def cancel(self, request_id: str) -> bool:
        """Stop a sequence (waiting or running); its slot is free before the next step."""
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

    def _enqueue(self, seq: Sequence) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError("engine is shut down")
            if seq.request_id in self._known:
                raise ValueError(f"request {seq.request_id} is already in flight")
            seq.order = next(self._order)
            self._known.add(seq.request_id)
            self._inbox.append(seq)
            self._cv.notify()

    # -- engine thread ----------------------------------------------------------------

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
            self._waiting.extend(inbox)
            self._apply_cancels(cancels)
            try:
                self._schedule()
                if self.runner.size:
                    self._step()
            except Exception as exc:  # fail what is in flight, keep serving new work
                log.exception("decode step failed")
                for slot in reversed(range(self.runner.size)):
                    self._finish(self.runner.remove(slot), "error", repr(exc))
            self._publish_stats()
        self._drain_on_shutdown()

    def _has_work(self) -> bool:
        return bool(self.runner.size or self._waiting)

    def _schedule(self) -> None:
        """Admit waiting sequences into the batch (the colocated engine adds prefill)."""
        for seq in self._admissible(self._waiting):
            self._waiting.remove(seq)
            seq.handle.started.set()
            try:
                self._join(seq)
            except Exception as exc:  # this sequence only (e.g. no memory for its cache)
                log.exception("could not join %s", seq.request_id)
                self._finish(seq, "error", repr(exc))

    def _admissible(self, waiting: list[Sequence], extra: list[Sequence] = ()) -> list[Sequence]:
        holders = [*self.runner.seqs, *extra]  # everything holding slots and budget
        return pick_admissions(
            waiting,
            free_slots=self.config.max_batch - len(holders),
            free_tokens=self.budget - sum(s.reserved for s in holders),
            group_active=Counter(s.group for s in holders),
            max_context=self.max_context,
        )

    def _join(self, seq: Sequence) -> None:
        """Into the batch, unless the tokens it already has end it."""
        seq.reserved = seq.reservation(self.max_context)
        seq.joined_at = time.perf_counter()
        last = seq.tokens[-1]
        reason = "stop" if seq.is_stop_token(last, self.eos_ids) else seq.done_reason(self.max_context)
        if reason is not None:
            self._finish(seq, reason)
            return
        kv, seq.kv = seq.kv, None
        assert kv is not None
        self.runner.join(seq, kv)

    def _step(self) -> None:
        tokens = self.runner.step()
        now = time.perf_counter()
        self._steps += 1
        self._total_tokens += len(tokens)
        self._rate.append((now, len(tokens)))
        done: list[tuple[int, str, str | None]] = []
        for slot, (seq, tok) in enumerate(zip(self.runner.seqs, tokens, strict=True)):
            try:
                reason = seq.accept(tok, self.eos_ids, self.max_context)
            except Exception as exc:  # a callback raised: end this sequence only
                log.exception("token callback failed for %s", seq.request_id)
                done.append((slot, "error", repr(exc)))
                continue
            if reason is not None:
                done.append((slot, reason, None))
        for slot, reason, error in reversed(done):  # highest slot first keeps indices valid
            self._finish(self.runner.remove(slot), reason, error)

    def _apply_cancels(self, cancels: set[str]) -> None:
        if not cancels:
            return
        for seq in [s for s in self._waiting if s.request_id in cancels]:
            self._waiting.remove(seq)
            self._finish(seq, "cancelled")
        for slot in reversed(range(self.runner.size)):
            if self.runner.seqs[slot].request_id in cancels:
                self._finish(self.runner.remove(slot), "cancelled")

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
            waiting=len(self._waiting) + self._pending_count(),
            kv_tokens=sum(s.kv_len for s in seqs),
            kv_tokens_reserved=sum(s.reserved for s in seqs) + self._pending_reserved(),
            kv_token_budget=self.budget,
            max_batch=self.config.max_batch,
            tokens_per_s=rate,
            total_tokens=self._total_tokens,
            steps=self._steps,
        )

    def _pending_count(self) -> int:
        return 0

    def _pending_reserved(self) -> int:
        return 0

    def _drain_on_shutdown(self) -> None:
        with self._cv:
            inbox, self._inbox = self._inbox, []
        for seq in [*inbox, *self._waiting]:
            self._finish(seq, "cancelled")
        self._waiting.clear()
        for slot in reversed(range(self.runner.size)):
            self._finish(self.runner.remove(slot), "cancelled")
        self._publish_stats()
