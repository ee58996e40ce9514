"""Batches prefill requests that arrive together. Each Celery task thread submits its
request and waits on a future; one thread runs the engine over everything that queued
up while the previous batch ran, so a burst of prompts becomes a few batched forwards
instead of one forward per prompt (and the task threads never share the model).

Who gets into a batch when more is waiting than fits: higher priority first, then the
groups (tenants) in turn, one request each, the group that has had the least prefill
work lately first (prompt tokens, decaying with a half-life of a few seconds), oldest
first within a group. A tenant that floods the worker fills at most its share of each
batch.

And a quiet tenant's prompt does not wait behind a busy tenant's forward: forwards run a
layer at a time (PrefillEngine.prefill_steps), and when a prompt arrives from a group
that has had less prefill work lately than every group in the running forward (at no
lower priority), that forward pauses after its current layer while the newcomer's batch
runs, then resumes. Only the less-served overtake (a flooding tenant never pauses a
quiet one's forward), and a forward is overtaken at most once, so it cannot be starved;
the overtaken batch pays one extra forward. Without this, a quiet tenant's time to first
token doubled whenever its prompt landed during a flooding tenant's forward on a CPU.

Both rules are the engine scheduler's (inference/engine/scheduler.py: pick_batch,
overtakers), pure functions beside the engine's other scheduling rules; this module owns
the queue, the futures, the usage record and the thread that interleaves the forwards."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..engine.config import EngineConfig
from ..engine.loader import LoadedModel
from ..engine.prefill import PrefillEngine
from ..engine.scheduler import overtakers, pick_batch

__all__ = ["PrefillBatcher", "PrefillCancelled", "pick_batch"]

log = logging.getLogger(__name__)

USAGE_HALF_LIFE_S = 5.0  # how fast a group's record of prefill work fades


class PrefillCancelled(Exception):
    pass


@dataclass(order=True)
class _Waiting:
    order: int
    request: object = field(compare=False)
    future: Future = field(compare=False)
    group: object = field(compare=False)
    priority: int = field(compare=False)


@dataclass
class _Job:
    batch: list[_Waiting]
    steps: Generator  # PrefillEngine.prefill_steps over the batch
    overtaken: bool = False

    @property
    def priority(self) -> int:
        return max(w.priority for w in self.batch)


class _Usage:
    """Prompt tokens prefilled per group lately, each decaying exponentially."""

    def __init__(self, half_life_s: float = USAGE_HALF_LIFE_S):
        self.half_life_s = half_life_s
        self._value: dict[object, tuple[float, float]] = {}  # group -> (tokens, as of)

    def now(self) -> dict[object, float]:
        t = time.monotonic()
        return {g: self._decayed(g, t) for g in self._value}

    def add(self, group: object, tokens: int) -> None:
        t = time.monotonic()
        self._value[group] = (self._decayed(group, t) + tokens, t)
        for g in list(self._value):  # forget groups long quiet
            if self._decayed(g, t) < 1.0:
                del self._value[g]

    def _decayed(self, group: object, t: float) -> float:
        v, at = self._value.get(group, (0.0, t))
        return v * 0.5 ** ((t - at) / self.half_life_s)


class PrefillBatcher:
    def __init__(self, model: LoadedModel, config: EngineConfig):
        self.engine = PrefillEngine(model, config)
        self.max_batch = config.prefill_max_batch
        self.batches = 0
        self._waiting: list[_Waiting] = []
        self._order = itertools.count()
        self._usage = _Usage()
        self._closed = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="prefill-batcher", daemon=True)
        self._thread.start()

    def submit(self, request, *, group: object = None, priority: int = 0) -> Future:
        """Queue a PrefillRequest; `group` (the tenant) is what batches are shared
        fairly between."""
        fut: Future = Future()
        with self._cv:
            self._waiting.append(_Waiting(next(self._order), request, fut, group, priority))
            self._cv.notify()
        return fut

    def cancel(self, request_id: str) -> None:
        """A waiting request leaves at once (its future raises PrefillCancelled); one
        already in a forward finishes it, and the caller drops the result."""
        with self._cv:
            for w in self._waiting:
                if w.request.request_id == request_id:
                    self._waiting.remove(w)
                    w.future.set_exception(PrefillCancelled(request_id))
                    return

    def pending(self) -> int:
        with self._cv:
            return len(self._waiting)

    def shutdown(self, timeout: float | None = 10.0) -> None:
        """Stop taking work and wait for the batch thread (a process that exits while it
        still runs a forward aborts in torch's thread teardown)."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _next_job(self, running: list[_Job]) -> _Job | None:
        """A new job to run now, if any (None also when closed with nothing running)."""
        with self._cv:
            while not self._waiting and not running and not self._closed:
                self._cv.wait()
            if self._closed or not self._waiting:
                return None
            if running and (len(running) > 1 or running[-1].overtaken):
                return None
            usage = self._usage.now()
            if running:
                current = running[-1]
                eligible = overtakers(self._waiting, current.batch, usage)
                if not eligible:
                    return None
                current.overtaken = True
            else:
                eligible = self._waiting
            batch = pick_batch(eligible, self.max_batch, usage)
            for w in batch:
                self._waiting.remove(w)
                self._usage.add(w.group, len(w.request.token_ids))
        return _Job(batch, self.engine.prefill_steps([w.request for w in batch]))

    def _run(self) -> None:
        running: list[_Job] = []  # the innermost (overtaking) job last
        while True:
            job = self._next_job(running)
            if job is not None:
                running.append(job)
            elif not running:
                return  # closed
            current = running[-1]
            try:
                next(current.steps)  # one layer
                continue
            except StopIteration as done:
                running.pop()
                self.batches += 1
                for w, res in zip(current.batch, done.value, strict=True):
                    w.future.set_result(res)
            except Exception as exc:  # noqa: BLE001 - every waiter must hear of the failure
                running.pop()
                log.exception("prefill batch failed")
                for w in current.batch:
                    w.future.set_exception(exc)
