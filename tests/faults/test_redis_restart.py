"""Redis restarts under a running platform (its own Redis, with the append-only file
compose turns on; the tiny model): the workers and the web tier's stream reader
reconnect by themselves, the reply in flight continues on the same socket without an
error or a resume, and the platform serves the next one."""

from __future__ import annotations

import json

import pytest
import redis as redis_lib
import websockets.sync.client as ws_client

from devstack import embedded_redis
from devstack.processes import database_url, free_port, new_log_dir, running_platform
from inference.engine.tiny import build_tiny_model
from inference.wire.workers import live_workers
from tandem.chat.models import Message
from tests.factories import make_tenant
from tests.platform_fixtures import ORIGIN

from .conftest import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]


def test_a_reply_in_flight_when_redis_restarts_resumes_and_the_platform_serves_on(
        django_db_setup, tmp_path_factory):
    from django.db import connection

    tiny = build_tiny_model(tmp_path_factory.mktemp("redis-restart") / "tiny")
    port, workdir = free_port(), tmp_path_factory.mktemp("redis-aof")
    server = embedded_redis.start(port=port, workdir=workdir, appendonly=True)
    url = f"redis://127.0.0.1:{port}/0"
    decode_env = {"TANDEM_THREADS": "1", "TANDEM_MAX_BATCH": "4", "CONCURRENCY": "8"}
    workers = [("cpu", "shared", {"CONCURRENCY": "1"}), ("prefill", "shared", {"TANDEM_THREADS": "1"}),
               ("decode", "shared", decode_env)]
    tenant = make_tenant(max_output_tokens=400)
    try:
        with running_platform(db_url=database_url(connection.settings_dict), model_dir=str(tiny), workers=workers,
                              extra_env={"REDIS_URL": url, "CELERY_BROKER_URL": url,
                                         "TANDEM_QUEUE_TIMEOUT_S": "60", "TANDEM_STALL_TIMEOUT_S": "60"},
                              log_dir=new_log_dir("redis-restart")) as p:
            client = redis_lib.Redis.from_url(url)
            with ws_client.connect(f"{p.ws_url}/ws/chat/?key={tenant.widget_key.plaintext}", origin=ORIGIN,
                                   open_timeout=20) as conn:
                def frame():
                    return json.loads(conn.recv(timeout=120))

                conn.send(json.dumps({"type": "message", "text": "Tell me a very long story.", "conversation": None}))
                message_id = until(lambda: (f := frame())["type"] == "start" and f["message"], timeout=60,
                                   what="the reply's start")
                seen = []
                while len(seen) < 5:
                    f = frame()
                    if f["type"] == "token":
                        seen.append(f["index"])
                server.terminate()  # a restart: Redis writes its append-only file and exits
                server.wait(timeout=30)
                server = embedded_redis.start(port=port, workdir=workdir, appendonly=True)

                # The web process's stream reader reconnects by itself: the socket keeps
                # following, with no error and no resume from the client.
                frames = []
                while True:
                    f = frame()
                    frames.append(f)
                    if f.get("message") == message_id and f["type"] in ("end", "error"):
                        break
                tokens = seen + [x["index"] for x in frames if x["type"] == "token"]
                assert f["type"] == "end", frames[-5:]
                assert tokens == list(range(len(tokens)))
                assert f["usage"]["completion_tokens"] == len(tokens)
                assert Message.objects.get(pk=message_id).status == "done"

                # Every worker beats again, and the platform answers the next message.
                assert {w["role"] for w in live_workers(client)} >= {"cpu", "prefill", "decode"}
                conn.send(json.dumps({"type": "message", "text": "Hello again.", "conversation": None}))
                until(lambda: frame()["type"] == "end", timeout=120, what="the next reply's end")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
