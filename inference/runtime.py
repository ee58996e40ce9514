"""A model worker's process-wide state: the engine loaded once when the worker starts
(not per task), the KV store, the stream publisher, the heartbeat, the cancel listener
and the listener-lease reaper. Celery task threads reach it through `get_runtime()`.

GPU workers must not fork after CUDA is initialised, so model workers run Celery's
threads (or solo) pool: the engine is loaded in the worker's main process."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

import redis
from django.conf import settings

from . import keys
from .engine.kvstore import KVStore, from_url
from .engine.loader import LoadedModel, load_model
from .heartbeats import HeartbeatThread, worker_name
from .prefill_batcher import PrefillBatcher
from .streams import StreamPublisher
from .worker_config import WorkerConfig

log = logging.getLogger(__name__)
REAP_INTERVAL_S = 5.0


@dataclass
class Runtime:
    config: WorkerConfig
    name: str
    client: redis.Redis
    model: LoadedModel
    kvstore: KVStore
    publisher: StreamPublisher
    prefill: PrefillBatcher | None = None
    decode: object | None = None  # engine.decode.DecodeEngine
    colocated: object | None = None  # engine.colocated.ColocatedEngine
    active: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    heartbeat: HeartbeatThread | None = None
    fallback_prefill: object | None = None  # decode workers: recomputes a lost KV entry
    _stop: threading.Event = field(default_factory=threading.Event)

    def track(self, request_id: str) -> None:
        with self.lock:
            self.active.add(request_id)

    def untrack(self, request_id: str) -> None:
        with self.lock:
            self.active.discard(request_id)

    def cancel(self, request_id: str) -> None:
        for engine in (self.decode, self.colocated):
            if engine is not None:
                engine.cancel(request_id)
        if self.prefill is not None:
            self.prefill.cancel(request_id)

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
        return out

    def stop(self) -> None:
        self._stop.set()
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


def start_runtime(config: WorkerConfig) -> Runtime:
    global _runtime
    from .engine.decode import DecodeEngine

    log.info("loading model %s for %s.%s", config.engine.model, config.role, config.pool)
    model = load_model(config.engine)
    client = redis.Redis.from_url(settings.REDIS_URL)
    rt = Runtime(
        config=config, name=worker_name(config.role, config.pool), client=client, model=model,
        kvstore=from_url(config.kv_url), publisher=StreamPublisher(client),
    )
    if config.role == "prefill":
        rt.prefill = PrefillBatcher(model, config.engine)
    elif config.role == "decode":
        rt.decode = DecodeEngine(model, config.engine)
    elif config.role == "colocated":
        from .engine.colocated import ColocatedEngine

        rt.colocated = ColocatedEngine(model, config.engine)
    device = str(config.engine.resolve_device())
    rt.heartbeat = HeartbeatThread(
        client, name=rt.name, role=config.role, pool=config.pool,
        static={"device": device, "dtype": str(config.engine.resolve_dtype()).removeprefix("torch."),
                "model": str(model.model_dir.name), "fingerprint": model.fingerprint[:12]},
        dynamic=rt.stats,
    )
    rt.heartbeat.beat()
    rt.heartbeat.start()
    threading.Thread(target=_listen_for_cancels, args=(rt,), name="cancel-listener", daemon=True).start()
    threading.Thread(target=_reap_abandoned, args=(rt,), name="reaper", daemon=True).start()
    _runtime = rt
    _runtime_ready.set_result(rt)
    log.info("worker %s ready", rt.name)
    return rt


def _listen_for_cancels(rt: Runtime) -> None:
    """Cancellation reaches the engine at once: the web tier publishes the request id.
    (Pub/sub may drop a message while reconnecting; the reaper below re-checks the
    durable cancel flags, so a lost message only delays a cancel by a few seconds.)"""
    while not rt._stop.is_set():
        try:
            pubsub = rt.client.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(keys.CANCEL_CHANNEL)
            while not rt._stop.is_set():
                msg = pubsub.get_message(timeout=1.0)
                if msg and msg["type"] == "message":
                    request_id = msg["data"].decode()
                    if request_id in rt.active:
                        rt.cancel(request_id)
        except Exception:  # Redis lost (or anything else): this thread must outlive it
            log.warning("cancel listener failed; reconnecting", exc_info=True)
            rt._stop.wait(1.0)


def _reap_abandoned(rt: Runtime) -> None:
    """Every few seconds, for the requests in flight here: cancel those flagged cancelled
    (in case the pub/sub message was missed) and those nobody listens to any more (the
    web tier keeps a lease per request, `tandem:listen:<id>`, while a client follows
    it; a lapsed lease means the client left and did not come back to resume)."""
    while not rt._stop.wait(REAP_INTERVAL_S):
        try:
            _reap_once(rt)
        except Exception:  # e.g. Redis lost, or read-only after a failover: try again next round
            log.warning("reaping abandoned requests failed", exc_info=True)


def _reap_once(rt: Runtime) -> None:
    with rt.lock:
        active = list(rt.active)
    if not active:
        return
    pipe = rt.client.pipeline(transaction=False)
    for r in active:
        pipe.exists(keys.cancel(r))
        pipe.exists(keys.listener(r))
    flags = pipe.execute()
    for i, request_id in enumerate(active):
        cancelled, listened = flags[2 * i], flags[2 * i + 1]
        if cancelled or not listened:
            if not listened:
                log.info("cancelling %s: no listener", request_id)
                rt.client.set(keys.cancel(request_id), "1", ex=3600)
            rt.cancel(request_id)
