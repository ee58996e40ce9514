"""Batches prefill requests that arrive together. Each Celery task thread submits its
request and waits on a future; one thread runs the engine over everything that queued
up while the previous batch ran, so a burst of prompts becomes a few batched forwards
instead of one forward per prompt (and the task threads never share the model)."""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future

from .engine.config import EngineConfig
from .engine.loader import LoadedModel

log = logging.getLogger(__name__)


class PrefillCancelled(Exception):
    pass


class PrefillBatcher:
    def __init__(self, model: LoadedModel, config: EngineConfig):
        from .engine.prefill import PrefillEngine

        self.engine = PrefillEngine(model, config)
        self.max_batch = config.prefill_max_batch
        self.batches = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="prefill-batcher", daemon=True)
        self._thread.start()

    def submit(self, request) -> Future:
        fut: Future = Future()
        self._queue.put((request, fut))
        return fut

    def cancel(self, request_id: str) -> None:
        with self._lock:
            self._cancelled.add(request_id)

    def pending(self) -> int:
        return self._queue.qsize()

    def shutdown(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
            with self._lock:
                live = [(r, f) for r, f in batch if r.request_id not in self._cancelled]
                for r, f in batch:
                    if r.request_id in self._cancelled:
                        self._cancelled.discard(r.request_id)
                        f.set_exception(PrefillCancelled(r.request_id))
            if not live:
                continue
            try:
                results = self.engine.prefill([r for r, _ in live])
            except Exception as exc:  # noqa: BLE001 - every waiter must hear of the failure
                log.exception("prefill batch failed")
                for _, f in live:
                    f.set_exception(exc)
                continue
            self.batches += 1
            for (_, f), res in zip(live, results, strict=False):
                f.set_result(res)
