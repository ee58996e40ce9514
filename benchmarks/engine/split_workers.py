"""The two processes of the engine benchmark's disaggregated system: the product's prefill
and decode engines, each in a spawned process of its own pinned to one core with one
torch thread, as the prefill and decode workers run them, without Celery or Redis:

    driver ──prompts──► PREFILL process                       ┌─► DECODE process
                         PrefillBatcher (the prefill worker's   │    KV store take,
                         batcher over a PrefillEngine),          │    DecodeEngine (continuous
                         first token ──────► driver              │    batching); tokens 1.. ──► driver
                         KV ──► KV store (shared memory) ────────┤
                         (request id, prompt ids, first token,   │
                          sampling) ──handoff───────────────────┘

Messages (plain tuples, pickled by the multiprocessing queues):
- driver → prefill `in_q`: ("prompt", rid, prompt_ids, sampling_dict), ("cancel", rid), ("stop",)
- prefill → decode `handoff_q`: ("kv", rid, prompt_ids, first_token, sampling_dict),
  ("cancel", rid), ("stop",)
- both → driver `events_q`: ("ready", role, info), ("tokens", [(rid, index, token, unix_ts)]),
  ("finish", rid, reason, output_tokens), ("stats", role, [(rid, {name: value})]),
  ("error", role, text)

Every token timestamp is the engine's own (when the batcher's future resolved for index
0, the decode engine's on_token for 1..), so shipping the messages to the driver in
batches delays nothing that is measured.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

_FLUSH_S = 0.005  # how often the decode side ships accumulated token events
_KV_TTL_S = 120.0


@dataclass(frozen=True)
class WorkerSpec:
    model: str
    dtype: str
    core: int
    kv_url: str
    prefix_cache_tokens: int = 0
    max_batch: int = 64
    prefill_max_batch: int = 8


def _serve(role: str, spec: WorkerSpec, events_q, body: Callable) -> None:
    """Load the model on `spec.core` and run body(model, config, kv_store); the driver
    hears of any failure rather than waiting forever."""
    # One OpenMP thread before torch starts its pool; the engine config pins this process
    # (the product's pin_process) before it loads the weights.
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        from inference.engine.config import EngineConfig
        from inference.engine.loader import load_model
        from inference.kvstore import from_url

        config = EngineConfig(model=spec.model, dtype=spec.dtype, num_threads=1, cpu_affinity=[spec.core],
                              max_batch=spec.max_batch, prefill_max_batch=spec.prefill_max_batch,
                              prefix_cache_tokens=spec.prefix_cache_tokens)
        loaded = load_model(config)
        events_q.put(("ready", role, {"pid": os.getpid(), "affinity": sorted(os.sched_getaffinity(0)),
                                      "dtype": str(loaded.model.dtype), "block_rows": loaded.model.block_rows}))
        body(loaded, config, from_url(spec.kv_url))
    except BaseException:
        events_q.put(("error", role, traceback.format_exc()))
        raise


def prefill_worker(spec: WorkerSpec, in_q, handoff_q, events_q) -> None:
    _serve("prefill", spec, events_q, lambda loaded, config, store: _prefill(
        loaded, config, store, in_q, handoff_q, events_q))


def _prefill(loaded, config, store, in_q, handoff_q, events_q) -> None:
    from inference.engine.prefill import PrefillRequest
    from inference.engine.sampling import SamplingParams
    from inference.worker.prefill_batcher import PrefillBatcher

    batcher = PrefillBatcher(loaded, config)
    # Finished prefills and cancels, in the order they happened, for the hand-off thread:
    # as in the worker, the batcher's thread goes on to the next forward meanwhile.
    done: queue.Queue = queue.Queue()
    handing = threading.Thread(target=_hand_off, args=(store, done, handoff_q, events_q), name="bench-handoff",
                               daemon=True)
    handing.start()
    while (msg := in_q.get())[0] != "stop":
        if msg[0] == "prompt":
            _, rid, ids, sd = msg
            fut = batcher.submit(PrefillRequest(rid, ids, SamplingParams.from_dict(sd)))
            fut.add_done_callback(lambda f, m=msg: done.put(("done", *m[1:], f, time.time())))
        elif msg[0] == "cancel":
            batcher.cancel(msg[1])  # a request still waiting ends at once (PrefillCancelled)
            done.put(msg)
    done.put(("stop",))
    handing.join()
    batcher.shutdown()


def _hand_off(store, done: queue.Queue, handoff_q, events_q) -> None:
    from inference.worker.prefill_batcher import PrefillCancelled

    cancelled: set[str] = set()  # cancelled before their prefill result came
    handed: set[str] = set()  # with the decode process
    while (item := done.get())[0] != "stop":
        if item[0] == "cancel":
            if item[1] in handed:
                handoff_q.put(item)  # behind its KV message: the queue keeps the order
            else:
                cancelled.add(item[1])
            continue
        _, rid, ids, sd, fut, ts = item
        try:
            r = fut.result()
        except PrefillCancelled:
            events_q.put(("finish", rid, "cancelled", 0))
            continue
        # The first token goes out before the KV is stored: the user sees it at once.
        events_q.put(("tokens", [(rid, 0, r.first_token, ts)]))
        if r.finish_reason is not None or rid in cancelled:
            events_q.put(("finish", rid, r.finish_reason or "cancelled", 1))
            continue
        t0 = time.perf_counter()
        nbytes = store.put(rid, r.kv, ttl_s=_KV_TTL_S)
        put_ms = (time.perf_counter() - t0) * 1e3
        handoff_q.put(("kv", rid, ids, r.first_token, sd))
        handed.add(rid)
        events_q.put(("stats", "prefill", [(rid, {
            "prompt_tokens": len(ids), "batch": r.timings.get("batch_size"), "put_ms": put_ms,
            "kv_bytes": nbytes, "compute_ms": r.timings.get("compute_ms")})]))
    handoff_q.put(("stop",))


class _TokenShipper:
    """Collects on_token / on_finish calls (engine thread) and ships them in batches."""

    def __init__(self, events_q):
        self.events_q = events_q
        self._lock = threading.Lock()
        self._tokens: list[tuple[str, int, int, float]] = []
        self._finishes: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-shipper", daemon=True)
        self._thread.start()

    def on_token(self, rid: str, index: int, token: int, ts: float) -> None:
        with self._lock:
            self._tokens.append((rid, index, token, ts))

    def on_finish(self, rid: str, reason: str, stats) -> None:
        with self._lock:
            self._finishes.append(("finish", rid, reason, stats.output_tokens))

    def flush(self) -> None:
        with self._lock:
            tokens, self._tokens = self._tokens, []
            finishes, self._finishes = self._finishes, []
        if tokens:
            self.events_q.put(("tokens", tokens))
        for f in finishes:  # after the tokens they follow
            self.events_q.put(f)

    def _run(self) -> None:
        while not self._stop.wait(_FLUSH_S):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.flush()


def decode_worker(spec: WorkerSpec, handoff_q, events_q) -> None:
    _serve("decode", spec, events_q, lambda loaded, config, store: _decode(
        loaded, config, store, handoff_q, events_q))


def _decode(loaded, config, store, handoff_q, events_q) -> None:
    from inference.engine.decode import DecodeEngine, DecodeRequest
    from inference.engine.sampling import SamplingParams
    from inference.kvstore import KVError

    engine = DecodeEngine(loaded, config)
    shipper = _TokenShipper(events_q)
    try:
        while (msg := handoff_q.get())[0] != "stop":
            if msg[0] == "cancel":
                engine.cancel(msg[1])
                continue
            _, rid, ids, first, sd = msg
            t0 = time.perf_counter()
            try:
                kv = store.take(rid, expected_fingerprint=loaded.fingerprint)
            except KVError as exc:  # the worker would recompute the prefill; a benchmark reports it
                events_q.put(("finish", rid, f"kv-error: {exc}", 1))
                continue
            events_q.put(("stats", "decode", [(rid, {"take_ms": (time.perf_counter() - t0) * 1e3})]))
            engine.submit(DecodeRequest(request_id=rid, prompt_token_ids=ids, first_token=first, kv=kv,
                                        sampling=SamplingParams.from_dict(sd),
                                        on_token=shipper.on_token, on_finish=shipper.on_finish))
    finally:
        engine.shutdown()
        shipper.close()
