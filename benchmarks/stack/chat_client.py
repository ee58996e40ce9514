"""Load on the platform the way the widget makes it: websocket clients speaking the chat
protocol (see tandem/chat/consumers.py), each timestamping every frame, run together or
in a closed loop (the next request as soon as the previous reply ends)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from ..traces import Trace
from .prompts import prompt_text
from .tenancy import ORIGIN


class ChatClient:
    """One websocket connection."""

    def __init__(self, ws_url: str, key: str, *, origin: str = ORIGIN, timeout: float = 180):
        import websockets.sync.client as ws_client

        self.timeout = timeout
        self.conn = ws_client.connect(f"{ws_url}/ws/chat/?key={key}", origin=origin, open_timeout=30,
                                      max_size=2**22)

    def close(self) -> None:
        self.conn.close()

    def ask(self, trace: Trace, text: str | None = None) -> Trace:
        """Send `text` (default: the trace's prompt) as a new conversation; fill `trace`
        until the reply ends."""
        trace.t_send = time.time()
        text = prompt_text(trace.prompt_n) if text is None else text
        self.conn.send(json.dumps({"type": "message", "text": text, "conversation": None}))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                raw = self.conn.recv(timeout=left)
            except TimeoutError:
                trace.error = trace.error or "client_timeout"
                return trace
            now = time.time()
            frame = json.loads(raw)
            kind = frame.get("type")
            if kind == "start":
                trace.t_start, trace.request_id = now, frame["message"]
            elif kind == "token" and frame.get("message") == trace.request_id:
                trace.next_token(now)
            elif kind == "end" and frame.get("message") == trace.request_id:
                trace.t_end, trace.usage = now, frame.get("usage")
                return trace
            elif kind == "error" and (trace.request_id is None or frame.get("message") == trace.request_id):
                # before `start`: the request was refused (quota, validation); after: it failed
                trace.t_end, trace.error = now, frame.get("code", "error")
                trace.retry_after = frame.get("retry_after")
                return trace


def together(n: int, fn: Callable[[int], object]) -> list:
    """fn(0) .. fn(n-1) on n threads released at the same moment; their results in order."""
    out: list = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait()
        out[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,), name=f"bench-client-{i}", daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def closed_loop(
    send: Callable[[int, Trace], Trace], *, clients: int, requests_per_client: int | None = None,
    stop: threading.Event | None = None, next_prompt: Callable[[], int], tenant: str = "",
    on_trace: Callable[[Trace], None] | None = None, retry_refused: bool = False, think_s: float = 0.0,
) -> list[Trace]:
    """`clients` senders, each sending one request at a time through `send(client,
    trace)` (the next as soon as the previous ends, after `think_s`),
    `requests_per_client` each or until `stop` is set. With `retry_refused`, a refused
    request (rate_limited) is recorded and retried after its retry_after (a well-behaved
    client); otherwise it counts as a request."""
    traces: list[Trace] = []
    lock = threading.Lock()
    pause = stop.wait if stop else time.sleep

    def run(i: int) -> None:
        done = 0
        while (requests_per_client is None or done < requests_per_client) and not (stop and stop.is_set()):
            tr = send(i, Trace(client=i, seq=done, prompt_n=next_prompt(), tenant=tenant))
            with lock:
                traces.append(tr)
            if on_trace:
                on_trace(tr)
            if tr.error == "rate_limited" and retry_refused:
                pause(min(max(tr.retry_after or 0.5, 0.05), 2.0))
                continue
            done += 1
            if think_s:
                pause(think_s)

    together(clients, run)
    return traces


def chat_loop(ws_url: str, key: str, *, clients: int, **loop) -> list[Trace]:
    """closed_loop over `clients` websocket connections, all opened before the first
    request is sent."""
    conns = [ChatClient(ws_url, key) for _ in range(clients)]
    try:
        return closed_loop(lambda i, tr: conns[i].ask(tr), clients=clients, **loop)
    finally:
        for c in conns:
            c.close()
