"""Visitors chatting: M websocket clients (one thread each), every one a visitor of its own
address, sending one message each at the same moment and timestamping every token frame;
and a slow one among them, whose reader takes one frame a second (a phone on a poor
network), whose reply nobody else should wait for."""

from __future__ import annotations

import json
import time

from ..stack.chat_client import ChatClient, together
from ..stack.tenancy import ORIGIN
from ..traces import Trace
from .idle import address


class Visitor(ChatClient):
    """ChatClient from an address of its own (X-Forwarded-For). With `batch`, it asks for
    token frames that carry several tokens (docs/protocol.md, `batch=1`) and counts each
    token of such a frame as arriving with it."""

    def __init__(self, ws_url: str, key: str, addr: str, *, batch: bool = False, timeout: float = 300):
        import websockets.sync.client as ws_client

        self.timeout = timeout
        # No client pings, as a browser sends none: the library's own keepalive would close
        # the slow reader's socket (its pong waits behind the frames it has not read yet).
        conn = ws_client.connect(f"{ws_url}/ws/chat/?key={key}" + ("&batch=1" if batch else ""), origin=ORIGIN,
                                 open_timeout=60, max_size=2**22, ping_interval=None,
                                 additional_headers={"X-Forwarded-For": addr})
        self.conn = _OneTokenPerFrame(conn) if batch else conn


class _OneTokenPerFrame:
    """A connection whose recv() hands a frame of k tokens on as k one-token frames (the
    text with the first), so ChatClient's counting of one token per frame holds."""

    def __init__(self, conn):
        self.conn, self.pending = conn, []

    def send(self, data) -> None:
        self.conn.send(data)

    def close(self) -> None:
        self.conn.close()

    def recv(self, timeout: float | None = None) -> str:
        if self.pending:
            return self.pending.pop(0)
        raw = self.conn.recv(timeout=timeout)
        frame = json.loads(raw)
        count = frame.get("count", 1) if frame.get("type") == "token" else 1
        if count == 1:
            return raw
        first = frame["index"]
        self.pending = [json.dumps({**frame, "index": first + i, "text": "", "count": 1}) for i in range(1, count)]
        return json.dumps({**frame, "count": 1})


def slow_ask(visitor: Visitor, trace: Trace, *, frame_every_s: float, until) -> Trace:
    """Send the trace's prompt and read one frame every `frame_every_s`, until the reply
    ends or `until()` is true; then cancel what is left of it (its decode slot is freed).
    A socket the server closed ends the trace with that as its error."""
    from websockets.exceptions import ConnectionClosed

    try:
        return _slow_ask(visitor, trace, frame_every_s=frame_every_s, until=until)
    except ConnectionClosed as exc:
        trace.error = f"closed {exc.rcvd.code if exc.rcvd else 'without a close frame'}"
        return trace


def _slow_ask(visitor: Visitor, trace: Trace, *, frame_every_s: float, until) -> Trace:
    trace.t_send = time.time()
    visitor.conn.send(json.dumps({"type": "message", "text": _prompt(trace), "conversation": None}))
    while not until():
        time.sleep(frame_every_s)  # the slow reader's pace is what is being simulated
        try:
            frame = json.loads(visitor.conn.recv(timeout=visitor.timeout))
        except TimeoutError:
            trace.error = "client_timeout"
            break
        kind = frame.get("type")
        if kind == "start":
            trace.request_id = frame["message"]
        elif kind == "token":
            trace.next_token(time.time())
        elif kind in ("end", "error") and frame.get("message") == trace.request_id:
            trace.t_end = time.time()
            return trace
    if trace.request_id:
        visitor.conn.send(json.dumps({"type": "cancel", "message": trace.request_id}))
    trace.error = trace.error or "slow_reader_stopped"
    return trace


def _prompt(trace: Trace) -> str:
    from ..stack.prompts import prompt_text

    return prompt_text(trace.prompt_n)


def open_visitors(ws_urls: list[str], key: str, n: int, *, first_address: int, batch: bool = False) -> list[Visitor]:
    """n visitors, spread over the web processes in turn, opened together."""
    return together(n, lambda i: Visitor(ws_urls[i % len(ws_urls)], key, address(first_address + i), batch=batch))


def chat_round(visitors: list[Visitor], *, first_prompt: int, slow: int | None = None,
               frame_every_s: float = 1.0) -> list[Trace]:
    """Every visitor sends one message at the same moment; visitor `slow` (if any) reads
    one frame every `frame_every_s`, and stops when all the others have their reply."""
    import threading

    n_fast = len(visitors) - (slow is not None)
    done = threading.Event()  # every fast visitor has its reply: the slow one stops reading
    finished = [0]
    lock = threading.Lock()

    def run(i: int) -> Trace:
        trace = Trace(client=i, prompt_n=first_prompt + i)
        if i == slow:
            return slow_ask(visitors[i], trace, frame_every_s=frame_every_s, until=done.is_set)
        try:
            return visitors[i].ask(trace)
        finally:
            with lock:
                finished[0] += 1
                if finished[0] == n_fast:
                    done.set()

    return together(len(visitors), run)


def close_all(visitors: list[Visitor]) -> None:
    for v in visitors:
        try:
            v.close()
        except Exception:  # noqa: BLE001 - a socket the server closed is closed already
            pass
