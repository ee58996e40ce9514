"""The Tandem systems the engine benchmark's workloads drive, all through the product's
engines: the colocated engine in this process, or the disaggregated pair in two pinned
processes (split_workers.py) with the KV handed through the KV store in shared memory."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import shutil
import tempfile
import threading
import time

from .tracker import Tracker


def greedy(max_tokens: int):
    from inference.engine.sampling import SamplingParams

    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


class TandemSystem:
    """Submit and cancel requests; each run's token times land in `tracker`."""

    name: str
    tracker: Tracker

    def submit(self, rid: str, prompt_ids: list[int], max_tokens: int, kind: str) -> None:
        raise NotImplementedError

    def cancel(self, rid: str) -> None:
        raise NotImplementedError

    def pids(self) -> list[int]:
        """Worker processes whose CPU time is the benchmark's own."""
        return []

    def describe(self) -> str:
        return ""

    def close(self) -> None:
        pass


class ColocatedSystem(TandemSystem):
    def __init__(self, loaded, config, *, chunked: bool):
        from inference.engine.colocated import ColocatedEngine

        self.name = "colocated_chunked" if chunked else "colocated"
        self.tracker = Tracker()
        self.engine = ColocatedEngine(loaded, config, chunked_prefill=chunked)

    def submit(self, rid, prompt_ids, max_tokens, kind):
        self.tracker.submitted(rid, kind)
        self.engine.submit(rid, prompt_ids, greedy(max_tokens), on_token=self._on_token, on_finish=self._on_finish)

    def _on_token(self, rid: str, index: int, token: int, ts: float) -> None:
        self.tracker.token(rid, index, ts)

    def _on_finish(self, rid: str, reason: str, stats) -> None:
        self.tracker.finish(rid, reason)

    def cancel(self, rid):
        self.engine.cancel(rid)

    def close(self):
        self.engine.shutdown()


class DisaggregatedSystem(TandemSystem):
    """The prefill and decode processes of split_workers.py, driven over queues."""

    def __init__(self, args: argparse.Namespace):
        from . import split_workers as sw

        self.name = "disaggregated"
        self.tracker = Tracker()
        self.kv_root = tempfile.mkdtemp(prefix="tandem-bench-kv-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        ctx = mp.get_context("spawn")  # never fork a process that has loaded torch
        self.in_q, self.handoff_q, self.events_q = ctx.Queue(), ctx.Queue(), ctx.Queue()
        common = {"model": str(args.model), "dtype": args.dtype, "kv_url": f"shm://{self.kv_root}",
                  "prefix_cache_tokens": args.prefix_cache_tokens}
        self.procs = [
            ctx.Process(target=sw.prefill_worker, name="bench-prefill", daemon=True,
                        args=(sw.WorkerSpec(core=args.prefill_core, **common), self.in_q, self.handoff_q,
                              self.events_q)),
            ctx.Process(target=sw.decode_worker, name="bench-decode", daemon=True,
                        args=(sw.WorkerSpec(core=args.decode_core, **common), self.handoff_q, self.events_q)),
        ]
        self.ready: dict[str, dict] = {}
        self._ready = threading.Event()
        self._closing = False
        for p in self.procs:
            p.start()
        self._collector = threading.Thread(target=self._collect, name="bench-collector", daemon=True)
        self._collector.start()
        deadline = time.monotonic() + 300
        while not self._ready.wait(1.0):
            if self.tracker.error or time.monotonic() > deadline or not all(p.is_alive() for p in self.procs):
                self.close()
                raise RuntimeError(f"workers did not start: {self.tracker.error or 'timeout or exit'}")

    def _collect(self) -> None:
        while True:
            try:
                msg = self.events_q.get(timeout=1.0)
            except queue.Empty:
                if self._closing:
                    return
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead:
                    self.tracker.fail(f"worker process exited: {dead}")
                continue
            kind = msg[0]
            if kind == "tokens":
                for rid, index, _token, ts in msg[1]:
                    self.tracker.token(rid, index, ts)
            elif kind == "finish":
                self.tracker.finish(msg[1], msg[2])
            elif kind == "stats":
                for rid, values in msg[2]:
                    self.tracker.worker_stats.setdefault(rid, {}).update(values)
            elif kind == "ready":
                self.ready[msg[1]] = msg[2]
                if len(self.ready) == 2:
                    self._ready.set()
            elif kind == "error":
                self.tracker.fail(f"{msg[1]} worker: {msg[2]}")

    def submit(self, rid, prompt_ids, max_tokens, kind):
        self.tracker.submitted(rid, kind)
        self.in_q.put(("prompt", rid, prompt_ids, greedy(max_tokens).to_dict()))

    def cancel(self, rid):
        self.in_q.put(("cancel", rid))

    def pids(self):
        return [p.pid for p in self.procs if p.pid is not None]

    def describe(self) -> str:
        return f"workers ready: {self.ready}"

    def close(self):
        self._closing = True
        try:
            self.in_q.put(("stop",))
            for p in self.procs:
                p.join(15)
        finally:
            for p in self.procs:
                if p.is_alive():
                    p.terminate()
                    p.join(5)
            self._collector.join(3)
            shutil.rmtree(self.kv_root, ignore_errors=True)
