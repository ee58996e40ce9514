"""Cancelling a model worker's requests: at once when the web tier publishes a cancel,
and by a reaper that re-checks the durable flags and the listener leases every few
seconds (a lapsed lease means the client left and did not come back to resume). The
reaper also stops requests that another worker now owns (this one was taken for dead
and its requests migrated: wire.worker_ownership)."""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import redis

from ..wire import keys

log = logging.getLogger(__name__)
REAP_INTERVAL_S = 5.0


class Runtime(Protocol):
    """What these threads need of the worker's runtime (`runtime.Runtime`)."""

    client: redis.Redis
    name: str  # this worker's name, as ownership records it
    role: str  # prefill | decode | colocated: the stage its requests are in
    active: set[str]  # the requests in flight here
    lock: threading.Lock  # guards `active`
    stopped: threading.Event

    def cancel(self, request_id: str) -> None: ...

    def disown(self, request_id: str) -> None: ...


def start_threads(rt: Runtime) -> None:
    threading.Thread(target=_listen_for_cancels, args=(rt,), name="cancel-listener", daemon=True).start()
    threading.Thread(target=_reap_abandoned, args=(rt,), name="reaper", daemon=True).start()


def _listen_for_cancels(rt: Runtime) -> None:
    """Cancellation reaches the engine at once: the web tier publishes the request id.
    (Pub/sub may drop a message while reconnecting; the reaper below re-checks the
    durable cancel flags, so a lost message only delays a cancel by a few seconds.)"""
    while not rt.stopped.is_set():
        try:
            pubsub = rt.client.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(keys.CANCEL_CHANNEL)
            while not rt.stopped.is_set():
                msg = pubsub.get_message(timeout=1.0)
                if msg and msg["type"] == "message":
                    request_id = msg["data"].decode()
                    if request_id in rt.active:
                        rt.cancel(request_id)
        except Exception:  # Redis lost (or anything else): this thread must outlive it
            log.warning("cancel listener failed; reconnecting", exc_info=True)
            rt.stopped.wait(1.0)


def _reap_abandoned(rt: Runtime) -> None:
    """Every few seconds, for the requests in flight here: cancel those flagged cancelled
    (in case the pub/sub message was missed) and those nobody listens to any more (the
    web tier keeps a lease per request, `tandem:listen:<id>`, while a client follows
    it; a lapsed lease means the client left and did not come back to resume)."""
    while not rt.stopped.wait(REAP_INTERVAL_S):
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
        pipe.hmget(keys.owner(r), "worker", "state", "stage")
    flags = pipe.execute()
    for i, request_id in enumerate(active):
        cancelled, listened, (owner, state, stage) = flags[3 * i], flags[3 * i + 1], flags[3 * i + 2]
        # Still in this worker's stage, but held by another (or lost): it migrated away.
        if stage and stage.decode() == rt.role and (state == b"lost" or (owner and owner.decode() != rt.name)):
            rt.disown(request_id)
            continue
        if cancelled or not listened:
            if not listened:
                log.info("cancelling %s: no listener", request_id)
                rt.client.set(keys.cancel(request_id), "1", ex=keys.CANCEL_TTL_S)
            rt.cancel(request_id)
