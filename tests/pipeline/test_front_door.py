"""The real-time front door under load, on a platform of its own (daphne and the three
model tiers on the tiny model, so replies are quick and many fit a decode batch):
bursts of sockets all connect, many replies stream at once with exact indices, a client
that never reads delays nobody, and the web process holds a handful of Redis
connections whatever the number of sockets."""

from __future__ import annotations

import asyncio
import json

import psutil
import pytest
import redis as redis_lib
import websockets
from websockets.asyncio.client import connect

from devstack.processes import database_url, new_log_dir, running_platform
from inference.engine.tiny import build_tiny_model
from tests.factories import make_tenant
from tests.platform_fixtures import LOAD_GENERATOR_LIMITS, ORIGIN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]
MAX_WEB_REDIS_CONNECTIONS = 8
# A tenant whose own quota lets the test's visitors all chat at once.
ROOMY = {"max_output_tokens": 48, "max_concurrent_streams": 200, "requests_per_minute": 1000}


@pytest.fixture(scope="module")
def front_door(django_db_setup, django_db_blocker, tmp_path_factory):
    from django.db import connection

    tiny = build_tiny_model(tmp_path_factory.mktemp("front-door") / "tiny")
    workers = [("cpu", "shared", {"CONCURRENCY": "1"}),
               ("prefill", "shared", {"TANDEM_THREADS": "1", "CONCURRENCY": "16", "TANDEM_PREFILL_MAX_BATCH": "16"}),
               ("decode", "shared", {"TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "64", "CONCURRENCY": "96"})]
    with running_platform(db_url=database_url(connection.settings_dict), model_dir=str(tiny), workers=workers,
                          extra_env={**LOAD_GENERATOR_LIMITS, "TANDEM_QUEUE_TIMEOUT_S": "120",
                                     "TANDEM_STALL_TIMEOUT_S": "120"},
                          log_dir=new_log_dir("front-door")) as p:
        p.client = redis_lib.Redis.from_url(p.env["REDIS_URL"])
        yield p


def web_connections(p) -> dict[str, int]:
    """Redis connections the web process holds, whoever opened them (Redis's CLIENT LIST
    matched to the process by the local ports of its TCP connections to Redis)."""
    redis_port = p.client.connection_pool.connection_kwargs["port"]
    mine = {c.laddr.port for c in psutil.Process(p.procs["web"].pid).net_connections(kind="tcp")
            if c.raddr and c.raddr.port == redis_port}
    by_name: dict[str, int] = {}
    for c in p.client.client_list():
        if int(c["addr"].rsplit(":", 1)[1]) in mine:
            name = f'{c.get("name") or "-"} {c.get("cmd")}'
            by_name[name] = by_name.get(name, 0) + 1
    return by_name


async def _open(url: str):
    ws = await connect(url, origin=ORIGIN, open_timeout=60, max_queue=None)
    first = json.loads(await asyncio.wait_for(ws.recv(), 60))  # a new visitor's signed id
    assert first["type"] == "visitor", first
    return ws


async def _chat(ws, text: str, *, read: bool = True) -> tuple[str, list[dict]]:
    """Send a message; return the reply's id and its frames up to its end (or error)."""
    await ws.send(json.dumps({"type": "message", "text": text, "conversation": None}))
    frames, message_id = [], None
    while True:
        f = json.loads(await asyncio.wait_for(ws.recv(), 120))
        if f["type"] == "error" and message_id is None:
            return "", [f]  # refused before it started (a quota, a bad frame)
        if f["type"] == "start":
            message_id = f["message"]
            if not read:
                return message_id, []
        elif message_id and f.get("message") == message_id:
            frames.append(f)
            if f["type"] in ("end", "error"):
                return message_id, frames


def _indices(frames: list[dict]) -> list[int]:
    return [f["index"] for f in frames if f["type"] == "token"]


def test_a_burst_of_500_sockets_all_connect_on_a_few_redis_connections(front_door):
    url = f"{front_door.ws_url}/ws/chat/?key={make_tenant().widget_key.plaintext}"

    async def main():
        results = await asyncio.gather(*(_open(url) for _ in range(500)), return_exceptions=True)
        opened = [r for r in results if not isinstance(r, BaseException)]
        held = web_connections(front_door)
        # Every one of them still works: one asks something and is answered.
        _, frames = await _chat(opened[-1], "Hello?")
        for ws in opened:
            await ws.close()
        return results, opened, held, frames

    results, opened, held, frames = asyncio.run(main())
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, f"{len(failures)} of 500 failed, e.g. {failures[0]!r}"
    assert len(opened) == 500
    assert sum(held.values()) <= MAX_WEB_REDIS_CONNECTIONS, held
    assert frames[-1]["type"] == "end"


def test_64_concurrent_replies_on_one_process_all_complete_with_exact_indices(front_door):
    url = f"{front_door.ws_url}/ws/chat/?key={make_tenant(**ROOMY).widget_key.plaintext}"

    async def main():
        sockets = [await _open(url) for _ in range(64)]
        replies = await asyncio.gather(*(_chat(ws, f"Question number {i}, tell me more.")
                                         for i, ws in enumerate(sockets)))
        held = web_connections(front_door)
        for ws in sockets:
            await ws.close()
        return replies, held

    replies, held = asyncio.run(main())
    for _, frames in replies:
        assert frames[-1]["type"] == "end", frames[-3:]
        indices = _indices(frames)
        assert indices == list(range(len(indices)))
        assert frames[-1]["usage"]["completion_tokens"] == len(indices)
    assert sum(held.values()) <= MAX_WEB_REDIS_CONNECTIONS, held


def test_a_client_that_never_reads_delays_nobody_and_gets_its_whole_reply_when_it_reads(front_door):
    url = f"{front_door.ws_url}/ws/chat/?key={make_tenant(**ROOMY).widget_key.plaintext}"

    async def main():
        stalled = await _open(url)
        stalled_id, _ = await _chat(stalled, "Tell me a long story.", read=False)
        others = [await _open(url) for _ in range(16)]
        replies = await asyncio.gather(*(_chat(ws, "Hi there.") for ws in others))
        # Now it reads: every token, in order, then the end.
        frames = []
        while not (frames and frames[-1].get("message") == stalled_id and frames[-1]["type"] in ("end", "error")):
            frames.append(json.loads(await asyncio.wait_for(stalled.recv(), 60)))
        for ws in [stalled, *others]:
            await ws.close()
        return replies, [f for f in frames if f.get("message") == stalled_id]

    replies, stalled_frames = asyncio.run(main())
    assert all(frames[-1]["type"] == "end" for _, frames in replies)
    assert stalled_frames[-1]["type"] == "end"
    indices = _indices(stalled_frames)
    assert indices == list(range(len(indices))) and len(indices) == stalled_frames[-1]["usage"]["completion_tokens"]


def test_a_client_that_asks_for_batched_frames_gets_every_token_once(front_door):
    """`batch=1` (docs/protocol.md): a token frame may carry `count` consecutive tokens."""
    url = f"{front_door.ws_url}/ws/chat/?key={make_tenant(**ROOMY).widget_key.plaintext}&batch=1"

    async def main():
        ws = await _open(url)
        got = await _chat(ws, "Tell me a story.")
        await ws.close()
        return got

    _, frames = asyncio.run(main())
    covered = []
    for f in frames:
        if f["type"] == "token":
            covered += range(f["index"], f["index"] + f.get("count", 1))
    assert covered == list(range(frames[-1]["usage"]["completion_tokens"]))


def test_sockets_that_connect_and_leave_leave_no_redis_connections_behind(front_door):
    url = f"{front_door.ws_url}/ws/chat/?key={make_tenant().widget_key.plaintext}"

    async def main():
        for _ in range(3):
            opened = await asyncio.gather(*(_open(url) for _ in range(100)))
            await asyncio.gather(*(ws.close() for ws in opened))
        return web_connections(front_door)

    held = asyncio.run(main())
    assert sum(held.values()) <= MAX_WEB_REDIS_CONNECTIONS, held


assert websockets  # the asyncio client used above ships with the `websockets` package
