"""Who holds each request in flight, kept in Redis beside the workers' heartbeats, so that
a dead worker's requests can be found and moved.

Every stage of a request (cpu, prefill, decode, colocated) is *owned* by the worker
running it. The record is one hash per request, `tandem:owner:<id>`:

  worker      the worker holding it now ("" once the stage is done)
  stage/rank  cpu 0 < prefill 1 < decode = colocated 2: a request only moves forward
  epoch       which delivery of this stage is the live one; bumped by every migration
  state       running (a worker has it) | claimed (a watcher took it from a dead worker
              and re-sent its task) | done (the stage finished) | lost (it migrated
              more times than the limit allows)
  migrations  how many times the request moved, all stages together
  task, args, queue, role, pool   how to send the stage again (the priority comes from
              the request's spec)

and each worker's requests are a set beside its heartbeat,
`tandem:worker:<name>:requests`. Three scripts change them, each atomic:

- `own` when a task starts. Its verdict says what the delivery is: `fresh` (start
  the stage), `resume` (a migrated stage: continue what the dead worker began),
  `duplicate` (a live worker runs it already: the broker redelivered a long task),
  `stale` (a later epoch or stage exists, or the stage is done), or `lost`.
- `release` when the stage ends: state done, out of the worker's set.
- `claim` by any live worker's watcher (inference.pipeline.supervisor) once a worker is
  dead: every request that worker still ran moves to the claimer, epoch + 1, and the
  caller re-sends its task. Two watchers never both claim a request: the first empties
  the dead worker's set. A claimer that dies before the re-sent task starts leaves the
  request in its own set, and the next watcher claims it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from . import keys
from .broker import priority_lists

RANKS = {"cpu": 0, "prefill": 1, "decode": 2, "colocated": 2}
RECORD_TTL_S = 3600  # as long as the request's spec

FRESH, RESUME, DUPLICATE, STALE, LOST = "fresh", "resume", "duplicate", "stale", "lost"
MIGRATE, RESEND = "migrate", "resend"

_OWN = """
local sent = redis.call('GET', KEYS[3])
if sent then
  local ok, s = pcall(cjson.decode, sent)
  if not ok or s.queue == ARGV[8] then redis.call('DEL', KEYS[3]) end
end
local rec = {}
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do rec[flat[i]] = flat[i + 1] end
local rid, me, prefix = ARGV[1], ARGV[2], ARGV[11]
local rank, epoch = tonumber(ARGV[4]), tonumber(ARGV[5])
local migrations = tonumber(rec.migrations or '0')
local previous = rec.worker or ''
local verdict = 'fresh'
local took_over = 0
if rec.rank then
  local r, e = tonumber(rec.rank), tonumber(rec.epoch)
  if rec.state == 'lost' or r > rank or (r == rank and e > epoch) then
    return {'stale', migrations, previous}
  end
  if r == rank then
    if rec.state == 'done' then return {'stale', migrations, previous} end
    if rec.state == 'running' and e == epoch then
      if previous == me or redis.call('EXISTS', prefix .. previous) == 1 then
        return {'duplicate', migrations, previous}
      end
      -- Its worker died and no watcher has claimed it yet: this delivery takes over.
      migrations = migrations + 1
      took_over = 1
      redis.call('SREM', prefix .. previous .. ':requests', rid)
      if migrations > tonumber(ARGV[12]) then
        redis.call('HSET', KEYS[1], 'state', 'lost', 'worker', '', 'migrations', migrations)
        return {'lost', migrations, previous, 1}
      end
    end
    verdict = 'resume'
  end
  if previous ~= '' and previous ~= me then
    redis.call('SREM', prefix .. previous .. ':requests', rid)
  end
end
redis.call('HSET', KEYS[1], 'worker', me, 'stage', ARGV[3], 'rank', rank, 'epoch', epoch,
           'state', 'running', 'migrations', migrations, 'task', ARGV[6], 'args', ARGV[7],
           'queue', ARGV[8], 'role', ARGV[9], 'pool', ARGV[10])
