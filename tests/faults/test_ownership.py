"""Ownership records against a real Redis (no worker processes): which delivery of a
stage runs it, how a dead worker's requests are claimed exactly once, and when a
request is lost."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from inference.wire import keys, workers
from inference.wire.worker_ownership import (
    DUPLICATE,
    FRESH,
    LOST,
    MIGRATE,
    RESEND,
    RESUME,
    STALE,
    Ownership,
    Stage,
)


@pytest.fixture
def own(redis_client):
    return Ownership(redis_client)


def stage(rid: str, name: str = "decode", epoch: int = 0) -> Stage:
    return Stage(request_id=rid, stage=name, epoch=epoch, task=f"tandem.{name}", args=[rid, {"first_token": 5}],
                 queue=f"{name}.shared", pool="shared")


def beat(client, name: str, **state) -> None:
    workers.heartbeat_write(client, name, {"name": name, "role": "decode", "pool": "shared", **state})


def kind(own: Ownership, st: Stage, worker: str, limit: int = 3) -> str:
    return own.own(st, worker, limit=limit)[1].kind


@pytest.fixture
def w():
    """Worker names of this test's own (the Redis is shared by the session's tests)."""
    uid = uuid.uuid4().hex[:8]
    return lambda name: f"{name}-{uid}"


def test_a_live_workers_stage_delivered_again_is_a_duplicate_and_a_later_stage_moves_it_on(own, redis_client, w):
    rid = str(uuid.uuid4())
    beat(redis_client, w("prefill-a"))
    beat(redis_client, w("decode-a"))
    assert kind(own, stage(rid, "prefill"), w("prefill-a")) == FRESH
    assert kind(own, stage(rid, "prefill"), w("prefill-b")) == DUPLICATE  # the broker redelivered it
    assert kind(own, stage(rid, "decode"), w("decode-a")) == FRESH  # handed on before prefill released
    assert redis_client.smembers(keys.worker_requests(w("prefill-a"))) == set()
    own.release(stage(rid, "prefill"), w("prefill-a"))  # too late: decode has it, nothing changes
    assert redis_client.hget(keys.owner(rid), "worker") == w("decode-a").encode()
    assert kind(own, stage(rid, "prefill"), w("prefill-b")) == STALE  # a stage behind
    own.release(stage(rid, "decode"), w("decode-a"))
    assert kind(own, stage(rid, "decode"), w("decode-b")) == STALE  # done


def test_a_dead_workers_requests_are_claimed_once_and_their_old_deliveries_go_stale(own, redis_client, w):
    rids = [str(uuid.uuid4()) for _ in range(3)]
    beat(redis_client, w("decode-dead"))
    for rid in rids:
        own.own(stage(rid), w("decode-dead"), limit=3)
    assert own.claim(w("decode-dead"), w("watcher-1"), limit=3) == []  # its heartbeat still stands
    claimed = own.claim(w("decode-dead"), w("watcher-1"), limit=3, process_gone=True)
    assert sorted(c.request_id for c in claimed) == sorted(rids)
    assert {(c.kind, c.epoch, c.migrations, c.task, c.queue) for c in claimed} == {
        (MIGRATE, 1, 1, "tandem.decode", "decode.shared")}
    assert claimed[0].args == [claimed[0].request_id, {"first_token": 5}]
    assert own.claim(w("decode-dead"), w("watcher-2"), limit=3, process_gone=True) == []  # a second watcher: nothing
    assert redis_client.zscore(keys.WORKERS_SET, w("decode-dead")) is None

    rid = rids[0]
    assert kind(own, stage(rid, epoch=0), w("decode-b")) == STALE  # the dead worker's task, restored by the broker
    assert kind(own, stage(rid, epoch=1), w("decode-b")) == RESUME  # the re-sent one
    assert redis_client.smembers(keys.worker_requests(w("watcher-1"))) == {r.encode() for r in rids[1:]}


def test_a_claimer_that_dies_before_the_resent_task_starts_leaves_it_for_the_next(own, redis_client, w):
    rid = str(uuid.uuid4())
    own.own(stage(rid), w("decode-dead"), limit=3)
    [first] = own.claim(w("decode-dead"), w("watcher-1"), limit=3)
    [again] = own.claim(w("watcher-1"), w("watcher-2"), limit=3)  # watcher-1's heartbeat expired too
    assert (first.kind, again.kind) == (MIGRATE, RESEND)
    assert (again.epoch, again.migrations) == (2, 1)  # one more epoch, still one migration
    assert again.waiting_since == first.waiting_since
    assert kind(own, stage(rid, epoch=1), w("decode-b")) == STALE
    assert kind(own, stage(rid, epoch=2), w("decode-b")) == RESUME


def test_past_the_migration_limit_a_request_is_lost(own, redis_client, w):
    rid = str(uuid.uuid4())
    own.own(stage(rid), w("w0"), limit=1)
    [c] = own.claim(w("w0"), w("w1"), limit=1)
    assert c.kind == MIGRATE
    assert kind(own, stage(rid, epoch=1), w("w1"), limit=1) == RESUME
    [c] = own.claim(w("w1"), w("w2"), limit=1)
    assert (c.kind, c.migrations) == (LOST, 2)
    assert kind(own, stage(rid, epoch=2), w("w3"), limit=1) == STALE


def test_a_redelivery_that_finds_its_owner_dead_before_any_watcher_takes_over(own, redis_client, w):
    rid = str(uuid.uuid4())
    own.own(stage(rid), w("decode-gone"), limit=3)  # no heartbeat: dead
    results, verdict = own.own(stage(rid), w("decode-b"), limit=3)
    assert (verdict.kind, verdict.took_over, verdict.migrations, verdict.previous) == (RESUME, True, 1, w("decode-gone"))
    assert own.claim(w("decode-gone"), w("watcher"), limit=3) == []  # nothing left to move


def test_a_process_gone_on_this_host_is_dead_before_its_heartbeat_expires(redis_client):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    name = f"decode.shared@test:{child.pid}"
    me = workers.this_process()
    beat(redis_client, name, host=me["host"], pid=child.pid, pidns=me["pidns"])
    beat(redis_client, "decode.shared@elsewhere:1", host="elsewhere", pid=os.getpid(), pidns=me["pidns"])
    dead = {d.name: d.process_gone for d in workers.dead_workers(redis_client)}
    assert dead.get(name) is True
    assert "decode.shared@elsewhere:1" not in dead  # another host's PID says nothing here
    redis_client.delete(keys.WORKER_HASH_PREFIX + "decode.shared@elsewhere:1")
    assert {d.name: d.process_gone for d in workers.dead_workers(redis_client)}["decode.shared@elsewhere:1"] is False
    redis_client.zrem(keys.WORKERS_SET, name, "decode.shared@elsewhere:1")


def test_a_sent_record_goes_when_its_task_starts_and_one_left_without_a_message_is_found(own, redis_client, w):
    from inference.wire.worker_ownership import mark_sent, unreceived

    queue = f"decode.{w('pool')}"
    taken, waiting, lost = (str(uuid.uuid4()) for _ in range(3))
    for rid in (taken, waiting, lost):
        pipe = redis_client.pipeline()
        mark_sent(pipe, Stage(request_id=rid, stage="decode", epoch=0, task="tandem.decode", args=[rid, {}],
                              queue=queue, pool="p"))
        pipe.execute()
    own.own(Stage(request_id=taken, stage="decode", epoch=0, task="tandem.decode", args=[], queue=queue, pool="p"),
            w("decode-a"), limit=3)
    assert not redis_client.exists(keys.sent(taken))
    redis_client.lpush(f"{queue}:3", f'{{"headers": {{"argsrepr": "(\'{waiting}\', {{}})"}}}}')
    try:
        assert unreceived(redis_client, queue, older_than_s=60) == []  # too fresh to tell
        [found] = unreceived(redis_client, queue, older_than_s=0)
        assert (found.request_id, found.task, found.args, found.epoch) == (lost, "tandem.decode", [lost, {}], 0)
        assert own.resend_claim(found) is True
        assert own.resend_claim(found) is False  # a second watcher that found it too
    finally:
        redis_client.delete(f"{queue}:3", *(keys.sent(r) for r in (waiting, lost)))
