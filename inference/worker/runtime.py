"""A model worker's process-wide state: the engine loaded once when the worker starts
(not per task), the KV store, the stream publisher, the heartbeat and metrics endpoint
(worker.process), the cancel listener and the listener-lease reaper. Celery task threads
reach it through `get_runtime()`.

GPU workers must not fork after CUDA is initialised, so model workers run Celery's
threads (or solo) pool: the engine is loaded in the worker's main process."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

import redis

from ..engine.colocated import ColocatedEngine
from ..engine.decode import DecodeEngine
from ..engine.loader import LoadedModel, load_model
from ..engine.prefill import PrefillEngine
from ..kvstore import KVStore, from_url
from ..wire import metrics
from ..wire.connections import new_redis
from ..wire.publisher import StreamPublisher
from . import cancels
from .config import WorkerConfig
from .heartbeats import HeartbeatThread, worker_name
from .prefill_batcher import PrefillBatcher
from .process import start_process

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    config: WorkerConfig
    name: str
    client: redis.Redis
    model: LoadedModel
    kvstore: KVStore
    publisher: StreamPublisher
    prefill: PrefillBatcher | None = None
    decode: DecodeEngine | None = None
    colocated: ColocatedEngine | None = None
    active: set[str] = field(default_factory=set)
    # Requests in flight here that another worker now owns: this one was taken for dead
    # (a stall past the heartbeat's lifetime) and its requests migrated. Stopped here,
    # and never finished here (the reaper finds them: cancels._reap_once).
    disowned: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    heartbeat: HeartbeatThread | None = None
    fallback_prefill: PrefillEngine | None = None  # decode workers: recomputes a lost KV entry
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def role(self) -> str:
        return self.config.role

    def track(self, request_id: str) -> None:
        with self.lock:
            self.active.add(request_id)

    def untrack(self, request_id: str) -> None:
        with self.lock:
            self.active.discard(request_id)
            self.disowned.discard(request_id)

    def disown(self, request_id: str) -> None:
        with self.lock:
            if request_id not in self.active:
                return
            self.disowned.add(request_id)
        log.warning("%s now belongs to another worker; stopping it here", request_id)
        self.cancel(request_id)

    def is_disowned(self, request_id: str) -> bool:
        return request_id in self.disowned

    def cancel(self, request_id: str) -> None:
        for engine in (self.decode, self.colocated):
            if engine is not None:
                engine.cancel(request_id)
        if self.prefill is not None:
            self.prefill.cancel(request_id)

    def fallback_prefill_engine(self) -> PrefillEngine:
        """A decode worker's own prefill engine, made on first use: it recomputes a
        prompt's KV when the KV store lost or refused the entry."""
        with self.lock:
            if self.fallback_prefill is None:
                self.fallback_prefill = PrefillEngine(self.model, self.config.engine)
            return self.fallback_prefill

    def stats(self) -> dict:
        out = {"active_requests": len(self.active)}
        engine = self.decode or self.colocated
        if engine is not None:
            s = engine.stats()
            out.update(batch=s.active, max_batch=s.max_batch, queue_depth=s.waiting,
                       tokens_per_s=round(s.tokens_per_s, 1), kv_tokens=s.kv_tokens,
                       kv_bytes=s.kv_tokens * self.model.model.kv_bytes_per_token
                       if hasattr(self.model.model, "kv_bytes_per_token") else None)
        if self.prefill is not None:
            out.update(prefill_queue=self.prefill.pending(), prefill_batches=self.prefill.batches)
        labels = (self.config.role, self.config.pool)
        metrics.REQUESTS_RUNNING.labels(*labels).set(out["active_requests"])
        metrics.REQUESTS_WAITING.labels(*labels).set(out.get("queue_depth", out.get("prefill_queue", 0)))
        if engine is not None:
            metrics.BATCH_OCCUPANCY.labels(*labels).set(out["batch"])
            metrics.BATCH_SLOTS.labels(*labels).set(out["max_batch"])
            metrics.KV_TOKENS.labels(*labels).set(out["kv_tokens"])
        return out

    def healthy(self) -> tuple[bool, dict]:
        """For /healthz: the engine's threads still run (a prefill engine runs on its task
        threads and has none of its own)."""
        engines = {"decode": self.decode, "colocated": self.colocated}
        alive = {k: e.loop.is_alive() for k, e in engines.items() if e is not None}
        return all(alive.values()), {"engine_threads": alive}

    def stop(self) -> None:
        self.stopped.set()
        if self.heartbeat:
            self.heartbeat.stop()
        for engine in (self.decode, self.colocated):
            if engine is not None:
                engine.shutdown()
        if self.prefill:
            self.prefill.shutdown()


_runtime: Runtime | None = None
_runtime_ready = Future()


def get_runtime(timeout: float = 600) -> Runtime:
    return _runtime_ready.result(timeout=timeout)


def stop_runtime() -> None:
    """Stop this process's runtime, if it started one (the worker is shutting down)."""
    if _runtime is not None:
        _runtime.stop()


def start_runtime(config: WorkerConfig) -> Runtime:
    global _runtime
    log.info("loading model %s for %s.%s", config.engine.model, config.role, config.pool)
    model = load_model(config.engine)
    client = new_redis()
    rt = Runtime(
        config=config, name=worker_name(config.role, config.pool), client=client, model=model,
        kvstore=from_url(config.kv_url), publisher=StreamPublisher(client),
    )
    if config.role == "prefill":
        rt.prefill = PrefillBatcher(model, config.engine)
    elif config.role == "decode":
        rt.decode = DecodeEngine(model, config.engine)
    elif config.role == "colocated":
        rt.colocated = ColocatedEngine(model, config.engine)
    device = str(config.engine.resolve_device())
    proc = start_process(
        config.role, config.pool, client=client,
        static={"device": device, "dtype": str(config.engine.resolve_dtype()).removeprefix("torch."),
                "model": str(model.model_dir.name), "fingerprint": model.fingerprint[:12]},
        dynamic=rt.stats, healthy=rt.healthy,
    )
    rt.heartbeat = proc.heartbeat
    cancels.start_threads(rt)
    _runtime = rt
    _runtime_ready.set_result(rt)
    log.info("worker %s ready", rt.name)
    return rt