redis.call('EXPIRE', KEYS[1], ARGV[13])
redis.call('SADD', KEYS[2], rid)
return {verdict, migrations, previous, took_over}
"""

_RELEASE = """
local f = redis.call('HMGET', KEYS[1], 'worker', 'rank', 'epoch')
if f[1] == ARGV[2] and tonumber(f[2]) == tonumber(ARGV[3]) and tonumber(f[3]) == tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'state', 'done', 'worker', '')
end
redis.call('SREM', KEYS[2], ARGV[1])
return 1
"""

_CLAIM = """
local dead, me, prefix = ARGV[1], ARGV[2], ARGV[3]
local hb = prefix .. dead
if ARGV[8] ~= '1' and redis.call('EXISTS', hb) == 1 then return {} end
redis.call('DEL', hb)
local set = hb .. ':requests'
local out = {}
for _, rid in ipairs(redis.call('SMEMBERS', set)) do
  local okey = ARGV[5] .. rid
  local f = redis.call('HMGET', okey, 'worker', 'state', 'epoch', 'migrations', 'stage', 'task',
                       'args', 'queue', 'role', 'pool', 'waiting_since')
  if f[1] == dead and (f[2] == 'running' or f[2] == 'claimed') then
    local epoch = tonumber(f[3]) + 1
    local migrations = tonumber(f[4] or '0')
    local since = f[11] or ARGV[7]
    if f[2] == 'running' then migrations = migrations + 1; since = ARGV[7] end
    local verdict = 'resend'
    if f[2] == 'running' then verdict = 'migrate' end
    if migrations > tonumber(ARGV[6]) then
      verdict = 'lost'
      redis.call('HSET', okey, 'state', 'lost', 'worker', '', 'migrations', migrations, 'epoch', epoch)
    else
      redis.call('HSET', okey, 'state', 'claimed', 'worker', me, 'migrations', migrations,
                 'epoch', epoch, 'waiting_since', since)
      redis.call('SADD', prefix .. me .. ':requests', rid)
    end
    table.insert(out, {rid, verdict, epoch, migrations, f[5], f[6], f[7], f[8], f[9], f[10], since})
  end
end
redis.call('DEL', set)
redis.call('ZREM', ARGV[4], dead)
return out
"""

_GIVE_UP = """
local f = redis.call('HMGET', KEYS[1], 'worker', 'state')
redis.call('SREM', KEYS[2], ARGV[2])
if f[1] == ARGV[1] and f[2] == 'claimed' then
  redis.call('HSET', KEYS[1], 'state', 'lost', 'worker', '')
  return 1
end
return 0
"""

_RESEND = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local s = cjson.decode(raw)
if tostring(s.at) ~= ARGV[1] then return 0 end
s.at = ARGV[2]
redis.call('SET', KEYS[1], cjson.encode(s), 'KEEPTTL')
return 1
"""


@dataclass(frozen=True)
class Stage:
    """One stage of one request, as its task runs it: enough to send it again."""

    request_id: str
    stage: str  # cpu | prefill | decode | colocated
    epoch: int
    task: str  # the task name (wire.broker) that runs it
    args: list  # the task's arguments, the epoch left out
    queue: str
    pool: str

    @property
    def role(self) -> str:
        return self.stage


@dataclass(frozen=True)
class Verdict:
    kind: str  # FRESH | RESUME | DUPLICATE | STALE | LOST
    migrations: int
    previous: str  # the worker that held it before ("" if none)
    took_over: bool = False  # straight from a dead worker, no watcher's claim between


@dataclass(frozen=True)
class Claimed:
    """A dead worker's request, now the claimer's: send `task(*args, epoch)` again, or
    (kind == LOST) fail it."""

    request_id: str
    kind: str  # MIGRATE (its worker died running it) | RESEND (a claimer died before it restarted) | LOST
    epoch: int
    migrations: int
    stage: str
    task: str
    args: list
    queue: str
    role: str
    pool: str
    waiting_since: float  # when its worker was found dead (first claim of this migration)


