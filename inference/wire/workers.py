"""Worker liveness, as the heartbeats in Redis say it: each worker (CPU and model tiers)
writes its state under `tandem:worker:<name>` every second (inference.worker.heartbeats),
expiring after a few missed beats, and lists its name in `tandem:workers`. The web tier
and the console read it here to show the workers and to tell whether a pool has anyone
serving it; every worker's watcher (inference.pipeline.supervisor) reads it to find the
dead ones.

A worker is dead when its heartbeat expired (any host), or at once when its process is
gone: a watcher on the same host, in the same PID namespace, sees that the PID it
advertised no longer runs (a zombie counts as gone)."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

import redis

from . import keys

INTERVAL_S = 1.0
TTL_S = 5.0  # five missed beats
FORGET_AFTER_S = 3600  # a name nobody claimed (no watcher ran) leaves the list after this


def heartbeat_write(client: redis.Redis, name: str, state: dict) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.set(keys.WORKER_HASH_PREFIX + name, json.dumps({**state, "ts": time.time()}), px=int(TTL_S * 1000))
    pipe.zadd(keys.WORKERS_SET, {name: time.time()})
    pipe.execute()


def heartbeat_clear(client: redis.Redis, name: str) -> None:
    """A worker that stops cleanly: its heartbeat goes at once (a watcher then moves
    anything it still held, without waiting for the key to expire)."""
    client.delete(keys.WORKER_HASH_PREFIX + name)


def live_workers(client: redis.Redis, *, role: str | None = None, pool: str | None = None) -> list[dict]:
    names = [n.decode() for n in client.zrange(keys.WORKERS_SET, 0, -1)]
    if not names:
        return []
    raws = client.mget([keys.WORKER_HASH_PREFIX + n for n in names])
    workers = [json.loads(raw) for raw in raws if raw is not None]
    return [w for w in workers
            if (role is None or w["role"] == role) and (pool is None or w["pool"] == pool)]


def this_process() -> dict:
    """What a heartbeat says about its process, so a watcher on the same host can tell
    when the process is gone: host, PID and PID namespace."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pidns": _pid_namespace()}


@dataclass(frozen=True)
class Dead:
    name: str
    process_gone: bool  # seen gone (same host), rather than a heartbeat that expired


def dead_workers(client: redis.Redis) -> list[Dead]:
    """Workers listed in `tandem:workers` that are dead: heartbeat expired, or (on this
    host) process gone while its heartbeat key still stands."""
    pipe = client.pipeline(transaction=False)
    pipe.zremrangebyscore(keys.WORKERS_SET, "-inf", time.time() - FORGET_AFTER_S)
    pipe.zrange(keys.WORKERS_SET, 0, -1)
    _, raw_names = pipe.execute()
    names = [n.decode() for n in raw_names]
    if not names:
        return []
    me = this_process()
    dead = []
    for name, raw in zip(names, client.mget([keys.WORKER_HASH_PREFIX + n for n in names]), strict=True):
        if raw is None:
            dead.append(Dead(name, False))
            continue
        state = json.loads(raw)
        if (state.get("host"), state.get("pidns")) == (me["host"], me["pidns"]) and me["pidns"] is not None \
                and isinstance(state.get("pid"), int) and not _running(state["pid"]):
            dead.append(Dead(name, True))
    return dead


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child its parent has not reaped yet is a zombie: gone all the same
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
