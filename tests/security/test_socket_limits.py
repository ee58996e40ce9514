"""What one websocket may cost (issue 19, findings 4, 5 and 8): the sockets share one
Redis pool, are capped per key and per IP, close when idle, are rate-limited per frame,
and see only their own visitor's widget conversations. The consumer runs in this
process (so each test sets its own limits) against the session's real Redis and DB."""

from __future__ import annotations

import asyncio
import faulthandler
import sys
from contextlib import asynccontextmanager

import pytest
from channels.testing import WebsocketCommunicator

from inference.wire.connections import get_redis
from tandem.chat import services
from tandem.chat.consumers import ChatConsumer
from tests.factories import make_tenant
from tests.platform_fixtures import ORIGIN

pytestmark = pytest.mark.django_db(transaction=True)


def run_sockets(main):
    """asyncio.run(main()), and when it times out, where every task and thread stood (a
    hang here once failed CI and left nothing to read)."""
    async def watched():
        try:
            return await main()
        except TimeoutError:
            for task in asyncio.all_tasks():
                task.print_stack(file=sys.stderr)
            faulthandler.dump_traceback(all_threads=True)
            raise
    return asyncio.run(watched())


@asynccontextmanager
async def socket(key: str, ip: str = "198.51.100.1", extra: str = ""):
    comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/chat/?key={key}{extra}",
                                 headers=[(b"origin", ORIGIN.encode())])
    comm.scope["client"] = (ip, 50000)  # before the application first runs
    await comm.connect(timeout=20)
    try:
        yield comm
    finally:
        await comm.disconnect(timeout=20)


async def frames_until_close(comm, timeout: float = 20) -> tuple[list[dict], int | None]:
    out = []
    while True:
        msg = await comm.receive_output(timeout=timeout)
        if msg["type"] == "websocket.close":
            return out, msg.get("code")
        if msg.get("text"):
            import json
            frame = json.loads(msg["text"])
            if frame["type"] != "visitor":
                out.append(frame)


async def answer(comm, frame: dict) -> dict:
    await comm.send_json_to(frame)
    while True:
        got = await comm.receive_json_from(timeout=20)
        if got["type"] != "visitor":
            return got


def test_sockets_over_the_cap_per_ip_are_refused_and_another_ip_is_not(settings):
    settings.TANDEM_WS_MAX_PER_IP = 2
    key = make_tenant(origins=[ORIGIN]).widget_key.plaintext

    async def run():
        async with socket(key), socket(key):
            async with socket(key) as third:
                frames, code = await frames_until_close(third)
                assert frames[-1]["code"] == "too_many_connections" and code == 4429
            async with socket(key, ip="203.0.113.5") as elsewhere:
                assert (await answer(elsewhere, {"type": "history", "conversation": "x"}))["code"] == \
                    "conversation_not_found"
        async with socket(key) as again:  # the closed ones freed their places
            assert (await answer(again, {"type": "history", "conversation": "x"}))["type"] == "error"
    run_sockets(run)


def test_sockets_over_the_cap_per_key_are_refused_from_any_address_and_refusals_hold_no_place(settings):
    settings.TANDEM_WS_MAX_PER_KEY = 1
    key = make_tenant(origins=[ORIGIN]).widget_key.plaintext
    other = make_tenant(origins=[ORIGIN]).widget_key.plaintext

    async def run():
        async with socket(key, ip="192.0.2.10") as first:
            assert (await answer(first, {"type": "history", "conversation": "x"}))["code"] == "conversation_not_found"
            for ip in ("192.0.2.10", "192.0.2.11"):
                async with socket(key, ip=ip) as refused:
                    frames, code = await frames_until_close(refused)
                    assert frames[-1]["code"] == "too_many_connections" and code == 4429
            async with socket(other, ip="192.0.2.11") as another_key:
                assert (await answer(another_key, {"type": "history", "conversation": "x"}))["code"] == \
                    "conversation_not_found"
        async with socket(key, ip="192.0.2.11") as again:
            assert (await answer(again, {"type": "history", "conversation": "x"}))["code"] == "conversation_not_found"
    run_sockets(run)


def test_sockets_share_one_redis_pool_instead_of_one_each():
    key = make_tenant(origins=[ORIGIN]).widget_key.plaintext
    before = len(get_redis().client_list())

    async def run():
        async with socket(key, ip="192.0.2.1") as a:
            await answer(a, {"type": "history", "conversation": "x"})
            opened = len(get_redis().client_list())
            comms = []
            for n in range(8):
                comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/chat/?key={key}",
                                             headers=[(b"origin", ORIGIN.encode())])
                comm.scope["client"] = (f"192.0.2.{n + 2}", 1)
                await comm.connect(timeout=20)
                await answer(comm, {"type": "history", "conversation": "x"})
                comms.append(comm)
            grown = len(get_redis().client_list()) - opened
            for comm in comms:
                await comm.disconnect(timeout=20)
            return grown
    assert run_sockets(run) <= 2, "each socket opened a Redis connection of its own"
    assert before >= 1


def test_an_idle_socket_is_closed(settings):
    settings.TANDEM_WS_IDLE_TIMEOUT_S = 0.3
    key = make_tenant(origins=[ORIGIN]).widget_key.plaintext

    async def run():
        async with socket(key) as idle:
            frames, code = await frames_until_close(idle, timeout=10)
            assert frames[-1]["code"] == "idle_timeout" and code == 4408
    run_sockets(run)


def test_frames_beyond_the_sockets_rate_get_rate_limited_without_a_database_query(settings):
    settings.TANDEM_WS_FRAME_BURST, settings.TANDEM_WS_FRAME_RATE = 5, 1
    key = make_tenant(origins=[ORIGIN]).widget_key.plaintext

    async def run():
        async with socket(key) as comm:
            codes = [(await answer(comm, {"type": "resume", "message": "00000000-0000-0000-0000-000000000000"}))["code"]
                     for _ in range(30)]
        return codes
    codes = run_sockets(run)
    assert codes.count("rate_limited") >= 24 and codes[:5] == ["message_not_found"] * 5


def test_a_widget_socket_cannot_resume_or_append_to_a_rest_conversation():
    created = make_tenant(origins=[ORIGIN])
    sub = services.chat_submit(api_key=created.secret_key.api_key, messages=[("user", "Internal note")],
                               channel="api")
    conv, reply = str(sub.conversation.pk), str(sub.assistant_message.pk)

    async def run():
        async with socket(created.widget_key.plaintext) as comm:
            return [(await answer(comm, frame))["code"] for frame in [
                {"type": "resume", "message": reply, "after": -1},
                {"type": "message", "text": "appended?", "conversation": conv},
                {"type": "history", "conversation": conv}]]
    assert run_sockets(run) == ["message_not_found", "conversation_not_found", "conversation_not_found"]
    assert sub.conversation.messages.count() == 2