class Ownership:
    def __init__(self, client: redis.Redis):
        self.client = client
        self._own = client.register_script(_OWN)
        self._release = client.register_script(_RELEASE)
        self._claim = client.register_script(_CLAIM)
        self._give_up = client.register_script(_GIVE_UP)
        self._resend = client.register_script(_RESEND)

    def own(self, stage: Stage, worker: str, *, limit: int,
            before: Callable[[redis.client.Pipeline], None] | None = None) -> tuple[list, Verdict]:
        """Take `stage` for `worker`, in one round trip with the reads `before` queues on
        the pipeline (the spec, the cancel flag); returns their results and the verdict."""
        args = [stage.request_id, worker, stage.stage, RANKS[stage.stage], stage.epoch, stage.task,
                json.dumps(stage.args), stage.queue, stage.role, stage.pool,
                keys.WORKER_HASH_PREFIX, limit, RECORD_TTL_S]
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            if before is not None:
                before(pipe)
            # EVALSHA straight on the pipeline: a Script object would add a SCRIPT EXISTS
            # round trip to every execute. After a Redis restart the script is loaded again.
            pipe.evalsha(self._own.sha, 3, keys.owner(stage.request_id), keys.worker_requests(worker),
                         keys.sent(stage.request_id), *args)
            try:
                *rest, result = pipe.execute()
                return rest, verdict(result)
            except redis.exceptions.NoScriptError:
                if attempt:
                    raise
                self.client.script_load(_OWN)
        raise AssertionError("unreachable")

    def release(self, stage: Stage, worker: str) -> None:
        self._release(keys=[keys.owner(stage.request_id), keys.worker_requests(worker)],
                      args=[stage.request_id, worker, RANKS[stage.stage], stage.epoch])

    def claim(self, dead: str, claimer: str, *, limit: int, process_gone: bool = False) -> list[Claimed]:
        """Move what `dead` held to `claimer`. Unless `process_gone` (the caller saw the
        process end), only once its heartbeat has expired."""
        rows = self._claim(keys=[], args=[dead, claimer, keys.WORKER_HASH_PREFIX, keys.WORKERS_SET,
                                          keys.owner(""), limit, time.time(), "1" if process_gone else "0"])
        out = []
        for r in rows:
            r = [x.decode() if isinstance(x, bytes) else x for x in r]
            out.append(Claimed(request_id=r[0], kind=r[1], epoch=int(r[2]), migrations=int(r[3]), stage=r[4],
                               task=r[5], args=json.loads(r[6]), queue=r[7], role=r[8], pool=r[9],
                               waiting_since=float(r[10])))
        return out

    def held_by(self, worker: str) -> list[str]:
        return [r.decode() for r in self.client.smembers(keys.worker_requests(worker))]

    def records(self, request_ids: list[str]) -> list[dict]:
        pipe = self.client.pipeline(transaction=False)
        for rid in request_ids:
            pipe.hgetall(keys.owner(rid))
        return [{k.decode(): v.decode() for k, v in raw.items()} for raw in pipe.execute()]

    def resend_claim(self, lost: Unreceived) -> bool:
        """Whether this caller sends `lost` again (one of the watchers that found it)."""
        return bool(self._resend(keys=[keys.sent(lost.request_id)], args=[lost.at, repr(time.time())]))

    def give_up(self, request_id: str, worker: str) -> bool:
        """A claimed request waited too long for a worker: mark it lost (True) unless a
        worker took it meanwhile."""
        return bool(self._give_up(keys=[keys.owner(request_id), keys.worker_requests(worker)],
                                  args=[worker, request_id]))


def sent_record(stage: Stage) -> tuple[str, str]:
    """(key, value) of the record a sender writes before it sends `stage`'s task: the
    task's own() deletes it. One left behind after a consumer died means the message
    may be lost (see `unreceived`)."""
    return keys.sent(stage.request_id), json.dumps({"task": stage.task, "args": stage.args, "epoch": stage.epoch,
                                                     "queue": stage.queue, "at": repr(time.time())})


def mark_sent(pipe, stage: Stage) -> None:
    """Queue the sent record's write on a pipeline the caller executes (before its send)."""
    key, value = sent_record(stage)
    pipe.set(key, value, ex=RECORD_TTL_S)


@dataclass(frozen=True)
class Unreceived:
    request_id: str
    task: str
    args: list
    epoch: int
    queue: str
    at: str  # the record's send time, as written (compare-and-set when sending again)


def unreceived(client: redis.Redis, queue: str, *, older_than_s: float) -> list[Unreceived]:
    """Stages sent to `queue` more than `older_than_s` ago that no task has taken, and
    whose message is not in the queue either: lost, e.g. handed by Redis to a consumer
    that was being killed (its BRPOP still open while the process tore down), or taken
    by one killed before it recorded the message (Kombu's Redis transport is at most once
    there). Called after a consumer of `queue` died: it scans the sent records and the
    queue's lists."""
    now = time.time()
    names = list(client.scan_iter(match=keys.SENT_PATTERN, count=1000))
    if not names:
        return []
    candidates = []
    for name, raw in zip(names, client.mget(names), strict=True):
        if raw is None:
            continue
        rec = json.loads(raw)
        if rec.get("queue") == queue and now - float(rec["at"]) > older_than_s:
            rid = name.decode().removeprefix(keys.sent(""))
            candidates.append(Unreceived(rid, rec["task"], rec["args"], int(rec["epoch"]), queue, str(rec["at"])))
    if not candidates:
        return []
    pipe = client.pipeline(transaction=False)
    for name in priority_lists(queue):
        pipe.lrange(name, 0, -1)
    waiting = b"".join(m for lst in pipe.execute() for m in lst)  # the messages name their request id
    return [c for c in candidates if c.request_id.encode() not in waiting]


def verdict(result) -> Verdict:
    kind, migrations, previous, *took_over = (x.decode() if isinstance(x, bytes) else x for x in result)
    return Verdict(kind=kind, migrations=int(migrations), previous=previous, took_over=bool(took_over and took_over[0]))
