"""The subprocess side of `python -m benchmarks engine`'s disaggregated setup.

Two processes, started with the spawn method, each pinned to its own core with one torch
thread, talking over multiprocessing queues (no Redis, no Celery: the engine alone):

    driver ──prompts──► PREFILL (core 0)                 ┌─► DECODE (core 1)
                         PrefillEngine over whatever     │    takes the KV, submits to
                         prompts have arrived (batched), │    DecodeEngine (continuous
                         first token ──────► driver      │    batching); tokens 1.. ──► driver
                         KV ──► SharedMemoryKVStore ─────┤
                         (request id, prompt ids, first  │
                          token, sampling, ts) ──handoff─┘

Messages (plain tuples, pickled by the queues):
- driver → prefill `in_q`: ("prompt", rid, prompt_ids, sampling_dict), ("cancel", rid),
  ("stop",)
- prefill → decode `handoff_q`: ("kv", rid, prompt_ids, first_token, sampling_dict),
  ("cancel", rid), ("stop",)
- both → driver `events_q`: ("ready", role, info), ("tokens", [(rid, index, token, unix_ts)]),
  ("finish", rid, reason, output_tokens), ("stats", role, [(rid, {name: value})]),
  ("error", role, text)

Every token timestamp is the engine's own (`time.time()` when the token was sampled:
prefill's return for index 0, the decode engine's on_token for 1..), so batching the
messages to the driver delays nothing that is measured. Torch is imported only after the
process is pinned, so its thread pool starts on the right core.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass

_FLUSH_S = 0.005  # how often the decode side ships accumulated token events
_KV_TTL_S = 120.0


@dataclass(frozen=True)
class WorkerSpec:
    model: str
    dtype: str
    core: int
    kv_root: str
    prefix_cache_tokens: int = 0
    max_batch: int = 64
    prefill_max_batch: int = 8


def _pin(core: int) -> None:
    # Before torch is imported: OpenMP's pool inherits the affinity of the thread that
    # creates it. EngineConfig.cpu_affinity repeats this for the engine's own threads.
    os.sched_setaffinity(0, {core})
    os.environ["OMP_NUM_THREADS"] = "1"


def _config(spec: WorkerSpec):
    from inference.engine.config import EngineConfig

    return EngineConfig(
        model=spec.model, dtype=spec.dtype, num_threads=1, cpu_affinity=[spec.core],
        max_batch=spec.max_batch, prefill_max_batch=spec.prefill_max_batch,
        prefix_cache_tokens=spec.prefix_cache_tokens,
    )


def prefill_worker(spec: WorkerSpec, in_q, handoff_q, events_q) -> None:
    _pin(spec.core)
    try:
        _prefill_loop(spec, in_q, handoff_q, events_q)
    except BaseException:  # the driver must hear about it rather than wait forever
        events_q.put(("error", "prefill", traceback.format_exc()))
        raise


def _prefill_loop(spec: WorkerSpec, in_q, handoff_q, events_q) -> None:
    from inference.engine.loader import load_model
    from inference.engine.prefill import PrefillEngine, PrefillRequest
    from inference.engine.sampling import SamplingParams
    from inference.kvstore import SharedMemoryKVStore

    cfg = _config(spec)
    loaded = load_model(cfg)
    engine = PrefillEngine(loaded, cfg)
    store = SharedMemoryKVStore(spec.kv_root)
    events_q.put(("ready", "prefill", {"pid": os.getpid(), "affinity": sorted(os.sched_getaffinity(0)),
                                       "dtype": str(loaded.model.dtype)}))
    pending: deque[tuple[str, list[int], dict]] = deque()
    stopping = False

    def handle(msg) -> None:
        nonlocal stopping
        kind = msg[0]
        if kind == "prompt":
            pending.append((msg[1], msg[2], msg[3]))
        elif kind == "cancel":
            rid = msg[1]
            for item in list(pending):
                if item[0] == rid:  # not prefilled yet: it ends here
                    pending.remove(item)
                    events_q.put(("finish", rid, "cancelled", 0))
                    return
            handoff_q.put(msg)  # already handed over (queue order keeps it behind the KV)
        elif kind == "stop":
            stopping = True

    while not stopping:
        if not pending:
            handle(in_q.get())
        while True:  # whatever else has arrived joins this forward
            try:
                handle(in_q.get_nowait())
            except queue.Empty:
                break
        batch = [pending.popleft() for _ in range(min(len(pending), spec.prefill_max_batch))]
        if not batch:
            continue
        reqs = [PrefillRequest(rid, ids, SamplingParams.from_dict(sd)) for rid, ids, sd in batch]
        results = engine.prefill(reqs)
        now = time.time()
        # The first token goes out before the KV is stored: the user sees it at once.
        events_q.put(("tokens", [(r.request_id, 0, r.first_token, now) for r in results]))
        stats = []
        for (rid, ids, sd), r in zip(batch, results, strict=True):
            if r.finish_reason is not None:
                events_q.put(("finish", rid, r.finish_reason, 1))
                continue
            t0 = time.perf_counter()
            nbytes = store.put(rid, r.kv, ttl_s=_KV_TTL_S)
            put_ms = (time.perf_counter() - t0) * 1e3
            handoff_q.put(("kv", rid, ids, r.first_token, sd))
            stats.append((rid, {"prompt_tokens": len(ids), "batch": len(batch), "put_ms": put_ms,
                                "kv_bytes": nbytes, "compute_ms": r.timings.get("compute_ms")}))
        events_q.put(("stats", "prefill", stats))
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
    _pin(spec.core)
    try:
        _decode_loop(spec, handoff_q, events_q)
    except BaseException:
        events_q.put(("error", "decode", traceback.format_exc()))
        raise


def _decode_loop(spec: WorkerSpec, handoff_q, events_q) -> None:
    from inference.engine.decode import DecodeEngine, DecodeRequest
    from inference.engine.loader import load_model
    from inference.engine.sampling import SamplingParams
    from inference.kvstore import KVError, SharedMemoryKVStore

    cfg = _config(spec)
    loaded = load_model(cfg)
    engine = DecodeEngine(loaded, cfg)
    store = SharedMemoryKVStore(spec.kv_root)
    shipper = _TokenShipper(events_q)
    events_q.put(("ready", "decode", {"pid": os.getpid(), "affinity": sorted(os.sched_getaffinity(0)),
                                      "dtype": str(loaded.model.dtype)}))
    try:
        while True:
            msg = handoff_q.get()
            kind = msg[0]
            if kind == "kv":
                _, rid, ids, first, sd = msg
                t0 = time.perf_counter()
                try:
                    kv = store.take(rid, expected_fingerprint=loaded.fingerprint)
                except KVError as exc:  # a benchmark has no prefill to fall back to: report it
                    events_q.put(("finish", rid, f"kv-error: {exc}", 1))
                    continue
                events_q.put(("stats", "decode", [(rid, {"take_ms": (time.perf_counter() - t0) * 1e3})]))
                engine.submit(DecodeRequest(
                    request_id=rid, prompt_token_ids=ids, first_token=first, kv=kv,
                    sampling=SamplingParams.from_dict(sd),
                    on_token=shipper.on_token, on_finish=shipper.on_finish,
                ))
            elif kind == "cancel":
                engine.cancel(msg[1])
            elif kind == "stop":
                break
    finally:
        engine.shutdown()
        shipper.close()
