"""The web process's one stream reader (inference.wire.reader), on the session's real
Redis: one blocking connection follows any number of streams, a follower that never
reads neither delays the others nor loses anything, and resumes share a key."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
import redis
import redis.asyncio as aioredis

from inference.wire import reader as reader_mod
from inference.wire.reader import StreamReader


def _url() -> str:
    return os.environ["REDIS_URL"]


def _new_reader(name: str) -> StreamReader:
    pool = aioredis.BlockingConnectionPool.from_url(_url(), max_connections=2, timeout=10, client_name=name)
    return StreamReader(_url(), aioredis.Redis(connection_pool=pool))


def _connections(client: redis.Redis, name: str) -> int:
    return sum(1 for c in client.client_list() if c.get("name") == name)


async def _collect(follower, want: int, timeout: float = 20) -> list[tuple[str, dict]]:
    got: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < want and loop.time() < deadline:
        got += await follower.next(timeout=1.0)
    return got


def test_one_blocking_connection_follows_five_hundred_streams():
    sync = redis.Redis.from_url(_url())
    run = uuid.uuid4().hex[:8]
    keys = [f"test:reader:{run}:{i}" for i in range(500)]

    async def main():
        r = _new_reader(f"reader-{run}")
        followers = [r.follow(k) for k in keys]
        pipe = sync.pipeline(transaction=False)
        for i, k in enumerate(keys):
            pipe.xadd(k, {"n": str(i)})
        pipe.execute()
        got = await asyncio.gather(*(_collect(f, 1) for f in followers))
        # The reader's connection is unnamed (its own); the short-command pool is bounded.
        pool_conns = _connections(sync, f"reader-{run}")
        reads = r.reads
        await r.aclose()
        return got, pool_conns, reads

    got, pool_conns, reads = asyncio.run(main())
    assert [int(g[0][1][b"n"]) for g in got] == list(range(500))
    assert pool_conns <= 2
    assert reads < 100, "the reader should read many streams per XREAD, not one each"
    sync.delete(*keys)


def test_a_follower_that_never_reads_delays_nobody_and_loses_nothing(monkeypatch):
    monkeypatch.setattr(reader_mod, "BUFFER", 8)
    sync = redis.Redis.from_url(_url())
    key = f"test:reader:{uuid.uuid4().hex[:8]}"

    async def main():
        r = _new_reader("reader-slow")
        fast, stalled = r.follow(key), r.follow(key)
        fast_got = []
        for n in range(100):
            sync.xadd(key, {"n": str(n)})
            fast_got += await _collect(fast, 1, timeout=10)
        assert stalled.lagging, "a follower over its buffer leaves the shared read"
        # The stalled follower now reads: everything, in order, from where it was.
        stalled_got = await _collect(stalled, 100)
        # And, caught up, it is back on the shared read for what comes next.
        sync.xadd(key, {"n": "100"})
        after = await _collect(stalled, 1, timeout=10)
        await r.aclose()
        return fast_got, stalled_got, after, stalled.lagging

    fast_got, stalled_got, after, lagging = asyncio.run(main())
    assert [int(f[b"n"]) for _, f in fast_got] == list(range(100))
    assert [int(f[b"n"]) for _, f in stalled_got] == list(range(100))
    assert [int(f[b"n"]) for _, f in after] == [100]
    assert not lagging
    sync.delete(key)


def test_a_resume_from_the_start_and_a_live_follower_share_one_key():
    sync = redis.Redis.from_url(_url())
    key = f"test:reader:{uuid.uuid4().hex[:8]}"
    ids = [sync.xadd(key, {"n": str(n)}).decode() for n in range(5)]

    async def main():
        r = _new_reader("reader-resume")
        live = r.follow(key, after=ids[-1])
        resumed = r.follow(key, after=ids[1])
        sync.xadd(key, {"n": "5"})
        got = await _collect(live, 1), await _collect(resumed, 4)
        await r.aclose()
        return got

    live_got, resumed_got = asyncio.run(main())
    assert [int(f[b"n"]) for _, f in live_got] == [5]
    assert [int(f[b"n"]) for _, f in resumed_got] == [2, 3, 4, 5]
    sync.delete(key)


@pytest.mark.timeout(90)
def test_a_follower_hears_an_entry_written_after_a_silence_longer_than_client_timeouts():
    """redis-py's asyncio client times out a socket read after 5 s by default, and
    most HTTP clients after 30 s: the reader's block outlasts neither into an error."""
    sync = redis.Redis.from_url(_url())
    key = f"test:reader:{uuid.uuid4().hex[:8]}"

    async def main():
        r = _new_reader("reader-silence")
        f = r.follow(key)
        quiet = 0
        while quiet < 31:  # a silence of 31 s, in one-second polls the follower answers empty
            assert await f.next(timeout=1.0) == []
            quiet += 1
        sync.xadd(key, {"n": "late"})
        got = await _collect(f, 1, timeout=10)
        task_ok = r._task is not None and not r._task.done()
        await r.aclose()
        return got, task_ok

    got, task_ok = asyncio.run(main())
    assert [f[b"n"] for _, f in got] == [b"late"]
    assert task_ok
    sync.delete(key)


def test_a_lagging_follower_that_reads_some_then_falls_behind_again_loses_nothing(monkeypatch):
    """It drains its buffer while entries it never got are still in Redis only, and new
    ones arrive on the shared read meanwhile: it must read the missed ones first."""
    monkeypatch.setattr(reader_mod, "BUFFER", 8)
    sync = redis.Redis.from_url(_url())
    key = f"test:reader:{uuid.uuid4().hex[:8]}"

    async def main():
        r = _new_reader("reader-lag-again")
        fast, slow = r.follow(key), r.follow(key)
        n = 0
        slow_got = []
        for _round in range(3):
            for _ in range(20):
                sync.xadd(key, {"n": str(n)})
                n += 1
                await _collect(fast, 1, timeout=10)
            slow_got += await slow.next(timeout=1.0)  # one read a round: far behind
        slow_got += await _collect(slow, n - len(slow_got))
        await r.aclose()
        return slow_got, n

    slow_got, n = asyncio.run(main())
    assert [int(f[b"n"]) for _, f in slow_got] == list(range(n))
    sync.delete(key)
