"""The workers' state while a phase runs: each model worker's heartbeat (batch, engine
queue, prefill queue) and the Celery queues' lengths, sampled on a background thread."""

from __future__ import annotations

import threading
import time

from ..stats import summarize


class StateSampler:
    """Every `interval` s; a queue's length counts every priority list of the queue."""

    def __init__(self, queues: list[str], *, interval: float = 0.5):
        from inference.wire.connections import new_redis

        self.client = new_redis()  # its own pool: the sampler's thread never holds another's connection
        self.queues, self.interval = queues, interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="state-sampler", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from inference.wire.workers import live_workers

        while not self._stop.wait(self.interval):
            try:
                sample = {"t": time.time(), "queues": {}, "workers": {}}
                pipe = self.client.pipeline(transaction=False)
                names = [q if p == 0 else f"{q}:{p}" for q in self.queues for p in range(10)]
                for n in names:
                    pipe.llen(n)
                lengths = pipe.execute()
                for q in self.queues:
                    sample["queues"][q] = sum(n for name, n in zip(names, lengths, strict=True)
                                              if name == q or name.startswith(q + ":"))
                for w in live_workers(self.client):
                    key = f"{w.get('role')}.{w.get('pool')}"
                    sample["workers"][key] = {k: w.get(k) for k in ("batch", "queue_depth", "prefill_queue",
                                                                     "active_requests", "tokens_per_s")}
                self.samples.append(sample)
            except Exception:  # noqa: BLE001 - a sampler must never take the benchmark down
                continue

    def summary(self) -> dict:
        out: dict = {}
        for q in self.queues:
            out[f"queue:{q}"] = summarize(s["queues"].get(q) for s in self.samples)
        keys = {(w, k) for s in self.samples for w, d in s["workers"].items() for k in d}
        for w, k in sorted(keys):
            out[f"{w}:{k}"] = summarize(s["workers"].get(w, {}).get(k) for s in self.samples)
        return out
