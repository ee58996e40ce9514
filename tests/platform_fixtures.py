"""The running platform for pipeline tests: daphne, a CPU worker, a prefill worker and a
decode worker, on the real SmolLM2 model (fp32, so greedy output can be compared token
for token with Hugging Face's), the test database and the test Redis."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

import pytest
import websockets.sync.client as ws_client

from devstack.processes import database_url, new_log_dir, running_platform
from inference.engine.prepare import DEFAULT_DIR, prepare_model
from inference.wire.connections import get_redis

ORIGIN = "http://testserver"
DECODE_SLOTS = 2


@pytest.fixture(scope="session")
def model_dir():
    return str(prepare_model(DEFAULT_DIR))


# Every test drives the platform from one address, some from one visitor: the
# per-visitor and per-IP limits and socket caps (docs/security.md) are tested on their
# own (tests/security), and lifted here.
LOAD_GENERATOR_LIMITS = {name: "1000000" for name in (
    "TANDEM_WIDGET_VISITOR_RPM", "TANDEM_WIDGET_VISITOR_TPM", "TANDEM_WIDGET_VISITOR_STREAMS",
    "TANDEM_WIDGET_IP_RPM", "TANDEM_WIDGET_IP_TPM", "TANDEM_WIDGET_IP_STREAMS",
    "TANDEM_WS_MAX_PER_KEY", "TANDEM_WS_MAX_PER_IP", "TANDEM_WS_FRAME_BURST")}


@pytest.fixture(scope="session")
def platform(django_db_setup, django_db_blocker, model_dir):
    from django.db import connection

    common = {"TANDEM_DTYPE": "float32", "TANDEM_THREADS": "1"}
    workers = [
        ("cpu", "shared", {"CONCURRENCY": "1"}),
        ("prefill", "shared", {**common, "CONCURRENCY": "4", "TANDEM_CPU_AFFINITY": "0"}),
        ("decode", "shared", {**common, "CONCURRENCY": str(DECODE_SLOTS * 2),
                              "TANDEM_MAX_BATCH": str(DECODE_SLOTS), "TANDEM_CPU_AFFINITY": "1"}),
    ]
    with running_platform(db_url=database_url(connection.settings_dict), model_dir=model_dir,
                          workers=workers, extra_env={"TANDEM_QUEUE_TIMEOUT_S": "8", "TANDEM_STALL_TIMEOUT_S": "20",
                                     **LOAD_GENERATOR_LIMITS},
                          log_dir=new_log_dir("tests")) as p:
        yield p


@pytest.fixture(autouse=True)
def platform_idle(request):
    """The session platform's workers hold nothing when a test that drives it starts, nor
    when a test that may have sent it work ends.

    - Start: an earlier test may have left replies running that nobody follows (a
      submission through the services, a socket closed mid-reply): their listener lease
      lets them run on for streams.LISTENER_TTL_S, in the decode slots this test's reply
      then waits for past its stall timeout.
    - End, before the database is flushed (this fixture's teardown runs before
      transactional_db's): a worker finishing such a reply while the flush's TRUNCATE
      runs deadlocks with it (seen in CI)."""
    if "platform" in request.fixturenames:
        settle(get_redis(), timeout=60)
    marker = request.node.get_closest_marker("django_db")
    if marker is None or not marker.kwargs.get("transaction"):
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    settle(get_redis(), timeout=60)


def settle(client, *, timeout: float) -> None:
    """Cancel every request a live worker holds or has been sent, and wait until none
    holds one and none is still to take one: a cancelled request's task that a worker
    takes later still writes its end to the database (seen deadlocking with a flush)."""
    from inference.pipeline.submit import request_cancel
    from inference.wire import broker, keys
    from inference.wire.worker_ownership import unreceived
    from inference.wire.workers import dead_workers, live_workers

    def live(*, dead_too: bool = False) -> list[dict]:
        gone = set() if dead_too else {d.name for d in dead_workers(client)}
        return [w for w in live_workers(client) if w["name"] not in gone]

    def held(*, dead_too: bool = False) -> set[str]:
        pipe = client.pipeline(transaction=False)
        for w in live(dead_too=dead_too):
            pipe.smembers(keys.worker_requests(w["name"]))
        return {r.decode() for members in pipe.execute() for r in members}

    def to_take() -> set[str]:
        """Stages sent to a queue a live worker serves and not yet taken, less those whose
        message is lost (a killed consumer's: no worker will run them)."""
        queues = {broker.queue_name(w["role"], w["pool"]) for w in live()}
        names = list(client.scan_iter(match=keys.SENT_PATTERN, count=500))
        records = client.mget(names) if names else []
        sent = {name.decode().removeprefix(keys.sent("")) for name, raw in zip(names, records, strict=True)
                if raw is not None and json.loads(raw).get("queue") in queues}
        lost = {u.request_id for q in queues for u in unreceived(client, q, older_than_s=10)} if sent else set()
        return sent - lost

    # An outbound task first (an action call, a webhook delivery): it writes its end, and
    # an action's continuation is a request of its own, cancelled below.
    deadline = time.monotonic() + timeout
    outbound_idle(client, deadline=deadline)
    # A killed worker's requests (its heartbeat not yet expired) are cancelled too, since
    # they migrate to a live one; only live workers are waited for.
    sent = {k.decode().rsplit(":", 1)[1] for k in client.scan_iter(match=keys.SENT_PATTERN, count=500)}
    for request_id in held(dead_too=True) | sent:
        request_cancel(request_id=request_id, client=client)
    while (left := held() | to_take()):
        assert time.monotonic() < deadline, f"cancelled requests still held or to be taken by workers: {sorted(left)}"
        time.sleep(0.02)


def outbound_idle(client, *, deadline: float) -> None:
    """Wait until no task of an outbound queue a worker consumes (tests.outbound: action
    calls, webhook deliveries) waits in its queue or runs: a task taken is in Kombu's
    `unacked` hash until it returns (acks_late), so until it has written its end. Seen
    idle twice 50 ms apart: a message BRPOP has taken is in neither place for an instant
    before the worker records it."""
    from inference.wire.broker import priority_lists
    from tests.outbound import CONSUMED

    def busy() -> int:
        queues = tuple(CONSUMED)
        if not queues:
            return 0
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            for name in priority_lists(queue):
                pipe.llen(name)
        pipe.hvals("unacked")
        *lengths, unacked = pipe.execute()
        return sum(lengths) + sum(json.loads(raw)[2] in queues for raw in unacked)

    quiet = 0
    while quiet < 2:
        assert time.monotonic() < deadline, f"outbound tasks still queued or running: {busy()}"
        quiet = quiet + 1 if not busy() else 0
        time.sleep(0.05)


@pytest.fixture(scope="session")
def reference_model(model_dir):
    """Hugging Face's own model and generate(), the reference the platform must match."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return tok, model


class ChatSocket:
    """A websocket client speaking docs/protocol.md, with a timeout on every receive."""

    def __init__(self, conn):
        self.conn = conn

    def send(self, frame: dict | str) -> None:
        self.conn.send(frame if isinstance(frame, str) else json.dumps(frame))

    visitor_token: str | None = None  # the signed visitor id the server issued, if it did

    def recv(self, timeout: float = 60) -> dict:
        while True:
            frame = json.loads(self.conn.recv(timeout=timeout))
            if frame.get("type") != "visitor":  # sent once, at connect, to a new visitor
                return frame
            self.visitor_token = frame["token"]

    def recv_until(self, predicate, timeout: float = 120) -> list[dict]:
        frames = []
        while True:
            frame = self.recv(timeout)
            frames.append(frame)
            if predicate(frame):
                return frames

    def ask(self, text: str, conversation=None) -> tuple[str, list[dict]]:
        """Send a message; return its id and every frame up to its end (or error)."""
        self.send({"type": "message", "text": text, "conversation": conversation})
        frames = self.recv_until(lambda f: f["type"] == "start")
        message_id = frames[-1]["message"]
        frames += self.recv_until(lambda f: f.get("message") == message_id and f["type"] in ("end", "error"))
        return message_id, frames


@contextmanager
def chat_socket(platform, key: str, origin: str = ORIGIN, visitor: str | None = None):
    """`visitor`: the signed token a visitor was issued (a previous socket's
    `visitor_token`), to come back as the same visitor."""
    query = f"key={key}" + (f"&visitor={quote(visitor)}" if visitor else "")
    with ws_client.connect(f"{platform.ws_url}/ws/chat/?{query}", origin=origin, open_timeout=20) as conn:
        yield ChatSocket(conn)


def signed_in_agent(client, tenant, first_name: str):
    """A new agent of `tenant`, signed in on the Django test `client` (its session cookie
    opens the agent socket)."""
    from tenants.models import Membership
    from tests.factories import UserFactory

    agent = UserFactory(first_name=first_name)
    Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    client.force_login(agent)
    return agent


def ask_for_person(chat: ChatSocket):
    """The visitor presses "Talk to a person" in a new conversation; returns it once the
    widget has been told it is handed over."""
    from tandem.chat.models import Conversation

    chat.send({"type": "handoff", "conversation": None})
    cid = chat.recv()["id"]
    chat.recv_until(lambda f: f["type"] == "handoff")
    return Conversation.objects.get(pk=cid)


def tokens_of(frames: list[dict], message_id: str) -> list[dict]:
    return [f for f in frames if f["type"] == "token" and f["message"] == message_id]


@dataclass
class WebProcess:
    """One more daphne process of the session platform (what chat_socket needs of it)."""

    base_url: str

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http")


@pytest.fixture
def second_web(platform):
    """A second daphne process on the session platform's database and Redis, as a
    deployment's second web replica; stopped after the test."""
    from devstack.processes import extra_web

    with extra_web(platform) as base_url:
        yield WebProcess(base_url)
